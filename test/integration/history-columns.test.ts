/**
 * Archiving keeps every column of a message (docs/decisions.md#expiry-and-history): the
 * service's copy (MESSAGE_FIELDS: retract, purge) and the stored functions'
 * copy (agentbus_archive_messages: dead letters, redrive) name the columns
 * they move, so a column added to messages and left out of either would be
 * lost silently on archive. These tests fail as soon as that happens.
 */
import { describe, expect, it } from "vitest";
import { MESSAGE_FIELDS } from "../../src/store/message-rows.js";
import { useTestDatabase } from "../support/database.js";

const db = useTestDatabase();

const columnsOf = async (table: string) =>
  (
    await db.pool.query<{ column_name: string }>(
      "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY column_name",
      [table],
    )
  ).rows.map((r) => r.column_name);

describe("message history columns", () => {
  it("names every column of messages in MESSAGE_FIELDS, and history has each of them", async () => {
    const live = await columnsOf("messages");
    const fields = MESSAGE_FIELDS.split(",").map((f) => f.trim()).sort();
    expect(fields).toEqual(live);
    expect(await columnsOf("message_history")).toEqual(expect.arrayContaining(live));
  });

  it("keeps every column's value when agentbus_archive_messages moves a message", async () => {
    const keyId = `ak_${Math.random().toString(36).slice(2, 10)}`;
    await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, '\\x00', $1, $1)", [keyId]);
    const channel = await db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, stored_messages, created_at, updated_at)
       VALUES ('archive', 'claimable', 'open', true, $1, $1, 300, 7, 1, now(), now()) RETURNING id`,
      [keyId],
    );
    // Every nullable column set, so a column the copy leaves out shows up as a difference.
    const { rows } = await db.pool.query<{ id: string }>(
      `INSERT INTO messages (channel_id, author_key_id, actor_id, actor_name, actor_label, content, metadata, mentions, created_at, expires_at,
         claimed_by_key_id, claimed_by_actor_id, claimed_by_actor_name, claimed_at, claim_metadata, lease_token, lease_expires_at,
         acknowledged_by, result, delivery_count, available_at)
       VALUES ($1, $2, gen_random_uuid(), 'actor', 'label', 'content', '{"k":1}', '[]', now(), now() + interval '1 hour',
         $2, gen_random_uuid(), 'claimer', now(), '{"c":2}', 'lease_x', now() + interval '5 minutes',
         '[{"id":"a","name":"n","occurred_at":"2026-01-01T00:00:00Z"}]', 'the result', 3, now() + interval '1 minute')
       RETURNING id`,
      [channel.rows[0]!.id, keyId],
    );
    const id = rows[0]!.id;
    const before = await db.pool.query<{ row: Record<string, unknown> }>("SELECT to_jsonb(m) AS row FROM messages m WHERE id = $1", [id]);
    await db.pool.query("SELECT agentbus_archive_messages(ARRAY[$1]::uuid[], now(), 'dead_lettered')", [id]);
    const after = await db.pool.query<{ row: Record<string, unknown> }>(
      "SELECT to_jsonb(h) - 'archived_at' - 'reason' AS row FROM message_history h WHERE id = $1",
      [id],
    );
    expect(after.rows[0]!.row).toEqual(before.rows[0]!.row);
    expect((await db.pool.query("SELECT 1 FROM messages WHERE id = $1", [id])).rowCount).toBe(0);
  });
});
