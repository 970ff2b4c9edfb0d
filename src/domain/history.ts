/**
 * A channel's history (docs/decisions.md#expiry-and-history): its expired and retracted messages,
 * kept for retention_days after archiving, newest first. Readable by whoever
 * may read the channel (docs/decisions.md#channel-access).
 */
import type { Caller } from "../model/caller.js";
import { assertCanUse, type ChannelView } from "./channel.js";
import { ApiError } from "../model/errors.js";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, parseCursor } from "./messages.js";
import { formatTimestamp } from "../model/time.js";
import type { Db } from "../store/db.js";
import { listHistory, type HistoryRecord } from "../store/history.js";

export type ChannelViewFinder = (identifier: string, caller: Caller) => Promise<ChannelView | undefined>;

export interface HistoryQuery {
  /** next_cursor of the previous page; "0" or absent: from the newest. */
  cursor: string | undefined;
  limit: number | undefined;
}

export interface HistoryPage {
  data: HistoryRecord[];
  limit: number;
  /** The last item's created_at when the page is full (there may be more), else null. */
  nextCursor: string | null;
}

export class ChannelHistory {
  constructor(
    private readonly db: Db,
    private readonly findChannel: ChannelViewFinder,
  ) {}

  async list(caller: Caller, identifier: string, query: HistoryQuery): Promise<HistoryPage> {
    const limit = query.limit ?? DEFAULT_PAGE_SIZE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
      throw new ApiError("invalid_limit", `'limit' must be an integer from 1 to ${MAX_PAGE_SIZE}`, { details: { field: "limit" } });
    }
    const before = parseCursor("cursor", query.cursor);
    const channel = await this.findChannel(identifier, caller);
    if (!channel) throw new ApiError("channel_not_found");
    assertCanUse(channel, caller);
    const data = await listHistory(this.db, channel.id, before, limit);
    const last = data.at(-1);
    return { data, limit, nextCursor: data.length === limit && last ? formatTimestamp(last.createdAt) : null };
  }
}
