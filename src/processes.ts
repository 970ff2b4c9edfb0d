/**
 * `agentbus serve` with AGENTBUS_HTTP_PROCESSES > 1 (docs/operations.md#several-processes):
 * this primary process owns the database (the embedded PostgreSQL, when no
 * DATABASE_URL is set) and forks that many HTTP processes with node:cluster.
 * They listen on the one port (the primary hands connections out round-robin),
 * share the connection budget AGENTBUS_DB_POOL_SIZE, and coordinate through
 * PostgreSQL (and Redis) exactly as replicas on several machines do: wake-ups,
 * leases, claims and idempotency are there already. Only the first process
 * runs the job workers, so one Chromium and one purge serve them all.
 *
 * A process that dies after it started is replaced; one that fails while
 * starting (a port in use, a bad setting) stops the service, since its
 * replacement would fail the same way. SIGTERM/SIGINT stop the processes
 * (each drains as a single process does), then the database.
 */
import cluster, { type Worker } from "node:cluster";
import type { Config } from "./platform/config.js";
import { openDatabase, type Database } from "./database.js";
import type { Logger } from "./platform/logger.js";

/** Each process's share of AGENTBUS_DB_POOL_SIZE; at least 2, so one slow statement cannot hold a process's every connection. */
export function poolShare(total: number, processes: number): number {
  return Math.max(2, Math.floor(total / processes));
}

/** What a forked HTTP process is told beyond the operator's own environment. */
export function processEnv(config: Config, databaseUrl: string, index: number): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    AGENTBUS_DB_POOL_SIZE: String(poolShare(config.dbPoolSize, config.httpProcesses)),
    AGENTBUS_WORKERS: index === 0 && config.workers ? "true" : "false",
    AGENTBUS_HTTP_PROCESSES: "1",
  };
}

/** Replacing a process that keeps dying is paced, so a crash loop does not spin. */
const RESTART_DELAY_MS = 1_000;

export async function servePrimary(config: Config, logger: Logger): Promise<void> {
  let database: Database | undefined;
  let stopping = false;
  /** The live HTTP processes, and whether each has started listening. */
  const workers = new Map<Worker, { listening: boolean }>();

  const stop = async (reason: string, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal: reason }, "shutting down the HTTP processes");
    setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, config.shutdownGraceMs + 10_000).unref();
    const exits = [...workers.keys()].map((w) => new Promise<void>((resolve) => (w.isDead() ? resolve() : w.once("exit", () => resolve()))));
    for (const w of workers.keys()) if (!w.isDead()) w.process.kill("SIGTERM");
    await Promise.all(exits);
    await database?.stop().catch((err: unknown) => logger.error({ err }, "stopping the database failed"));
    logger.info("stopped");
    process.exit(exitCode);
  };
  process.once("SIGTERM", () => void stop("SIGTERM", 0));
  process.once("SIGINT", () => void stop("SIGINT", 0));

  try {
    database = await openDatabase(config, logger, () => void stop("fatal", 1));
  } catch (err) {
    logger.fatal({ err }, `agentbus could not start: ${(err as Error).message}`);
    process.exit(1);
  }
  const url = database.url;

  const fork = (index: number) => {
    const worker = cluster.fork(processEnv(config, url, index));
    workers.set(worker, { listening: false });
    worker.once("online", () => logger.info({ process: worker.id, pid: worker.process.pid }, "http process started"));
    worker.once("listening", () => {
      const state = workers.get(worker);
      if (state) state.listening = true;
    });
    worker.once("exit", (code, signal) => {
      const state = workers.get(worker);
      workers.delete(worker);
      if (stopping || !state) return;
      if (!state.listening) {
        logger.fatal({ process: worker.id, code, signal }, "an HTTP process failed while starting; stopping");
        void stop("fatal", 1);
        return;
      }
      logger.error({ process: worker.id, code, signal }, "an HTTP process exited; starting another");
      setTimeout(() => {
        if (!stopping) fork(index);
      }, RESTART_DELAY_MS).unref();
    });
  };
  logger.info({ processes: config.httpProcesses, pool_per_process: poolShare(config.dbPoolSize, config.httpProcesses) }, `starting ${config.httpProcesses} HTTP processes`);
  for (let i = 0; i < config.httpProcesses; i++) fork(i);
}
