#!/usr/bin/env node
/**
 * agentbus serve   — run the service (embedded PostgreSQL unless DATABASE_URL is set)
 * agentbus worker  — run only the job workers (no HTTP) until SIGTERM
 * agentbus migrate — apply pending migrations and exit
 * agentbus mcp     — an MCP server on stdio for a running service
 */
// First: OpenTelemetry's instrumentation of pg must be in place before pg is loaded.
import { telemetry } from "./telemetry.js";
// The service's modules (app.js) are imported only once PostgreSQL is
// starting: loading them takes about as long as PostgreSQL's start.
import { ConfigError, loadConfig, type Config } from "./platform/config.js";
import { openDatabase } from "./database.js";
import { createLogger as createBaseLogger, resolveLogFormat } from "./platform/logger.js";
import { migrate } from "./store/migrate.js";
import { createPool } from "./store/pool.js";
import cluster from "node:cluster";
import { servePrimary } from "./processes.js";

const USAGE = `usage: agentbus <command>

commands:
  serve     run the service on HOST:PORT (gRPC, gRPC-Web, Connect and REST on one port),
            with the job workers unless AGENTBUS_WORKERS=false
  worker    run only the job workers (purge, …) against the same database, until SIGTERM
  migrate   apply pending database migrations and exit
  mcp       an MCP server on stdin/stdout (for an MCP client) that talks to a running
            service: AGENTBUS_URL (default http://127.0.0.1:8080), AGENTBUS_API_KEY

shell commands (against a running service; --help on each; --url, --key and --raw on all):
  login, key create|show, channel create|get|list|rename|alias|delete, send, tail, work, result,
  pdf, parse, transcript

Configuration comes from the environment; see the README for every variable.`;

/** On stdout: readable in a terminal, JSON lines otherwise (AGENTBUS_LOG_FORMAT forces either). */
function createLogger(config: Config): ReturnType<typeof createBaseLogger> {
  const logger = createBaseLogger(config.logLevel, undefined, resolveLogFormat(config.logFormat, process.stdout.isTTY === true));
  // Several HTTP processes write one log: each line says which one wrote it.
  return cluster.worker ? logger.child({ process: cluster.worker.id }) : logger;
}

function readConfig(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`agentbus: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

async function serve(): Promise<void> {
  const config = readConfig();
  const logger = createLogger(config);
  process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));
  if (config.httpProcesses > 1 && cluster.isPrimary) {
    await servePrimary(config, logger);
    return;
  }
  let app;
  const fatal = fatalStop();
  try {
    const database = openDatabase(config, logger, fatal.trigger);
    database.catch(() => {}); // awaited (and reported) by startApp
    const { startApp } = await import("./app.js");
    app = await startApp({ config, logger, onFatal: fatal.trigger, database });
  } catch (err) {
    logger.fatal({ err }, `agentbus could not start: ${(err as Error).message}`);
    process.exit(1);
  }
  logger.info({ url: app.url }, `agentbus listening on ${app.url}`);
  fatal.arm(stopOnSignals(app, config, logger));
}

async function worker(): Promise<void> {
  const config = readConfig();
  const logger = createLogger(config);
  process.on("unhandledRejection", (err) => logger.error({ err }, "unhandled rejection"));
  let running;
  const fatal = fatalStop();
  try {
    const database = openDatabase(config, logger, fatal.trigger);
    database.catch(() => {}); // awaited (and reported) by startWorker
    const { startWorker } = await import("./app.js");
    running = await startWorker({ config, logger, onFatal: fatal.trigger, database });
  } catch (err) {
    logger.fatal({ err }, `agentbus worker could not start: ${(err as Error).message}`);
    process.exit(1);
  }
  logger.info("agentbus worker running");
  fatal.arm(stopOnSignals(running, config, logger));
}

/**
 * SIGTERM/SIGINT: close (requests drain, jobs wrap up, then the pool and the
 * database), then exit explicitly: timers that libraries leave behind (Agenda
 * keeps one per finished job run) must not hold the process.
 */
function stopOnSignals(
  target: { close(): Promise<void> },
  config: Config,
  logger: ReturnType<typeof createLogger>,
): (reason: string, exitCode: number) => void {
  let stopping = false;
  const stop = (signal: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    // A hard stop if draining hangs, so an orchestrator never waits forever.
    setTimeout(() => {
      logger.error("shutdown took too long; exiting");
      process.exit(1);
    }, config.shutdownGraceMs + 5_000).unref();
    target.close().then(
      async () => {
        logger.info("stopped");
        // The spans of the last requests, sent before the process goes.
        await telemetry?.shutdown().catch(() => undefined);
        process.exit(exitCode);
      },
      (err: unknown) => {
        logger.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  return stop;
}

/** A fatal condition may come while starting (exit at once) or later (shut down cleanly, exit 1). */
function fatalStop(): { trigger: (err: Error) => void; arm: (stop: (reason: string, exitCode: number) => void) => void } {
  let stop: ((reason: string, exitCode: number) => void) | undefined;
  let pending = false;
  return {
    trigger: () => {
      if (stop) stop("fatal", 1);
      else pending = true;
    },
    arm: (s) => {
      stop = s;
      if (pending) s("fatal", 1);
    },
  };
}

async function runMigrations(): Promise<void> {
  const config = readConfig();
  const logger = createLogger(config);
  const database = await openDatabase(config, logger);
  const pool = createPool(database.url, { max: 2 });
  try {
    const applied = await migrate(pool, { log: (msg) => logger.info(msg) });
    logger.info({ applied }, applied.length > 0 ? `applied ${applied.length} migration(s)` : "database is up to date");
  } finally {
    await pool.end();
    await database.stop();
  }
}

const command = process.argv[2];
switch (command) {
  case "serve":
    await serve();
    break;
  case "worker":
    await worker();
    break;
  case "migrate":
    await runMigrations().catch((err: unknown) => {
      process.stderr.write(`agentbus migrate failed: ${(err as Error).message}\n`);
      process.exit(1);
    });
    break;
  case "mcp": {
    const { serveMcpStdio } = await import("./server/mcp/stdio.js");
    await serveMcpStdio(process.env);
    process.exit(0);
    break;
  }
  case undefined:
  case "help":
  case "--help":
  case "-h":
    process.stdout.write(`${USAGE}\n`);
    break;
  default: {
    const { runShell } = await import("./shell/commands.js");
    const code = await runShell(process.argv.slice(2), {
      env: process.env,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
      stdin: process.stdin,
      outIsTTY: process.stdout.isTTY === true,
      errIsTTY: process.stderr.isTTY === true,
    });
    process.exit(code);
  }
}
