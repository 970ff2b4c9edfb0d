/** SQL for a channel's update: the row locked with its links, and the changed columns written. */
import type { ChannelChanges, LockedChannel } from "../model/channels.js";
import { CHANNEL_COLUMNS, toChannelRecord, type ChannelRow } from "./channel-rows.js";
import type { Db } from "./db.js";

/** Locks the channel row for an update and reads it with its related channel ids; undefined when gone. */
export async function lockChannel(db: Db, id: string): Promise<LockedChannel | undefined> {
  const { rows } = await db.query<ChannelRow & { related_ids: string[] }>(
    `SELECT ${CHANNEL_COLUMNS},
       ARRAY(SELECT l.related_channel_id::text FROM channel_links l WHERE l.channel_id = c.id) AS related_ids
     FROM channels c WHERE c.id = $1 FOR NO KEY UPDATE OF c`,
    [id],
  );
  const row = rows[0];
  return row && { record: toChannelRecord(row), relatedIds: row.related_ids };
}

const CHANGE_COLUMNS: Record<keyof ChannelChanges, string> = {
  name: "name",
  mode: "mode",
  access: "access",
  discoverable: "discoverable",
  description: "description",
  metadataSchema: "metadata_schema",
  pinnedMessage: "pinned_message",
  retentionDays: "retention_days",
  maxMessages: "max_messages",
  maxWritesPerMinute: "max_writes_per_minute",
  maxDeliveries: "max_deliveries",
  deadLetterChannelId: "dead_letter_channel_id",
  paused: "paused",
  webhookUrl: "webhook_url",
  webhookSecret: "webhook_secret",
  groupConcurrency: "group_concurrency",
  dispatch: "dispatch",
  priorityAgingSeconds: "priority_aging_seconds",
  limitIds: "limit_ids",
  a2a: "a2a",
  a2aForward: "a2a_forward",
};

/** Columns written as JSON text and cast. */
const JSONB_CHANGES = new Set<keyof ChannelChanges>(["metadataSchema", "a2a", "a2aForward"]);

/**
 * Writes the changed columns and, when given, replaces the related channels;
 * moves updated_at strictly forward. Callers pass only real changes.
 */
export async function updateChannel(db: Db, id: string, changes: ChannelChanges, relatedIds: readonly string[] | undefined): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const [key, value] of Object.entries(changes) as Array<[keyof ChannelChanges, unknown]>) {
    const column = CHANGE_COLUMNS[key];
    const json = JSONB_CHANGES.has(key);
    values.push(json && value !== null ? JSON.stringify(value) : value);
    sets.push(`${column} = $${values.length}${json ? "::jsonb" : key === "limitIds" ? "::uuid[]" : ""}`);
  }
  sets.push("updated_at = greatest(clock_timestamp(), updated_at + interval '1 microsecond')");
  await db.query(`UPDATE channels SET ${sets.join(", ")} WHERE id = $1`, values);
  if (relatedIds !== undefined) {
    await db.query("DELETE FROM channel_links WHERE channel_id = $1", [id]);
    await db.query(
      `INSERT INTO channel_links (channel_id, related_channel_id)
       SELECT $1, r.id FROM channels r WHERE r.id = ANY($2::uuid[]) AND r.id <> $1`,
      [id, relatedIds],
    );
  }
}

