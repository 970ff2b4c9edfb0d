/**
 * Reads of one message (live or archived, with its channel and the
 * caller's standing) and of a channel's queue state: what refusals, waits
 * and stats read. The statements are in message-reads-sql.ts and here.
 */
import type { ChannelAccess, ChannelMode } from "../model/channels.js";
import type { ArchiveReason, FoundMessage, MessageInspection, QueueStats } from "../model/messages.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { STATS_SQL } from "./message-reads-sql.js";
import { COLUMNS, toRecord, type MessageRow } from "./message-rows.js";

/** $1 message, $2 the caller's key: the live row, else the archived one. */
const FIND_SQL = `SELECT x.*, c.mode, c.access, c.created_by_key_id AS owner_key_id,
    EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = c.id AND cm.key_id = $2) AS is_member
  FROM (
    SELECT ${COLUMNS}, NULL::timestamptz AS archived_at, NULL::text AS reason FROM messages m WHERE m.id = $1
    UNION ALL
    SELECT ${COLUMNS}, m.archived_at, m.reason FROM message_history m WHERE m.id = $1
  ) x JOIN channels c ON c.id = x.channel_id
  ORDER BY x.archived_at NULLS FIRST LIMIT 1`;

/** The message live, or else its archived copy, with its channel and the caller's standing. */
export async function findMessage(db: Db, messageId: string, keyId: string): Promise<FoundMessage | undefined> {
  const { rows } = await db.query<MessageRow & { archived_at: Micros | null; reason: ArchiveReason | null; mode: ChannelMode; access: ChannelAccess; owner_key_id: string; is_member: boolean }>(
    FIND_SQL,
    [messageId, keyId],
    "find_message",
  );
  const row = rows[0];
  return (
    row && {
      message: toRecord(row),
      archivedAt: row.archived_at,
      archivedReason: row.reason,
      mode: row.mode,
      access: row.access,
      channelOwnerKeyId: row.owner_key_id,
      callerIsMember: row.is_member,
    }
  );
}

/** The message with its channel's mode and the caller's standing, for classifying a refusal. */
export async function inspectMessage(db: Db, messageId: string, keyId: string): Promise<MessageInspection | undefined> {
  const { rows } = await db.query<MessageRow & { mode: ChannelMode; access: ChannelAccess; owner_key_id: string; is_member: boolean }>(
    `SELECT ${COLUMNS}, c.mode, c.access, c.created_by_key_id AS owner_key_id,
       EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = c.id AND cm.key_id = $2) AS is_member
     FROM messages m JOIN channels c ON c.id = m.channel_id WHERE m.id = $1`,
    [messageId, keyId],
    "inspect_message",
  );
  const row = rows[0];
  return (
    row && {
      message: toRecord(row),
      mode: row.mode,
      access: row.access,
      channelOwnerKeyId: row.owner_key_id,
      callerIsMember: row.is_member,
    }
  );
}

/** The channel's queue state at `now` (STATS_SQL). */
export async function queueStats(db: Db, channelId: string, now: Micros): Promise<QueueStats> {
  const { rows } = await db.query<{
    ready: number;
    delayed: number;
    in_flight: number;
    acknowledged: number;
    dead_lettered: number;
    expired: number;
    cancelled: number;
    blocked: number;
    waiting: number;
    oldest_ready_since: Micros | null;
    claim_to_ack_p50_ms: number | null;
    claim_to_ack_avg_ms: number | null;
    live: number;
    ready_by_priority: number[];
    groups: { count: number; in_flight: number; top: Array<{ group_key: string; ready: number; in_flight: number; oldest_ready_since: number | null }> } | null;
  }>(STATS_SQL, [channelId, formatTimestamp(now)], "channel_stats");
  const row = rows[0]!;
  return {
    ready: row.ready,
    delayed: row.delayed,
    inFlight: row.in_flight,
    acknowledged: row.acknowledged,
    deadLettered: row.dead_lettered,
    expired: row.expired,
    cancelled: row.cancelled,
    blocked: row.blocked,
    waiting: row.waiting,
    oldestReadySince: row.oldest_ready_since,
    claimToAckP50Ms: row.claim_to_ack_p50_ms,
    claimToAckAvgMs: row.claim_to_ack_avg_ms,
    live: row.live,
    readyByPriority: [0, 1, 2, 3, 4].map((i) => row.ready_by_priority[i] ?? 0) as QueueStats["readyByPriority"],
    groups:
      row.groups === null
        ? null
        : {
            count: row.groups.count,
            inFlight: row.groups.in_flight,
            top: row.groups.top.map((g) => ({ groupKey: g.group_key, ready: g.ready, inFlight: g.in_flight, oldestReadySince: g.oldest_ready_since })),
          },
  };
}
