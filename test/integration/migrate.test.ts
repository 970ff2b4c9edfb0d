import { appendFile, cp, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadMigrations, migrate, MIGRATIONS_DIR } from "../../src/store/migrate.js";
import { createPool } from "../../src/store/pool.js";
import { createTestDatabase, type TestDatabase } from "../support/database.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function emptyDatabase(): Promise<TestDatabase> {
  const db = await createTestDatabase({ migrate: false });
  cleanups.push(db.drop);
  return db;
}

/** A scratch copy of the real migrations, plus extra files, that a test may edit. */
async function scratchMigrations(extra: Record<string, string> = {}): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "agentbus-migrations-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  for (const [name, sql] of Object.entries(extra)) await writeFile(path.join(dir, name), sql);
  return dir;
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
    await migrate(db.pool, { dir });
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
    await migrate(db.pool, { dir });
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
