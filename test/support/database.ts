/**
 * A private, migrated database per test file on the run's shared server
 * (see global-setup.ts): `useTestDatabase()` for a whole suite, or
 * `createTestDatabase()` and `drop()` inside one test.
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";
import { migrate } from "../../src/store/migrate.js";
import { createPool } from "../../src/store/pool.js";
import { forSuite } from "./suite.js";

export interface TestDatabase {
  /** Connection URL of this database only. */
  url: string;
  /** A pool from createPool, so values parse exactly as in the service. */
  pool: pg.Pool;
  /** Closes the pool and drops the database; safe to call more than once. */
  drop(): Promise<void>;
}

export interface TestDatabaseOptions {
  /** Pool size; default 10. */
  max?: number;
  /** Apply the migrations (default true); false leaves the database empty. */
  migrate?: boolean;
}

export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const serverUrl = inject("databaseUrl");
  const name = `agentbus_t_${randomBytes(6).toString("hex")}`;
  await onServer(serverUrl, `CREATE DATABASE ${name}`);
  const url = databaseUrl(serverUrl, name);
  const pool = createPool(url, { max: options.max ?? 10 });

  let dropping: Promise<void> | undefined;
  const drop = () =>
    (dropping ??= (async () => {
      await pool.end();
      // FORCE: a test that leaked a connection must not make teardown fail.
      await onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    })());

  if (options.migrate ?? true) {
    try {
      await migrate(pool);
    } catch (err) {
      await drop();
      throw err;
    }
  }
  return { url, pool, drop };
}

/** The database of a suite (the suite owns dropping it). */
export type SuiteDatabase = Omit<TestDatabase, "drop">;

/** A migrated (unless told otherwise) database for the enclosing suite (see forSuite). */
export function useTestDatabase(options: TestDatabaseOptions = {}): SuiteDatabase {
  return forSuite(() => createTestDatabase(options), (db) => db.drop());
}

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** CREATE/DROP DATABASE cannot run inside the database concerned, so they go through the server URL's database. */
async function onServer(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  client.on("error", () => {}); // failures surface through the awaited calls
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
