/** SQL for channels: lookup by id or alias, on behalf of a caller. */
import type { ChannelRecord, ChannelView } from "../domain/channel.js";
import type { JsonValue } from "../domain/errors.js";
import type { Micros } from "../domain/time.js";
import type { Db } from "./db.js";

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
  paused: boolean;
  created_at: Micros;
  updated_at: Micros;
}

export const CHANNEL_COLUMNS = `c.id, c.name, c.mode, c.access, c.discoverable, c.description, c.owner_id, c.created_by_key_id,
  c.metadata_schema, c.pinned_message, c.webhook_url, c.webhook_secret, c.ttl_seconds, c.retention_days,
  c.max_messages, c.max_writes_per_minute, c.paused, c.created_at, c.updated_at`;

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
    paused: row.paused,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True when text can be compared with a uuid column without a cast error. */
export const isUuid = (text: string): boolean => UUID.test(text);

/** Finds a channel by id, else by alias, with the caller's membership; undefined when none. */
export async function findChannelView(db: Db, identifier: string, callerKeyId: string): Promise<ChannelView | undefined> {
  const { rows } = await db.query<ChannelRow & { is_member: boolean }>(
    `SELECT ${CHANNEL_COLUMNS},
       (c.created_by_key_id = $3 OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.key_id = $3)) AS is_member
     FROM channels c
     WHERE c.id = $1::uuid OR c.id = (SELECT a.channel_id FROM channel_aliases a WHERE a.alias = $2)
     LIMIT 1`,
    [isUuid(identifier) ? identifier : null, identifier, callerKeyId],
  );
  const row = rows[0];
  return row && { ...toChannelRecord(row), callerIsMember: row.is_member };
}
