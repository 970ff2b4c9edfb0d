/** SQL for message_history: the history page of a channel (docs/decisions.md#expiry-and-history). */
import type { ArchiveReason } from "../model/messages.js";
import type { HistoryRecord } from "../model/history.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { HistoryStore } from "../ports/history.js";
import type { Db } from "./db.js";
import { COLUMNS, toRecord, type MessageRow } from "./message-rows.js";

/**
 * One page, newest first: $1 channel, $2 before (exclusive; 'infinity' for
 * the newest), $3 limit. Served by message_history_page
 * (channel_id, created_at DESC, id DESC) without a sort step; exported so the
 * query-plan test EXPLAINs exactly this.
 */
export const HISTORY_PAGE_SQL = `SELECT ${COLUMNS}, m.archived_at, m.reason FROM message_history m
  WHERE m.channel_id = $1 AND m.created_at < $2
  ORDER BY m.created_at DESC, m.id DESC LIMIT $3`;

export async function listHistory(db: Db, channelId: string, before: Micros | null, limit: number): Promise<HistoryRecord[]> {
  const { rows } = await db.query<MessageRow & { archived_at: Micros; reason: ArchiveReason }>(
    HISTORY_PAGE_SQL,
    [channelId, before === null ? "infinity" : formatTimestamp(before), limit],
    "history_page",
  );
  return rows.map((row) => ({ ...toRecord(row), archivedAt: row.archived_at, reason: row.reason }));
}

export class PgHistoryStore implements HistoryStore {
  constructor(private readonly db: Db) {}

  list(channelId: string, before: Micros | null, limit: number): Promise<HistoryRecord[]> {
    return listHistory(this.db, channelId, before, limit);
  }
}
