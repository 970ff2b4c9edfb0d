/**
 * One PostgreSQL for the whole test run; each test file then creates its own
 * database on it (test/support/database.ts), so files run in parallel
 * without seeing each other's rows.
 *
 * The migrations run once here, into a template database; a test database is
 * a copy of it (CREATE DATABASE … TEMPLATE, a few milliseconds of copying
 * instead of running every migration again per database).
 *
 * TEST_DATABASE_URL points the run at an existing server instead (any
 * PostgreSQL ≥ 15; the user needs CREATEDB).
 *
 * Runs once per run: vitest.config.ts gives it to the root project only, whose
 * provided values every project inherits.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../src/store/embedded.js";
import { migrate } from "../../src/store/migrate.js";
import { compileService } from "./compiled.js";
import { createPool } from "../../src/store/pool.js";
import { databaseUrl, onServer } from "./pg-admin.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server URL on which tests may create and drop databases. */
    databaseUrl: string;
    /** A migrated database on that server that test databases are copied from (no one connects to it). */
    templateDatabase: string;
    /** The folder the service is compiled into for the child processes tests start (see compiled.ts). */
    compiledService: string;
    /** A data folder as the embedded PostgreSQL's first start leaves it, stopped, for tests to copy (see data-dir.ts). */
    clusterTemplate: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The servers the tests start serve the web console from dist/console, as `npm start` does.
  execFileSync(process.execPath, ["scripts/build-console.mjs"], { stdio: "inherit" });
  const undo: Array<() => Promise<void>> = [];
  const teardown = async () => {
    for (const step of undo.splice(0).reverse()) await step();
  };
  // Compiles, and initialises the cluster that tests copy, while PostgreSQL starts.
  const compiling = compileService();
  const initialising = initialiseClusterTemplate();
  try {
    const serverUrl = process.env.TEST_DATABASE_URL ?? (await startServer(undo));
    const template = `agentbus_template_${randomBytes(6).toString("hex")}`;
    await onServer(serverUrl, `CREATE DATABASE ${template}`);
    undo.push(() => onServer(serverUrl, `DROP DATABASE IF EXISTS ${template} WITH (FORCE)`));
    const pool = createPool(databaseUrl(serverUrl, template), { max: 2 });
    try {
      await migrate(pool);
    } finally {
      // A template cannot be copied while anyone is connected to it.
      await pool.end();
    }
    project.provide("databaseUrl", serverUrl);
    project.provide("templateDatabase", template);
    const compiled = await compiling;
    undo.push(compiled.remove);
    project.provide("compiledService", compiled.dir);
    const cluster = await initialising;
    undo.push(() => rm(cluster, { recursive: true, force: true }));
    project.provide("clusterTemplate", cluster);
    return teardown;
  } catch (err) {
    await compiling.then(({ remove }) => remove(), () => {});
    await initialising.then((dir) => rm(dir, { recursive: true, force: true }), () => {});
    await teardown();
    throw err;
  }
}

/** A first start of the embedded PostgreSQL (initdb, the agentbus database), then a clean stop. */
async function initialiseClusterTemplate(): Promise<string> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "agentbus-test-cluster-"));
  try {
    const server = await startEmbeddedPostgres({ dataDir, port: 0, log: () => {}, extraFlags: ["-c", "fsync=off"] });
    await server.stop();
    return dataDir;
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}

async function startServer(undo: Array<() => Promise<void>>): Promise<string> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "agentbus-test-pg-"));
  undo.push(() => rm(dataDir, { recursive: true, force: true }));
  const server = await startEmbeddedPostgres({
    dataDir,
    port: 0,
    log: (level, msg) => {
      // DROP DATABASE … WITH (FORCE) and pg_terminate_backend tests end sessions on purpose.
      if (level === "info" || msg.includes("terminating connection due to administrator command")) return;
      console.error(`[test postgres] ${msg}`);
    },
    // Durability is worthless for throwaway data and costs most of the time.
    extraFlags: [
      "-c", "fsync=off",
      "-c", "synchronous_commit=off",
      "-c", "full_page_writes=off",
      // Parallel test files each hold a pool.
      "-c", "max_connections=300",
    ],
  });
  undo.push(() => server.stop());
  return server.url;
}
