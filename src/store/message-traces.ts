/** SQL for a trace's messages (0039_trace_index.sql; docs/decisions.md#trace-context). */
import type { MessageRecord } from "../model/messages.js";
import type { Db } from "./db.js";
import { COLUMNS, accessible, toRecord, type MessageRow } from "./message-rows.js";

/**
 * $1 trace id (32 hex), $2 the reading key: the trace's live messages of
 * channels the key may read, oldest first, at most 100 (messages_trace:
 * the traceparent's trace id field).
 */
export const TRACE_MESSAGES_SQL = `SELECT ${COLUMNS} FROM messages m
  WHERE substr(m.trace_parent, 4, 32) = $1 AND ${accessible("$2")}
  ORDER BY m.created_at, m.id LIMIT 100`;

export async function traceMessages(db: Db, traceId: string, keyId: string): Promise<MessageRecord[]> {
  const { rows } = await db.query<MessageRow>(TRACE_MESSAGES_SQL, [traceId, keyId], "trace_messages");
  return rows.map(toRecord);
}
