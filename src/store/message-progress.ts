/**
 * Recording a lease holder's progress report (docs/decisions.md#progress):
 * the row is locked, the text worked out (appended and kept to its last
 * 64 KiB of UTF-8, which SQL cannot cut at a character's start), then
 * written. Exported so the query-plan tests can EXPLAIN what runs.
 */
import { keepProgressTail, type MessageRecord, type NewProgress } from "../model/messages.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { COLUMNS, NOT_ACKNOWLEDGED, toRecord, type MessageRow } from "./message-rows.js";

/** $1 message, $2 lease token, $3 key, $4 now: the message while this key holds it under this lease. */
export const HELD_FOR_PROGRESS_SQL = `SELECT m.progress_text FROM messages m
  WHERE m.id = $1 AND m.lease_token = $2 AND m.claimed_by_key_id = $3 AND m.lease_expires_at > $4 AND m.expires_at > $4
    AND ${NOT_ACKNOWLEDGED}
  FOR NO KEY UPDATE`;

/**
 * $1 message, $2 data (null: kept), $3 text (null: kept), $4 now. The time
 * moves forward at every report, a microsecond at least, so a follower
 * waiting for progress newer than what it saw always sees the next one.
 */
export const WRITE_PROGRESS_SQL = `UPDATE messages m SET progress_data = coalesce($2::jsonb, m.progress_data, '{}'::jsonb),
    progress_text = coalesce($3::text, m.progress_text, ''),
    progress_updated_at = greatest($4::timestamptz, m.progress_updated_at + interval '1 microsecond')
  WHERE m.id = $1
  RETURNING ${COLUMNS}`;

export async function reportProgress(db: Db, messageId: string, leaseToken: string, keyId: string, now: Micros, progress: NewProgress): Promise<MessageRecord | undefined> {
  return db.transaction(async () => {
    const at = formatTimestamp(now);
    const { rows } = await db.query<{ progress_text: string | null }>(HELD_FOR_PROGRESS_SQL, [messageId, leaseToken, keyId, at], "progress_held");
    const held = rows[0];
    if (held === undefined) return undefined;
    const text = progress.text === null ? null : keepProgressTail(progress.append ? (held.progress_text ?? "") + progress.text : progress.text);
    const written = await db.query<MessageRow>(WRITE_PROGRESS_SQL, [messageId, progress.data === null ? null : JSON.stringify(progress.data), text, at], "progress_write");
    return toRecord(written.rows[0]!);
  });
}
