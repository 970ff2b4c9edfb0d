import { appendFile, cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { startApp } from "../../src/app.js";
import { createLogger } from "../../src/platform/logger.js";
import { loadMigrations, loadSqlObjects, migrate, MIGRATIONS_DIR, SQL_DIR, type SqlObject } from "../../src/store/migrate.js";
import { createPool } from "../../src/store/pool.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { createChannel, listMessages, postMessage } from "../support/fixtures.js";
import { mintKey, testConfig } from "../support/server.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function emptyDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase({ migrate: false });
  cleanups.push(db.drop);
  return db;
}

/** A scratch copy of a directory that a test may edit, with files added or replaced (path relative to it → text). */
async function scratchCopy(source: string, files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "agentbus-sql-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(source, dir, { recursive: true });
  for (const [file, sql] of Object.entries(files)) await writeFile(path.join(dir, file), sql);
  return dir;
}

/** The real migrations, plus extra files. */
const scratchMigrations = (extra: Record<string, string> = {}) => scratchCopy(MIGRATIONS_DIR, extra);
/** src/store/sql, with function or trigger files added or replaced. */
const scratchSql = (files: Record<string, string> = {}) => scratchCopy(SQL_DIR, files);

/** Edits agentbus_webhook_destination in a scratch copy: destinations come out upper-cased. */
async function upperCaseDestinations(sqlDir: string): Promise<void> {
  const file = path.join(sqlDir, "functions/agentbus_webhook_destination.sql");
  await writeFile(file, (await readFile(file, "utf8")).replace("SELECT lower(", "SELECT upper("));
}

const destinationOf = async (db: TestDatabase, url: string): Promise<string> =>
  (await db.pool.query<{ d: string }>("SELECT agentbus_webhook_destination($1) AS d", [url])).rows[0]!.d;

/** Our functions (not an extension's) and triggers (not a constraint's), as kind/name. */
async function objectsInDatabase(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ object: string }>(
    `SELECT 'function/' || p.proname AS object FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
     UNION ALL
     SELECT 'trigger/' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
     WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace
     ORDER BY 1`,
  );
  return rows.map((r) => r.object);
}

/** The catalog's own rendering of an object (every overload of a function), comparable across databases. */
async function definitionOf(client: pg.Pool | pg.PoolClient, o: Pick<SqlObject, "kind" | "name">): Promise<string[]> {
  const { rows } = await client.query<{ def: string }>(
    o.kind === "function"
      ? "SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace ORDER BY p.oid"
      : "SELECT pg_get_triggerdef(t.oid) AS def FROM pg_trigger t WHERE t.tgname = $1 AND NOT t.tgisinternal ORDER BY t.oid",
    [o.name],
  );
  return rows.map((r) => r.def);
}

async function definitions(pool: pg.Pool, objects: SqlObject[]): Promise<Record<string, string[]>> {
  const entries = await Promise.all(objects.map(async (o) => [o.file, await definitionOf(pool, o)] as const));
  return Object.fromEntries(entries);
}

async function recordedObjects(db: TestDatabase): Promise<Record<string, string>> {
  const { rows } = await db.pool.query<{ file: string; checksum: string }>("SELECT file, checksum FROM schema_objects ORDER BY file");
  return Object.fromEntries(rows.map((r) => [r.file, r.checksum]));
}

async function appliedVersions(db: TestDatabase): Promise<number[]> {
  const { rows } = await db.pool.query<{ version: number }>("SELECT version FROM schema_migrations ORDER BY version");
  return rows.map((r) => r.version);
}

describe("migrate", () => {
  it("applies every migration file, in order, to a fresh database", async () => {
    const db = await emptyDatabase();
    const files = await loadMigrations();

    const applied = await migrate(db.pool);

    expect(applied).toEqual(files.map((m) => m.name));
    expect(applied[0]).toBe("0001_api_keys.sql");
    const { rows } = await db.pool.query<{ version: number; name: string; checksum: string }>(
      "SELECT version, name, checksum FROM schema_migrations ORDER BY version",
    );
    expect(rows).toEqual(files.map(({ version, name, checksum }) => ({ version, name, checksum })));
  });

  it("has autovacuum clean messages after 2 % plus 1,000 dead rows, not PostgreSQL's 20 %", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool);
    const { rows } = await db.pool.query<{ reloptions: string[] }>("SELECT reloptions FROM pg_class WHERE relname = 'messages'");
    expect(rows[0]!.reloptions.sort()).toEqual(["autovacuum_vacuum_scale_factor=0.02", "autovacuum_vacuum_threshold=1000"]);
  });

  it("applies nothing when run again", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool);

    expect(await migrate(db.pool)).toEqual([]);
  });

  it("applies each migration exactly once when several runners start together", async () => {
    const db = await emptyDatabase();
    // A slow migration widens the window in which unserialised runners would collide.
    // Real time: a slow migration in PostgreSQL (pg_sleep), to widen a real race between runners.
    const dir = await scratchMigrations({ "9000_slow.sql": "SELECT pg_sleep(0.3); CREATE TABLE slow_probe (id int);" });
    const pools = Array.from({ length: 5 }, () => createPool(db.url, { max: 1 }));
    cleanups.push(async () => void (await Promise.all(pools.map((p) => p.end()))));

    const results = await Promise.all(pools.map((pool) => migrate(pool, { dir })));

    const names = (await loadMigrations(dir)).map((m) => m.name);
    expect(results.flat().sort()).toEqual([...names].sort());
    expect(results.filter((r) => r.length > 0)).toHaveLength(1);
    expect(await appliedVersions(db)).toEqual((await loadMigrations(dir)).map((m) => m.version));
  });

  it("refuses to run when an applied migration was edited, naming the file", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations();
    await migrate(db.pool, { dir });
    await appendFile(path.join(dir, "0001_api_keys.sql"), "\nALTER TABLE api_keys ADD COLUMN note text;\n");

    await expect(migrate(db.pool, { dir })).rejects.toThrow(/0001_api_keys\.sql.*must not be edited/s);
  });

  it("checks applied migrations before applying any new one", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations();
    await migrate(db.pool, { dir });
    await appendFile(path.join(dir, "0001_api_keys.sql"), "\n-- edited\n");
    await writeFile(path.join(dir, "9001_new.sql"), "CREATE TABLE new_probe (id int);");

    await expect(migrate(db.pool, { dir })).rejects.toThrow(/0001_api_keys\.sql/);
    expect(await appliedVersions(db)).not.toContain(9001);
  });

  it("rolls back a failing migration and leaves it pending", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations({ "9002_broken.sql": "CREATE TABLE half_done (id int);\nSELECT no_such_column FROM half_done;" });

    await expect(migrate(db.pool, { dir })).rejects.toThrow(/9002_broken\.sql failed and was rolled back/);

    expect(await appliedVersions(db)).not.toContain(9002);
    const { rows } = await db.pool.query("SELECT to_regclass('half_done') AS t");
    expect(rows[0]).toEqual({ t: null });
  });

  it("refuses a .sql file that is not named NNNN_description.sql", async () => {
    const dir = await scratchMigrations({ "002_typo.sql": "SELECT 1;" });

    await expect(loadMigrations(dir)).rejects.toThrow(/002_typo\.sql.*NNNN_description\.sql/);
  });

  it("refuses two files with the same number", async () => {
    const dir = await scratchMigrations({ "0001_again.sql": "SELECT 1;" });

    await expect(loadMigrations(dir)).rejects.toThrow(/share the number 0001/);
  });
});

describe("0010 agent label normal forms", () => {
  it("upgrades keys whose labels collide once normalised: the oldest active one holds the label, the others keep working", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations();
    const before = (await loadMigrations(dir)).filter((m) => m.version >= 10);
    for (const m of before) await rm(path.join(dir, m.name));
    // As a release before 0010 migrated it: with no function step.
    await migrate(db.pool, { dir, sqlDir: false });
    const insert = (keyId: string, label: string, at: string, revoked = false) =>
      db.pool.query(
        `INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id, created_at, revoked_at)
         VALUES ($1, sha256(convert_to($1, 'UTF8')), $2, $2, $3::timestamptz, CASE WHEN $4 THEN now() END)`,
        [keyId, label, at, revoked],
      );
    await insert("k_old", "Planner", "2026-01-01T00:00:00Z");
    await insert("k_spaced", " planner ", "2026-01-02T00:00:00Z");
    await insert("k_wide", "ｐｌａｎｎｅｒ", "2026-01-03T00:00:00Z");
    await insert("k_revoked", "PLANNER", "2025-12-01T00:00:00Z", true);
    await insert("k_other", "Builder", "2026-01-01T00:00:00Z");

    await migrate(db.pool);

    const { rows } = await db.pool.query<{ key_id: string; agent_label: string; label_key: string | null; revoked: boolean }>(
      "SELECT key_id, agent_label, label_key, revoked_at IS NOT NULL AS revoked FROM api_keys ORDER BY key_id",
    );
    expect(rows).toEqual([
      { key_id: "k_old", agent_label: "Planner", label_key: "planner", revoked: false },
      { key_id: "k_other", agent_label: "Builder", label_key: "builder", revoked: false },
      { key_id: "k_revoked", agent_label: "PLANNER", label_key: "planner", revoked: true },
      { key_id: "k_spaced", agent_label: " planner ", label_key: null, revoked: false },
      { key_id: "k_wide", agent_label: "ｐｌａｎｎｅｒ", label_key: null, revoked: false },
    ]);
    await expect(
      db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id, label_key) VALUES ('k_new', '\\x00', 'planner', 'planner', 'planner')"),
    ).rejects.toMatchObject({ code: "23505", constraint: "api_keys_active_label_key" });
  });
});

describe("0011 alias normal forms", () => {
  it("upgrades aliases that collide once normalised: the first keeps resolving and holds the normal form, so new look-alikes are refused", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations();
    for (const m of (await loadMigrations(dir)).filter((m) => m.version >= 11)) await rm(path.join(dir, m.name));
    // As a release before 0011 migrated it: with no function step.
    await migrate(db.pool, { dir, sqlDir: false });
    await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('k1', '\\x00', 'a', 'a')");
    const { rows: [channel] } = await db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
       VALUES ('c', 'broadcast', 'open', true, 'a', 'k1', 60, 1, now(), now()) RETURNING id`,
    );
    const { rows: [actor] } = await db.pool.query<{ id: string }>(
      "INSERT INTO actors (name, owner_id, created_by_key_id) VALUES ('x', 'a', 'k1') RETURNING id",
    );
    for (const alias of ["Deploy", "deploy", "ｄｅｐｌｏｙ", "other"]) {
      await db.pool.query("INSERT INTO channel_aliases (alias, channel_id) VALUES ($1, $2)", [alias, channel!.id]);
      await db.pool.query("INSERT INTO actor_aliases (alias, actor_id) VALUES ($1, $2)", [alias, actor!.id]);
    }

    await migrate(db.pool);

    for (const table of ["channel_aliases", "actor_aliases"]) {
      const { rows } = await db.pool.query<{ alias: string; alias_key: string | null }>(
        `SELECT alias, alias_key FROM ${table} ORDER BY alias COLLATE "C"`,
      );
      expect(rows).toEqual([
        { alias: "Deploy", alias_key: "deploy" },
        { alias: "deploy", alias_key: null },
        { alias: "other", alias_key: "other" },
        { alias: "ｄｅｐｌｏｙ", alias_key: null },
      ]);
    }
    await expect(
      db.pool.query("INSERT INTO channel_aliases (alias, channel_id, alias_key) VALUES ('DEPLOY', $1, 'deploy')", [channel!.id]),
    ).rejects.toMatchObject({ code: "23505", constraint: "channel_aliases_alias_key" });
  });
});

describe("0023 dead-letter provenance", () => {
  it("moves a genuine dead letter's metadata.dead_letter into the service's column and leaves a forged one as the poster's metadata", async () => {
    const db = await emptyDatabase();
    const dir = await scratchMigrations();
    for (const m of (await loadMigrations(dir)).filter((m) => m.version >= 23)) await rm(path.join(dir, m.name));
    // As a release before 0023 left it: no function step (its functions were those of that release).
    await migrate(db.pool, { dir, sqlDir: false });
    await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ('k1', '\\x00', 'a', 'a')");
    const channel = async (name: string) =>
      (await db.pool.query<{ id: string }>(
        `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
         VALUES ($1, 'claimable', 'open', true, 'a', 'k1', 3600, 1, now(), now()) RETURNING id`,
        [name],
      )).rows[0]!.id;
    const origin = await channel("work");
    const secret = await channel("secret");
    const dlq = await channel("dlq");
    const originalId = "00000000-0000-4000-8000-000000000001";
    await db.pool.query(
      `INSERT INTO message_history (id, channel_id, author_key_id, content, metadata, mentions, created_at, expires_at, acknowledged_by, delivery_count, archived_at, reason)
       VALUES ($1, $2, 'k1', 'poison', '{}', '[]', now(), now() + interval '1 hour', '[]', 2, now(), 'dead_lettered')`,
      [originalId, origin],
    );
    const live = (metadata: unknown) =>
      db.pool.query<{ id: string }>(
        `INSERT INTO messages (channel_id, author_key_id, content, metadata, mentions, created_at, expires_at)
         VALUES ($1, 'k1', 'x', $2, '[]', clock_timestamp(), now() + interval '1 hour') RETURNING id`,
        [dlq, JSON.stringify(metadata)],
      ).then((r) => r.rows[0]!.id);
    const provenance = { origin_channel_id: origin, origin_message_id: originalId, delivery_count: 2, last_error: "released" };
    const genuine = await live({ kind: "job", dead_letter: provenance });
    const forged = await live({ dead_letter: { origin_channel_id: secret, origin_message_id: "not-a-uuid" } });

    await migrate(db.pool);

    const { rows } = await db.pool.query<{ id: string; metadata: unknown; dead_letter: unknown }>("SELECT id, metadata, dead_letter FROM messages");
    const byId = Object.fromEntries(rows.map((r) => [r.id, { metadata: r.metadata, dead_letter: r.dead_letter }]));
    expect(byId[genuine]).toEqual({ metadata: { kind: "job" }, dead_letter: provenance });
    expect(byId[forged]).toEqual({ metadata: { dead_letter: { origin_channel_id: secret, origin_message_id: "not-a-uuid" } }, dead_letter: null });
  });
});

describe("api_keys", () => {
  const insertKey = (db: TestDatabase, keyId: string, label: string) =>
    db.pool.query(
      "INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, sha256(convert_to($1, 'UTF8')), $2, 'owner')",
      [keyId, label],
    );

  it("keeps labels unique among active keys, and a revoked key frees its label", async () => {
    const db = await createTestDatabase();
    cleanups.push(db.drop);
    await insertKey(db, "k1", "worker");

    await expect(insertKey(db, "k2", "worker")).rejects.toMatchObject({ code: "23505", constraint: "api_keys_active_label" });

    await db.pool.query("UPDATE api_keys SET revoked_at = now() WHERE key_id = 'k1'");
    await insertKey(db, "k2", "worker");
    await expect(insertKey(db, "k3", "worker")).rejects.toMatchObject({ code: "23505" });
  });
});

describe("functions and triggers (src/store/sql)", () => {
  it("leaves in the database exactly the functions and triggers that have a file", async () => {
    const db = await emptyDatabase();

    await migrate(db.pool);

    const files = (await loadSqlObjects()).map((o) => `${o.kind}/${o.name}`).sort();
    expect(await objectsInDatabase(db.pool)).toEqual(files);
  });

  it("leaves each function and trigger as its file defines it", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool);
    const objects = await loadSqlObjects();
    const client = await db.pool.connect();
    try {
      for (const o of objects) {
        // Applying the file again changes nothing when the database already holds its text.
        const before = await definitionOf(client, o);
        await client.query("BEGIN");
        await client.query(o.sql);
        const after = await definitionOf(client, o);
        await client.query("ROLLBACK");
        expect({ file: o.file, definition: before }).toEqual({ file: o.file, definition: after });
      }
    } finally {
      client.release();
    }
  });

  it("records the checksum of every file it applied", async () => {
    const db = await emptyDatabase();

    await migrate(db.pool);

    const objects = await loadSqlObjects();
    expect(await recordedObjects(db)).toEqual(Object.fromEntries(objects.map((o) => [o.file, o.checksum])));
  });

  it("applies no file again when none changed", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool);
    const logs: string[] = [];

    await migrate(db.pool, { log: (msg) => logs.push(msg) });

    expect(logs).toEqual([]);
  });

  it("reapplies a changed file, and only that one", async () => {
    const db = await emptyDatabase();
    const sqlDir = await scratchSql();
    await migrate(db.pool, { sqlDir });
    await upperCaseDestinations(sqlDir);
    const logs: string[] = [];

    await migrate(db.pool, { sqlDir, log: (msg) => logs.push(msg) });

    expect(await destinationOf(db, "https://Hooks.example:8443/x")).toBe("HOOKS.EXAMPLE:8443");
    expect(logs).toEqual([expect.stringMatching(/^applied functions\/agentbus_webhook_destination\.sql \(\d+ ms\)$/)]);
  });

  it("drops the function and trigger whose files were deleted", async () => {
    const db = await emptyDatabase();
    const sqlDir = await scratchSql({
      "functions/probe_touch.sql": "CREATE OR REPLACE FUNCTION probe_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END; $$;",
      "triggers/probe_touch_keys.sql": "CREATE OR REPLACE TRIGGER probe_touch_keys BEFORE UPDATE ON api_keys FOR EACH ROW EXECUTE FUNCTION probe_touch();",
    });
    await migrate(db.pool, { sqlDir });
    expect(await objectsInDatabase(db.pool)).toEqual(expect.arrayContaining(["function/probe_touch", "trigger/probe_touch_keys"]));
    await rm(path.join(sqlDir, "functions/probe_touch.sql"));
    await rm(path.join(sqlDir, "triggers/probe_touch_keys.sql"));

    await migrate(db.pool, { sqlDir });

    const files = (await loadSqlObjects()).map((o) => `${o.kind}/${o.name}`).sort();
    expect(await objectsInDatabase(db.pool)).toEqual(files);
    expect(Object.keys(await recordedObjects(db))).not.toContain("functions/probe_touch.sql");
  });

  it("rolls back every file when one fails, naming it", async () => {
    const db = await emptyDatabase();
    const sqlDir = await scratchSql();
    await migrate(db.pool, { sqlDir });
    await upperCaseDestinations(sqlDir);
    await writeFile(
      path.join(sqlDir, "functions/zz_broken.sql"),
      "CREATE OR REPLACE FUNCTION zz_broken() RETURNS integer LANGUAGE sql AS $$ SELECT no_such_column FROM api_keys $$;",
    );

    await expect(migrate(db.pool, { sqlDir })).rejects.toThrow(/rolled back \(at functions\/zz_broken\.sql\).*no_such_column/);

    expect(await destinationOf(db, "https://Hooks.example/x")).toBe("hooks.example");
    expect(await recordedObjects(db)).toEqual(Object.fromEntries((await loadSqlObjects()).map((o) => [o.file, o.checksum])));
  });

  it("refuses a file that does not define the object it is named after", async () => {
    const sqlDir = await scratchSql({
      "functions/probe_named.sql": "CREATE OR REPLACE FUNCTION probe_other() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;",
    });

    await expect(loadSqlObjects(sqlDir)).rejects.toThrow(/functions\/probe_named\.sql must hold exactly one CREATE OR REPLACE FUNCTION probe_named \(found: probe_other\)/);
  });

  it("refuses to run without the sql directory rather than drop every function", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool);
    const sqlDir = path.join(await scratchSql(), "missing");

    await expect(migrate(db.pool, { sqlDir })).rejects.toThrow(/function and trigger files are missing/);

    const files = (await loadSqlObjects()).map((o) => `${o.kind}/${o.name}`).sort();
    expect(await objectsInDatabase(db.pool)).toEqual(files);
  });

  it("leaves the functions of a database that a newer release migrated", async () => {
    const db = await emptyDatabase();
    await migrate(db.pool, { dir: await scratchMigrations({ "9003_newer.sql": "SELECT 1;" }) });
    const sqlDir = await scratchSql();
    await upperCaseDestinations(sqlDir);
    const logs: string[] = [];

    await migrate(db.pool, { sqlDir, log: (msg) => logs.push(msg) });

    expect(await destinationOf(db, "https://Hooks.example/x")).toBe("hooks.example");
    expect(logs).toContain("not applying this release's functions and triggers to a database migrated by a newer release");
  });
});

describe("upgrading a database migrated before src/store/sql existed", () => {
  /** A database as the field has it: the numbered migrations applied by the previous migrator, which had no function step. */
  async function databaseOfPreviousRelease(): Promise<TestDatabase> {
    const db = await emptyDatabase();
    await migrate(db.pool, { sqlDir: false });
    return db;
  }

  it("ends with the functions and triggers of a freshly migrated database, as the files define them", async () => {
    const old = await databaseOfPreviousRelease();
    // A file that has moved on from the text its migration created, so the
    // comparison shows the upgrade applied the files, not only the migrations.
    const sqlDir = await scratchSql();
    await upperCaseDestinations(sqlDir);
    const fresh = await emptyDatabase();
    await migrate(fresh.pool, { sqlDir });
    const objects = await loadSqlObjects(sqlDir);

    expect(await migrate(old.pool, { sqlDir })).toEqual([]);

    expect(await objectsInDatabase(old.pool)).toEqual(await objectsInDatabase(fresh.pool));
    expect(await definitions(old.pool, objects)).toEqual(await definitions(fresh.pool, objects));
    expect((await definitions(old.pool, objects))["functions/agentbus_webhook_destination.sql"]![0]).toContain("SELECT upper(");
    expect(await recordedObjects(old)).toEqual(await recordedObjects(fresh));
  });

  it("keeps its messages, and the service posts and reads messages over it", async () => {
    const db = await databaseOfPreviousRelease();
    // What the previous release wrote: a key, a channel with a webhook and a message through the write function.
    await db.pool.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id, label_key) VALUES ('ak_old', '\\x00', 'old', 'old', 'old')");
    const channel = await db.pool.query<{ id: string }>(
      `INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, webhook_url, ttl_seconds, retention_days, created_at, updated_at)
       VALUES ('old', 'broadcast', 'open', true, 'old', 'ak_old', 'https://hooks.example/old', 3600, 7, clock_timestamp(), clock_timestamp()) RETURNING id`,
    );
    const channelId = channel.rows[0]!.id;
    const post = () =>
      db.pool.query<{ outcome: string; message_id: string }>(
        "SELECT * FROM agentbus_create_messages($1, ARRAY['ak_old'], ARRAY[NULL::uuid], ARRAY[NULL], ARRAY['old'], ARRAY['before'], ARRAY['{}'::jsonb], ARRAY['[]'::jsonb])",
        [channelId],
      );
    const before = await post();

    await migrate(db.pool);

    const kept = await db.pool.query("SELECT id, content FROM messages WHERE channel_id = $1", [channelId]);
    expect(kept.rows).toEqual([{ id: before.rows[0]!.message_id, content: "before" }]);
    // The write function as the files define it: a second message, its outbox row woken by the trigger.
    const after = await post();
    expect(after.rows[0]!.outcome).toBe("created");
    const outbox = await db.pool.query("SELECT message_id FROM webhook_outbox WHERE channel_id = $1 ORDER BY created_at", [channelId]);
    expect(outbox.rows).toEqual([{ message_id: before.rows[0]!.message_id }, { message_id: after.rows[0]!.message_id }]);

    const app = await startApp({ config: testConfig(db.url, { AGENTBUS_WORKERS: "false" }), logger: createLogger("silent") });
    cleanups.push(() => app.close());
    const key = await mintKey(app.url);
    const id = await createChannel(app.url, key);
    const posted = await postMessage(app.url, key, id, { content: "after the upgrade" });
    const page = await listMessages(app.url, key, id);
    expect(page.data.map((m) => [m.id, m.content])).toEqual([[posted.id, "after the upgrade"]]);
  });
});
