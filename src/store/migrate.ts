/**
 * Forward-only schema migrations: numbered `NNNN_description.sql` files,
 * applied in order at start and by `agentbus migrate`.
 *
 * Several replicas may start at once, so runners queue on a session-level
 * advisory lock held by one dedicated connection (released by the server
 * even if this process dies). Each file commits together with its
 * schema_migrations row, so a failed file leaves no trace and is retried on
 * the next run. Files must not contain statements that refuse to run in a
 * transaction (e.g. CREATE INDEX CONCURRENTLY).
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";

/** Beside this module: src/store/migrations, or dist/src/store/migrations once built. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));

// Any constant works as long as nothing else in the database uses it;
// this one is "agentbus" in ASCII.
const LOCK_KEY = "7018141435883353459";

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/;

export interface Migration {
  version: number;
  /** The file name, e.g. 0001_api_keys.sql. */
  name: string;
  sql: string;
  /** sha256 (hex) of the file's text. */
  checksum: string;
}

export interface MigrateOptions {
  log?: (msg: string) => void;
  /** Where the .sql files are; tests point this at a scratch copy. */
  dir?: string;
}

// Line endings are normalised so a checkout that converts them (git
// autocrlf) is not mistaken for an edit.
const checksumOf = (sql: string) => createHash("sha256").update(sql.replace(/\r\n/g, "\n")).digest("hex");

/** Reads and orders the migration files; a misnamed .sql file or a reused number is an error, not a skip. */
export async function loadMigrations(dir: string = MIGRATIONS_DIR): Promise<Migration[]> {
  const names = (await readdir(dir)).filter((n) => n.endsWith(".sql")).sort();
  const migrations: Migration[] = [];
  for (const name of names) {
    const match = FILE_NAME.exec(name);
    if (!match) throw new Error(`Migration file ${name} in ${dir} is not named NNNN_description.sql (lowercase, digits, underscores)`);
    const version = Number(match[1]);
    const clash = migrations.find((m) => m.version === version);
    if (clash) throw new Error(`Migrations ${clash.name} and ${name} share the number ${match[1]}; renumber the one not yet applied`);
    const sql = await readFile(join(dir, name), "utf8");
    migrations.push({ version, name, sql, checksum: checksumOf(sql) });
  }
  return migrations;
}

/** Applies every pending migration; returns the names of those it applied (empty when up to date). */
export async function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<string[]> {
  const log = options.log ?? (() => {});
  const migrations = await loadMigrations(options.dir);
  const client = await pool.connect();
  // Checked-out clients have no error listener; a dropped connection while
  // we wait for the lock must fail the run, not crash the process.
  let broken: Error | undefined;
  const onError = (err: Error) => {
    broken = err;
  };
  client.on("error", onError);
  try {
    await client.query("SELECT pg_advisory_lock($1::bigint)", [LOCK_KEY]);
    try {
      return await applyPending(client, migrations, log);
    } finally {
      await client.query("SELECT pg_advisory_unlock($1::bigint)", [LOCK_KEY]).catch((err: unknown) => {
        // The lock goes with the session, so destroying the connection frees it.
        broken ??= err instanceof Error ? err : new Error(String(err));
      });
    }
  } finally {
    client.off("error", onError);
    client.release(broken);
  }
}

async function applyPending(client: pg.PoolClient, migrations: Migration[], log: (msg: string) => void): Promise<string[]> {
  // Created under the lock: concurrent CREATE TABLE IF NOT EXISTS can still
  // collide on the catalog's unique index.
  await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const { rows } = await client.query<{ version: number; name: string; checksum: string }>(
    "SELECT version, name, checksum FROM schema_migrations ORDER BY version",
  );
  const applied = new Map(rows.map((r) => [r.version, r]));

  // Verify everything before changing anything.
  for (const m of migrations) {
    const row = applied.get(m.version);
    if (row && (row.checksum !== m.checksum || row.name !== m.name)) {
      throw new Error(
        `Migration ${m.name} differs from the ${row.name} applied to this database ` +
          `(checksum ${row.checksum.slice(0, 12)}… now ${m.checksum.slice(0, 12)}…). ` +
          `Applied migrations must not be edited or renamed: restore the original file and put the change in a new, higher-numbered migration.`,
      );
    }
  }
  // A newer release may have migrated this database; older code keeps
  // running (migrations are additive), so this is worth a note, not a stop.
  const known = new Set(migrations.map((m) => m.version));
  for (const row of rows) {
    if (!known.has(row.version)) log(`database has migration ${row.name}, which this release does not know; continuing`);
  }

  const done: string[] = [];
  for (const m of migrations) {
    if (applied.has(m.version)) continue;
    const started = performance.now();
    try {
      await client.query("BEGIN");
      await client.query(m.sql);
      await client.query("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)", [
        m.version,
        m.name,
        m.checksum,
      ]);
      await client.query("COMMIT");
    } catch (err) {
      await client.query("ROLLBACK").catch(() => {});
      const detail = err instanceof Error ? err.message : String(err);
      throw new Error(`Migration ${m.name} failed and was rolled back: ${detail}`, { cause: err });
    }
    log(`applied migration ${m.name} (${Math.round(performance.now() - started)} ms)`);
    done.push(m.name);
  }
  return done;
}
