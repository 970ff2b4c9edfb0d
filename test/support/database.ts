/**
 * A private, migrated database per test file on the run's shared server
 * (see global-setup.ts): `useTestDatabase()` for a whole suite, or
 * `createTestDatabase()` and `drop()` inside one test. A migrated one is a
 * copy of the run's template, which global-setup.ts migrated once.
 */
import { randomBytes } from "node:crypto";
import type pg from "pg";
import { inject } from "vitest";
import { createPool } from "../../src/store/pool.js";
import { databaseUrl, onServer } from "./pg-admin.js";
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
  /** Migrated (default true: a copy of the run's migrated template); false leaves the database empty. */
  migrate?: boolean;
}

export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const serverUrl = inject("databaseUrl");
  const name = `agentbus_t_${randomBytes(6).toString("hex")}`;
  const template = options.migrate ?? true ? ` TEMPLATE ${inject("templateDatabase")}` : "";
  await onServer(serverUrl, `CREATE DATABASE ${name}${template}`);
  const url = databaseUrl(serverUrl, name);
  const pool = createPool(url, { max: options.max ?? 10 });

  let dropping: Promise<void> | undefined;
  const drop = () =>
    (dropping ??= (async () => {
      await pool.end();
      // FORCE: a test that leaked a connection must not make teardown fail.
      await onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    })());
  return { url, pool, drop };
}

/** The database of a suite (the suite owns dropping it). */
export type SuiteDatabase = Omit<TestDatabase, "drop">;

/** A migrated (unless told otherwise) database for the enclosing suite (see forSuite). */
export function useTestDatabase(options: TestDatabaseOptions = {}): SuiteDatabase {
  return forSuite(() => createTestDatabase(options), (db) => db.drop());
}
