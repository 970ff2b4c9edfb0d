/**
 * Data folders for the embedded PostgreSQL. `initialisedDataDir()` is one
 * as the first start leaves it (initdb run, the agentbus database created,
 * stopped cleanly), copied from the one the run's setup made
 * (global-setup.ts): a second or later start, without the second or so of
 * initdb. Tests of the first start itself use an empty folder.
 */
import { execFile } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { inject } from "vitest";

/** A new folder under the system's temporary folder holding an initialised, stopped cluster; the caller removes it. */
export async function initialisedDataDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  // cp -a keeps owners and modes: as root the cluster belongs to the postgres user.
  await promisify(execFile)("cp", ["-a", `${inject("clusterTemplate")}/.`, dir]);
  return dir;
}
