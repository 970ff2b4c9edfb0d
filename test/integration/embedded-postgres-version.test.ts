/**
 * A data folder left by another PostgreSQL major version (an older or newer
 * agentbus) cannot be opened; the start fails with what to do about it.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startEmbeddedPostgres } from "../../src/store/embedded.js";

const FAST = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"];
let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), "agentbus-pg-version-test-"));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

it("refuses a data folder from another PostgreSQL major version, saying how to move it aside or keep its data", async () => {
  // A real cluster (initdb, as root owned by the postgres user), then made to
  // look like one an agentbus embedding PostgreSQL 16 left behind.
  const first = await startEmbeddedPostgres({ dataDir, port: 0, log: () => {}, extraFlags: FAST });
  await first.stop();
  await writeFile(path.join(dataDir, "pg", "PG_VERSION"), "16\n");
  const started = startEmbeddedPostgres({ dataDir, port: 0, log: () => {}, extraFlags: FAST });
  await expect(started).rejects.toThrow(/initialized by PostgreSQL version 16/);
  await expect(started).rejects.toThrow(`mv ${dataDir} ${dataDir}.pg16`);
  await expect(started).rejects.toThrow(/AGENTBUS_DATA_DIR/);
  await expect(started).rejects.toThrow(/pg_dump/);
});
