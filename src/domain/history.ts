/**
 * A channel's history (docs/decisions.md#expiry-and-history): its expired and retracted messages,
 * kept for retention_days after archiving, newest first. Readable by whoever
 * may read the channel (docs/decisions.md#channel-access).
 */
import type { Caller } from "../model/caller.js";
import { assertCanUse, namedChannel } from "./channel.js";
import { parseCursor } from "./message-rules.js";
import { validatePageLimit } from "./paging.js";
import { formatTimestamp } from "../model/time.js";
import type { HistoryRecord } from "../model/history.js";
import type { ChannelStore } from "../ports/channels.js";
import type { HistoryStore } from "../ports/history.js";

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
    private readonly history: HistoryStore,
    private readonly channels: ChannelStore,
  ) {}

  async list(caller: Caller, identifier: string, query: HistoryQuery): Promise<HistoryPage> {
    const limit = validatePageLimit(query.limit);
    const before = parseCursor("cursor", query.cursor);
    const channel = namedChannel(await this.channels.findView(identifier, caller.keyId), identifier);
    assertCanUse(channel, caller);
    const data = await this.history.list(channel.id, before, limit);
    const last = data.at(-1);
    return { data, limit, nextCursor: data.length === limit && last ? formatTimestamp(last.createdAt) : null };
  }
}
