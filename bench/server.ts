/**
 * The service under test: either an already running server (BENCH_URL) or a
 * fresh one started here as a separate process on the embedded PostgreSQL,
 * in a temporary AGENTBUS_DATA_DIR that is removed afterwards.
 *
 * See serverEntry() for how the service is run (BENCH_SERVER_ENTRY).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createWriteStream } from "node:fs";
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { freePort } from "../src/platform/free-port.js";

export interface ServerUnderTest {
  url: string;
  /** pid of the service's node process; undefined for BENCH_URL. */
  pid: number | undefined;
  /** "embedded (started by the bench)" or "external (BENCH_URL)". */
  kind: string;
  /** AGENTBUS_DATA_DIR of a service started here (for superuser()). */
  pgDataDir?: string;
  stop(): Promise<void>;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer";
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the service exited during start (code ${child.exitCode}, signal ${child.signalCode})`);
    }
    try {
      const res = await fetch(`${url}/health`);
      const text = await res.text();
      if (res.status === 200) return;
      last = `${res.status} ${text}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(100);
  }
  throw new Error(`the service did not become healthy within ${timeoutMs} ms (last: ${last})`);
}

export async function startServer(env: NodeJS.ProcessEnv = process.env): Promise<ServerUnderTest> {
  const external = env.BENCH_URL?.trim();
  if (external) {
    const url = external.replace(/\/+$/, "");
    const res = await fetch(`${url}/health`).catch((err: Error) => {
      throw new Error(`BENCH_URL ${url} does not answer: ${err.message}`);
    });
    await res.text();
    if (res.status !== 200) throw new Error(`BENCH_URL ${url}/health answered ${res.status}`);
    log(`using the running service at ${url}`);
    return { url, pid: undefined, kind: "external (BENCH_URL)", stop: async () => {} };
  }

  const dataDir = await mkdtemp(path.join(os.tmpdir(), "agentbus-bench-"));
  // At AGENTBUS_LOG_LEVEL=warn the service does not log its "listening on"
  // line (that is info), so PORT=0 would leave us unable to learn the port.
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const pgDataDir = path.join(dataDir, "data");
  const logFile = path.join(dataDir, "server.log");
  const out = createWriteStream(logFile);
  const entry = await serverEntry(env.BENCH_SERVER_ENTRY ?? "tsx", dataDir);
  // Extra node flags for the service, passed on its command line (not as
  // NODE_OPTIONS, which refuses --cpu-prof), e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeFlags = (env.BENCH_SERVER_NODE_OPTIONS ?? "").split(/\s+/).filter((f) => f !== "");

  const launch = (flags: string[]): ChildProcess => {
    const child = spawn(process.execPath, [...flags, ...entry], {
      cwd: ROOT,
      env: {
        ...env,
        // The service under test must not inherit our own NODE_OPTIONS (tsx).
        NODE_OPTIONS: "",
        HOST: "127.0.0.1",
        PORT: String(port),
        DATABASE_URL: "",
        AGENTBUS_DATA_DIR: pgDataDir,
        AGENTBUS_RATE_LIMIT: "0",
        AGENTBUS_KEY_MINT_LIMIT: "0",
        // One JSON line per request costs the server CPU we want to measure the API with.
        AGENTBUS_LOG_LEVEL: env.BENCH_SERVER_LOG_LEVEL ?? "warn",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    log(`starting the service (pid ${child.pid}: node ${[...flags, ...entry].join(" ")}) on ${url}, data in ${dataDir}`);
    return child;
  };

  const terminate = async (child: ChildProcess) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    const hard = setTimeout(() => {
      log("the service did not stop within 20 s of SIGTERM; sending SIGKILL");
      child.kill("SIGKILL");
    }, 20_000);
    await exited;
    clearTimeout(hard);
    log(`the service stopped (code ${child.exitCode}, signal ${child.signalCode})`);
  };

  const healthy = async (child: ChildProcess) => {
    try {
      await waitForHealth(url, child, Number(env.BENCH_START_TIMEOUT_MS ?? 120_000));
    } catch (err) {
      const tail = await readFile(logFile, "utf8").catch(() => "");
      log(`service log (last lines):\n${tail.split("\n").slice(-30).join("\n")}`);
      throw err;
    }
  };

  let child: ChildProcess | undefined;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      if (child) await terminate(child);
      out.end();
      if (env.BENCH_KEEP_DATA === "1") log(`kept ${dataDir} (BENCH_KEEP_DATA=1)`);
      else await rm(dataDir, { recursive: true, force: true });
    })());

  try {
    // PostgreSQL settings for a profiling run (ALTER SYSTEM, then a restart
    // of the service so that they apply): pg_stat_statements, and any
    // BENCH_PG_SETTINGS such as "synchronous_commit=off".
    const settings = pgSettings(env);
    if (settings.length > 0) {
      child = launch([]);
      await healthy(child);
      const db = await superuser(pgDataDir);
      try {
        for (const [name, value] of settings) {
          log(`PostgreSQL: ALTER SYSTEM SET ${name} = '${value}'`);
          await db.query(`ALTER SYSTEM SET ${name} = '${value.replaceAll("'", "''")}'`);
        }
      } finally {
        await db.end();
      }
      await terminate(child);
    }
    // The measured run: started with the profiling flags, if any.
    if (nodeFlags.length > 0) log(`service node flags: ${nodeFlags.join(" ")}`);
    child = launch(nodeFlags);
    await healthy(child);
  } catch (err) {
    await stop();
    throw err;
  }
  log("the service is healthy");
  return { url, pid: child.pid, kind: "embedded (started by the bench)", stop, pgDataDir };
}

/**
 * How to run the service:
 *   tsx   — from source (node --import tsx src/cli.ts serve), the default;
 *   build — compiled by tsc into the temporary folder first, then run with
 *           plain node (what `npm start` runs, without writing dist/);
 *   dist  — dist/src/cli.js as left by `npm run build`.
 */
async function serverEntry(kind: string, tempDir: string): Promise<string[]> {
  if (kind === "tsx") return ["--import", "tsx", path.join(ROOT, "src/cli.ts"), "serve"];
  if (kind === "dist") return [path.join(ROOT, "dist/src/cli.js"), "serve"];
  if (kind !== "build") throw new Error(`BENCH_SERVER_ENTRY must be tsx, build or dist (got ${JSON.stringify(kind)})`);
  const out = path.join(tempDir, "build");
  log(`compiling the service into ${out}`);
  execFileSync(process.execPath, [path.join(ROOT, "node_modules/typescript/bin/tsc"), "-p", path.join(ROOT, "tsconfig.build.json"), "--outDir", out], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
  await cp(path.join(ROOT, "src/store/migrations"), path.join(out, "src/store/migrations"), { recursive: true });
  // ESM, and packages resolved from the repository's node_modules.
  await writeFile(path.join(out, "package.json"), JSON.stringify({ type: "module" }));
  await symlink(path.join(ROOT, "node_modules"), path.join(out, "node_modules"));
  return [path.join(out, "src/cli.js"), "serve"];
}

function pgSettings(env: NodeJS.ProcessEnv): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  if (env.BENCH_PG_PROFILE === "1") out.push(["shared_preload_libraries", "pg_stat_statements"]);
  for (const item of (env.BENCH_PG_SETTINGS ?? "").split(",")) {
    const eq = item.indexOf("=");
    if (item.trim() === "") continue;
    const name = item.slice(0, eq).trim();
    if (eq === -1 || !/^[a-z_.]+$/.test(name)) throw new Error(`BENCH_PG_SETTINGS: expected name=value[,name=value…], got ${JSON.stringify(item)}`);
    out.push([name, item.slice(eq + 1).trim()]);
  }
  return out;
}

/**
 * A superuser connection to the embedded PostgreSQL of a running service,
 * found through its postmaster.pid (line 4 is the port) and the password
 * file the service keeps next to the cluster. Run as root from a folder the
 * postgres user cannot reach (mkdtemp's are 0700), the cluster lives where
 * the data folder's pg-location says.
 */
export async function superuser(pgDataDir: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: await superuserUrl(pgDataDir) });
  await client.connect();
  return client;
}

/** The superuser connection URL of a running service's embedded PostgreSQL (see superuser). */
export async function superuserUrl(pgDataDir: string): Promise<string> {
  const home = (await readFile(path.join(pgDataDir, "pg-location"), "utf8").catch(() => pgDataDir)).trim();
  const pid = await readFile(path.join(home, "pg", "postmaster.pid"), "utf8");
  const port = Number(pid.split("\n")[3]);
  const password = (await readFile(path.join(pgDataDir, "pg-password"), "utf8")).trim();
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/agentbus`;
}
