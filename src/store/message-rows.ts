/**
 * Live messages as the statements read them: the columns, the row shape and
 * its record, and the conditions (open, acknowledged, lapsed, accessible)
 * the statements of store/messages.ts and store/receive-sql.ts share.
 */
import type { ActorRef } from "../model/actors.js";
import type { JsonValue } from "../model/json.js";
import type { Acknowledgement, MessageRecord } from "../model/messages.js";
import { parseTimestamp, type Micros } from "../model/time.js";

export interface MessageRow {
  id: string;
  channel_id: string;
  author_key_id: string;
  author_label: string | null;
  actor_id: string | null;
  actor_name: string | null;
  actor_label: string | null;
  content: string;
  metadata: { [key: string]: JsonValue };
  mentions: ActorRef[];
  created_at: Micros;
  expires_at: Micros;
  available_at: Micros;
  claimed_by_key_id: string | null;
  claimed_by_actor_id: string | null;
  claimed_by_actor_name: string | null;
  claimed_at: Micros | null;
  lease_token: string | null;
  lease_expires_at: Micros | null;
  acknowledged_by: Array<{ id: string; name: string; occurred_at: string; metadata?: { [key: string]: JsonValue } }>;
  result: string | null;
  delivery_count: number;
  dead_letter: { origin_channel_id: string; origin_message_id: string; delivery_count: number; last_error: string } | null;
  /** Absent in rows read by statements that predate groups (history readers list their own columns). */
  group_key?: string | null;
  priority?: number;
  limit_names?: string[];
  /** The channel's max_deliveries, read for a message delivered at least once (COLUMNS). */
  max_deliveries?: number | null;
  cancel_requested_at?: Micros | null;
  cancel_reason?: string | null;
  progress_data?: { [key: string]: JsonValue } | null;
  progress_text?: string | null;
  progress_updated_at?: Micros | null;
  depends_on?: string[] | null;
  blocked_by?: number;
  dependents_count?: number;
  waitpoint_id?: string | null;
  /** {"data": ...} once the waitpoint was completed; null while waiting or after a timeout. */
  waitpoint_outcome?: { data?: { [key: string]: JsonValue } } | null;
  trace_parent?: string | null;
  trace_state?: string | null;
}

export const COLUMNS = `m.id, m.channel_id, m.author_key_id, m.actor_id, m.actor_name, m.actor_label, m.content, m.metadata,
  m.mentions, m.created_at, m.expires_at, m.claimed_by_key_id, m.claimed_by_actor_id, m.claimed_by_actor_name,
  m.claimed_at, m.lease_token, m.lease_expires_at, m.acknowledged_by, m.result, m.delivery_count, m.dead_letter,
  coalesce(m.available_at, m.created_at) AS available_at,
  (SELECT k.agent_label FROM api_keys k WHERE k.key_id = m.author_key_id) AS author_label,
  m.group_key, m.priority,
  CASE WHEN m.limit_ids = '{}' THEN '{}'::text[] ELSE ARRAY(SELECT l.name FROM limits l WHERE l.id = ANY (m.limit_ids) ORDER BY l.name) END AS limit_names,
  CASE WHEN m.delivery_count = 0 THEN NULL ELSE (SELECT c.max_deliveries FROM channels c WHERE c.id = m.channel_id) END AS max_deliveries,
  m.cancel_requested_at, m.cancel_reason, m.progress_data, m.progress_text, m.progress_updated_at,
  m.depends_on, m.blocked_by, m.dependents_count, m.waitpoint_id, m.waitpoint_outcome, m.trace_parent, m.trace_state`;

/**
 * Every stored column of a message, in the order of an explicit column list:
 * copying to message_history names them, because columns added later (like
 * result) sit at different positions in the two tables.
 */
export const MESSAGE_FIELDS = `id, channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions,
  created_at, expires_at, claimed_by_key_id, claimed_by_actor_id, claimed_by_actor_name, claimed_at, claim_metadata,
  lease_token, lease_expires_at, acknowledged_by, result, delivery_count, available_at, dead_letter, group_key, priority, limit_ids, held_limit_ids,
  cancel_requested_at, cancel_reason, cancel_expires_at, progress_data, progress_text, progress_updated_at,
  depends_on, blocked_by, dependents_count, waitpoint_id, waitpoint_outcome, trace_parent, trace_state, a2a_push`;

/** The caller may use the channel of message m: open, owner, or member. Parameter $KEY is the caller's key. */
export const accessible = (key: string) => `EXISTS (
  SELECT 1 FROM channels c WHERE c.id = m.channel_id AND (c.access = 'open' OR c.created_by_key_id = ${key}
    OR EXISTS (SELECT 1 FROM channel_members cm WHERE cm.channel_id = c.id AND cm.key_id = ${key})))`;

/** Open work from now on: not delayed past now (docs/decisions.md#delays). NULL is "since created_at". */
export const AVAILABLE = (now: string) => `(m.available_at IS NULL OR m.available_at <= ${now})`;

/**
 * Nobody acknowledged it: an acknowledged message is finished, whether it
 * was claimed first or not (docs/decisions.md#claims), so it is never open work again.
 */
export const NOT_ACKNOWLEDGED = "m.acknowledged_by = '[]'::jsonb";

/**
 * A claim that no longer holds: its lease ran out before any acknowledgement.
 * Null-safe (plain claims have no lease), so NOT LAPSED is true for them.
 */
export const LAPSED = (now: string) => `(m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= ${now} AND ${NOT_ACKNOWLEDGED})`;

export function toRecord(row: MessageRow): MessageRecord {
  return {
    id: row.id,
    channelId: row.channel_id,
    authorKeyId: row.author_key_id,
    authorLabel: row.author_label ?? "",
    actor: row.actor_id === null ? null : { id: row.actor_id, name: row.actor_name ?? "" },
    actorLabel: row.actor_label,
    content: row.content,
    metadata: row.metadata,
    mentions: row.mentions,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    availableAt: row.available_at,
    claim:
      row.claimed_by_key_id === null
        ? null
        : {
            keyId: row.claimed_by_key_id,
            actor: { id: row.claimed_by_actor_id ?? "", name: row.claimed_by_actor_name ?? "" },
            claimedAt: row.claimed_at ?? row.created_at,
            leaseToken: row.lease_token,
            leaseExpiresAt: row.lease_expires_at,
          },
    acknowledgedBy: row.acknowledged_by.map(
      (a): Acknowledgement => ({ id: a.id, name: a.name, occurredAt: parseTimestamp(a.occurred_at) ?? 0, metadata: a.metadata ?? {} }),
    ),
    deliveryCount: row.delivery_count,
    result: row.result,
    deadLetter:
      row.dead_letter === null || row.dead_letter === undefined
        ? null
        : {
            originChannelId: row.dead_letter.origin_channel_id,
            originMessageId: row.dead_letter.origin_message_id,
            deliveryCount: row.dead_letter.delivery_count,
            lastError: row.dead_letter.last_error,
          },
    groupKey: row.group_key ?? null,
    priority: row.priority ?? 3,
    limits: row.limit_names ?? [],
    maxDeliveries: row.max_deliveries ?? null,
    cancelRequestedAt: row.cancel_requested_at ?? null,
    cancelReason: row.cancel_reason ?? null,
    progress:
      row.progress_updated_at === null || row.progress_updated_at === undefined
        ? null
        : { data: row.progress_data ?? {}, text: row.progress_text ?? "", updatedAt: row.progress_updated_at },
    dependsOn: row.depends_on ?? [],
    blockedBy: row.blocked_by ?? 0,
    dependentsCount: row.dependents_count ?? 0,
    waitpoint:
      row.waitpoint_id === null || row.waitpoint_id === undefined
        ? null
        : { id: row.waitpoint_id, completed: row.waitpoint_outcome != null, data: row.waitpoint_outcome?.data ?? (row.waitpoint_outcome != null ? {} : null) },
    trace: row.trace_parent === null || row.trace_parent === undefined ? null : { traceparent: row.trace_parent, tracestate: row.trace_state ?? null },
  };
}
