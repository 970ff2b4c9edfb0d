/**
 * One PostgreSQL for the whole test run; each test file then creates its own
 * database on it (test/support/database.ts), so files run in parallel
 * without seeing each other's rows.
 *
 * TEST_DATABASE_URL points the run at an existing server instead (any
 * PostgreSQL ≥ 15; the user needs CREATEDB).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { TestProject } from "vitest/node";
import { startEmbeddedPostgres } from "../../src/store/embedded.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server URL on which tests may create and drop databases. */
    databaseUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  // The servers the tests start serve the web console from dist/console, as `npm start` does.
  execFileSync(process.execPath, ["scripts/build-console.mjs"], { stdio: "inherit" });
  const external = process.env.TEST_DATABASE_URL;
  if (external) {
    project.provide("databaseUrl", external);
    return undefined;
  }
  const dataDir = await mkdtemp(path.join(tmpdir(), "agentbus-test-pg-"));
  try {
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
    project.provide("databaseUrl", server.url);
    return async () => {
      await server.stop();
      await rm(dataDir, { recursive: true, force: true });
    };
  } catch (err) {
    await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
}
