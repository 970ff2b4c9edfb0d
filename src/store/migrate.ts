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
 *
 * Stored functions and triggers are not migrations: each has one current
 * source file, `sql/functions/<name>.sql` or `sql/triggers/<name>.sql`, a
 * CREATE OR REPLACE of exactly that object. After the numbered migrations,
 * under the same lock and in one transaction, the migrator (re)applies every
 * file whose checksum differs from the one recorded in schema_objects, then
 * drops the objects whose file is gone. To change a function, edit its file;
 * to add one, add a file; to remove one, delete the file. (A new signature
 * is a new function beside the old one: drop the old signature in a numbered
 * migration.) A release leaves the files alone on a database that holds a
 * migration it does not know, so an older replica started during a rolling
 * update cannot put back the text a newer one replaced; that takes the newer
 * release to have a new migration (an empty one will do), else the release
 * that migrated last wins.
 *
 * The rule for migrations that need a function: a migration runs against the
 * schema as it was at its number, before the files are applied, so it must
 * be self-contained. A backfill that needs a function's logic carries its
 * own inline copy (a DO block, or a CREATE OR REPLACE since the file has
 * already created it in every database migrated since), which is historical
 * text from then on, not the current source. So do 0002, 0003, 0006, 0007
 * and 0012, which created the functions and triggers now under sql/: their
 * text stays as applied (the checksum check below refuses edits), and a
 * reader looks in sql/ for what runs.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";

/** Beside this module: src/store/migrations, or dist/src/store/migrations once built. */
export const MIGRATIONS_DIR = fileURLToPath(new URL("./migrations/", import.meta.url));
/** Beside this module: src/store/sql, or dist/src/store/sql once built (scripts/copy-assets.mjs). */
export const SQL_DIR = fileURLToPath(new URL("./sql/", import.meta.url));

// Any constant works as long as nothing else in the database uses it;
// this one is "agentbus" in ASCII.
const LOCK_KEY = "7018141435883353459";

const FILE_NAME = /^(\d{4})_[a-z0-9_]+\.sql$/;
const OBJECT_FILE_NAME = /^([a-z_][a-z0-9_]*)\.sql$/;

export interface Migration {
  version: number;
  /** The file name, e.g. 0001_api_keys.sql. */
  name: string;
  sql: string;
  /** sha256 (hex) of the file's text. */
  checksum: string;
}

/** What a file under sql/ defines; functions/ also holds procedures. */
export type SqlObjectKind = "function" | "trigger";

export interface SqlObject {
  kind: SqlObjectKind;
  /** The object's name, which is the file's name without .sql. */
  name: string;
  /** Relative to the sql directory, e.g. functions/agentbus_create_messages.sql; the key in schema_objects. */
  file: string;
  sql: string;
  checksum: string;
}

export interface MigrateOptions {
  log?: (msg: string) => void;
  /** Where the numbered .sql files are; tests point this at a scratch copy. */
  dir?: string;
  /**
   * Where the function and trigger files are (default SQL_DIR). false skips
   * them, which is how releases before them migrated: upgrade tests use it
   * to build a database as the field has it.
   */
  sqlDir?: string | false;
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

// Folders in the order they are applied: triggers name their function.
const OBJECT_FOLDERS: readonly { folder: string; kind: SqlObjectKind; creates: RegExp }[] = [
  { folder: "functions", kind: "function", creates: /CREATE\s+OR\s+REPLACE\s+(?:FUNCTION|PROCEDURE)\s+([a-z_][a-z0-9_]*)\s*\(/gi },
  { folder: "triggers", kind: "trigger", creates: /CREATE\s+OR\s+REPLACE\s+TRIGGER\s+([a-z_][a-z0-9_]*)\s/gi },
];

/**
 * Reads the function and trigger files, functions first. A file must
 * CREATE OR REPLACE the one object it is named after (and nothing else of
 * its kind), so the file name alone says where an object's text is.
 */
export async function loadSqlObjects(dir: string = SQL_DIR): Promise<SqlObject[]> {
  // A missing directory is a broken build or image, not "no functions":
  // taken as empty, it would drop every function the database has.
  await readdir(dir).catch((err: unknown) => {
    throw new Error(`The function and trigger files are missing: ${dir} cannot be read (a build copies them with scripts/copy-assets.mjs)`, {
      cause: err,
    });
  });
  const objects: SqlObject[] = [];
  for (const { folder, kind, creates } of OBJECT_FOLDERS) {
    const names = (await readdir(join(dir, folder)).catch(ignoreMissing)).filter((n) => n.endsWith(".sql")).sort();
    for (const fileName of names) {
      const file = `${folder}/${fileName}`;
      const match = OBJECT_FILE_NAME.exec(fileName);
      if (!match) throw new Error(`${file} in ${dir} is not named <object name>.sql (lowercase, digits, underscores)`);
      const name = match[1]!;
      const sql = await readFile(join(dir, folder, fileName), "utf8");
      // Comments may name other objects; only the statements count.
      const defined = [...stripSqlComments(sql).matchAll(creates)].map((m) => m[1]!.toLowerCase());
      if (defined.length !== 1 || defined[0] !== name) {
        throw new Error(`${file} must hold exactly one CREATE OR REPLACE ${kind.toUpperCase()} ${name} (found: ${defined.join(", ") || "none"})`);
      }
      objects.push({ kind, name, file, sql, checksum: checksumOf(sql) });
    }
  }
  return objects;
}

function ignoreMissing(err: unknown): string[] {
  if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
  throw err;
}

// Whole-line comments only (the files use no block comments), inside
// function bodies too: that can only hide a CREATE, never invent one.
const stripSqlComments = (sql: string) => sql.replace(/^\s*--.*$/gm, "");

/** Applies every pending migration; returns the names of those it applied (empty when up to date). */
export async function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<string[]> {
  const log = options.log ?? (() => {});
  const migrations = await loadMigrations(options.dir);
  const objects = options.sqlDir === false ? undefined : await loadSqlObjects(options.sqlDir);
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
      const { done, ahead } = await applyPending(client, migrations, log);
      if (objects && ahead) {
        // A newer release migrated this database and owns its functions:
        // writing this release's older text over them would undo its change.
        log("not applying this release's functions and triggers to a database migrated by a newer release");
      } else if (objects) {
        await applyObjects(client, objects, log);
      }
      return done;
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

async function applyPending(
  client: pg.PoolClient,
  migrations: Migration[],
  log: (msg: string) => void,
): Promise<{ done: string[]; ahead: boolean }> {
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
  let ahead = false;
  for (const row of rows) {
    if (known.has(row.version)) continue;
    ahead = true;
    log(`database has migration ${row.name}, which this release does not know; continuing`);
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
  return { done, ahead };
}

/**
 * Brings the functions and triggers in line with the files, all or nothing:
 * (re)applies each file whose checksum is not the recorded one, then drops
 * what a deleted file had defined. Only a change is applied: replacing a
 * trigger locks its table against writes, and replacing a function makes
 * every session recompile it, which a start with nothing changed (every
 * start of every replica) should not cost a live system.
 *
 * Databases migrated before this step existed have no schema_objects rows,
 * so their first run reapplies every file; the migrations had created the
 * same objects, so CREATE OR REPLACE keeps each one's identity, its grants
 * and the triggers bound to it.
 */
async function applyObjects(client: pg.PoolClient, objects: SqlObject[], log: (msg: string) => void): Promise<void> {
  const started = performance.now();
  const applied: string[] = [];
  const dropped: string[] = [];
  let step = "";
  try {
    await client.query("BEGIN");
    await client.query(`CREATE TABLE IF NOT EXISTS schema_objects (
      file       text PRIMARY KEY,
      checksum   text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ file: string; checksum: string }>("SELECT file, checksum FROM schema_objects");
    const recorded = new Map(rows.map((r) => [r.file, r.checksum]));
    const current = new Set(objects.map((o) => o.file));
    const gone = rows.map((r) => r.file).filter((file) => !current.has(file));

    // Triggers before the functions they call, on the way out.
    for (const file of gone.filter((f) => f.startsWith("triggers/"))) {
      step = ` (dropping what ${file} defined)`;
      dropped.push(...(await dropObject(client, file)));
    }
    for (const o of objects) {
      if (recorded.get(o.file) === o.checksum) continue;
      step = ` (at ${o.file})`;
      await client.query(o.sql);
      await client.query(
        `INSERT INTO schema_objects (file, checksum) VALUES ($1, $2)
         ON CONFLICT (file) DO UPDATE SET checksum = excluded.checksum, applied_at = excluded.applied_at`,
        [o.file, o.checksum],
      );
      applied.push(o.file);
    }
    for (const file of gone.filter((f) => !f.startsWith("triggers/"))) {
      step = ` (dropping what ${file} defined)`;
      dropped.push(...(await dropObject(client, file)));
    }
    await client.query("COMMIT");
  } catch (err) {
    await client.query("ROLLBACK").catch(() => {});
    const detail = err instanceof Error ? err.message : String(err);
    throw new Error(`Applying the functions and triggers failed and was rolled back${step}: ${detail}`, { cause: err });
  }
  if (applied.length > 0 || dropped.length > 0) {
    const parts = [applied.length > 0 ? `applied ${applied.join(", ")}` : "", dropped.length > 0 ? `dropped ${dropped.join(", ")}` : ""];
    log(`${parts.filter(Boolean).join("; ")} (${Math.round(performance.now() - started)} ms)`);
  }
}

/** Drops what a deleted file had defined (every overload of a function); returns what it dropped. */
async function dropObject(client: pg.PoolClient, file: string): Promise<string[]> {
  const name = file.replace(/^.*\//, "").replace(/\.sql$/, "");
  const { rows } = await client.query<{ ddl: string; what: string }>(
    file.startsWith("triggers/")
      ? `SELECT format('DROP TRIGGER %I ON %s', t.tgname, t.tgrelid::regclass) AS ddl, format('trigger %I', t.tgname) AS what
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE t.tgname = $1 AND NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace`
      : `SELECT format('DROP ROUTINE %s', p.oid::regprocedure) AS ddl, p.oid::regprocedure::text AS what
         FROM pg_proc p WHERE p.proname = $1 AND p.pronamespace = current_schema()::regnamespace`,
    [name],
  );
  for (const { ddl } of rows) await client.query(ddl);
  await client.query("DELETE FROM schema_objects WHERE file = $1", [file]);
  return rows.map((r) => r.what);
}
