/** Channels as the statements read them: the row, its columns and its record. */
import type { ChannelA2a, ChannelA2aForward, ChannelRecord } from "../model/channels.js";
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";

export interface ChannelRow {
  id: string;
  name: string;
  mode: "broadcast" | "claimable";
  access: "open" | "restricted";
  discoverable: boolean;
  description: string;
  owner_id: string;
  created_by_key_id: string;
  metadata_schema: { [key: string]: JsonValue };
  pinned_message: string | null;
  webhook_url: string | null;
  webhook_secret: string | null;
  ttl_seconds: number;
  retention_days: number;
  max_messages: number | null;
  max_writes_per_minute: number | null;
  max_deliveries: number | null;
  dead_letter_channel_id: string | null;
  paused: boolean;
  created_at: Micros;
  updated_at: Micros;
  group_concurrency: number | null;
  dispatch: "fifo" | "fair";
  priority_aging_seconds: number | null;
  limit_ids: string[];
  limit_names: string[];
  limited_messages: boolean;
  a2a: ChannelA2a | null;
  a2a_forward: ChannelA2aForward | null;
}

export const CHANNEL_COLUMNS = `c.id, c.name, c.mode, c.access, c.discoverable, c.description, c.owner_id, c.created_by_key_id,
  c.metadata_schema, c.pinned_message, c.webhook_url, c.webhook_secret, c.ttl_seconds, c.retention_days,
  c.max_messages, c.max_writes_per_minute, c.max_deliveries, c.dead_letter_channel_id, c.paused, c.created_at, c.updated_at,
  c.group_concurrency, c.dispatch, c.priority_aging_seconds, c.limit_ids::text[] AS limit_ids, c.limited_messages, c.a2a, c.a2a_forward,
  ARRAY(SELECT l.name FROM limits l WHERE l.id = ANY (c.limit_ids) ORDER BY l.name) AS limit_names`;

export function toChannelRecord(row: ChannelRow): ChannelRecord {
  return {
    id: row.id,
    name: row.name,
    mode: row.mode,
    access: row.access,
    discoverable: row.discoverable,
    description: row.description,
    ownerId: row.owner_id,
    createdByKeyId: row.created_by_key_id,
    metadataSchema: row.metadata_schema,
    pinnedMessage: row.pinned_message,
    webhookUrl: row.webhook_url,
    webhookSecret: row.webhook_secret,
    ttlSeconds: row.ttl_seconds,
    retentionDays: row.retention_days,
    maxMessages: row.max_messages,
    maxWritesPerMinute: row.max_writes_per_minute,
    maxDeliveries: row.max_deliveries,
    deadLetterChannelId: row.dead_letter_channel_id,
    paused: row.paused,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    groupConcurrency: row.group_concurrency,
    dispatch: row.dispatch,
    priorityAgingSeconds: row.priority_aging_seconds,
    limitIds: row.limit_ids,
    limits: row.limit_names,
    limitedMessages: row.limited_messages,
    a2a: row.a2a,
    a2aForward: row.a2a_forward,
  };
}

