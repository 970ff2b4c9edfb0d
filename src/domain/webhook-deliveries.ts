/**
 * The channel webhook's delivery log (docs/decisions.md#webhook-delivery):
 * every attempt, newest first, kept 7 days; owner only
 * (docs/decisions.md#owner-only), a stranger to a restricted channel gets
 * channel_access_denied first.
 */
import type { Caller } from "../model/caller.js";
import { assertOwner, namedChannel } from "./channel.js";
import type { ChannelLookup, ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import { validatePageLimit } from "./paging.js";
import type { DeliveryLogRecord } from "../model/webhooks.js";
import type { WebhookStore } from "../ports/webhooks.js";

export type ChannelViewFinder = (identifier: string, caller: Caller) => Promise<ChannelLookup<ChannelView>>;

export interface DeliveryLogPage {
  data: DeliveryLogRecord[];
  limit: number;
  /** The last item's id when the page is full (older entries may follow), else null. */
  nextCursor: string | null;
}

/** Log ids are positive integers; the cursor is the id of the last item of the previous page. */
const CURSOR = /^[1-9][0-9]{0,17}$/;

export class WebhookDeliveryLog {
  constructor(
    private readonly store: WebhookStore,
    private readonly findChannel: ChannelViewFinder,
  ) {}

  async list(caller: Caller, identifier: string, query: { cursor: string | undefined; limit: number | undefined }): Promise<DeliveryLogPage> {
    const limit = validatePageLimit(query.limit);
    const cursor = query.cursor === undefined || query.cursor === "" ? null : query.cursor;
    if (cursor !== null && !CURSOR.test(cursor)) {
      throw new ApiError("invalid_cursor", "'cursor' must be the next_cursor of a previous page of this log", {
        details: { field: "cursor" },
        suggestion: "Pass next_cursor from the previous page unchanged, or leave cursor out for the newest attempts.",
      });
    }
    const channel = namedChannel(await this.findChannel(identifier, caller), identifier);
    assertOwner(channel, caller);
    const data = await this.store.listDeliveries(channel.id, cursor, limit);
    const last = data.at(-1);
    return { data, limit, nextCursor: data.length === limit && last ? last.id : null };
  }
}
