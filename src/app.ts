/**
 * Wires the service together: database (embedded or external), migrations,
 * domain, services, the call pipeline and the one-port listener. Used by the
 * CLI and by the integration tests, so both run exactly the same thing.
 */
import { setMaxListeners } from "node:events";
import type pg from "pg";
import { PgNotifyBus } from "./bus/pg-notify-bus.js";
import { RedisBus } from "./bus/redis-bus.js";
import { LocalFanout, type WakeBus } from "./bus/wake-bus.js";
import type { Config } from "./config.js";
import { Keys } from "./domain/keys.js";
import { FixedWindowLimiter } from "./domain/rate-limit.js";
import { systemClock, type Clock } from "./domain/time.js";
import { openFetchers } from "./jobs/fetchers.js";
import { JobRunner, type JobRunnerOptions } from "./jobs/runner.js";
import type { Logger } from "./logger.js";
import { PdfRenderer } from "./pdf/renderer.js";
import { createHttpHandler } from "./server/http-handler.js";
import { listen, type Listener } from "./server/listener.js";
import { Metrics } from "./server/metrics.js";
import { CallPipeline } from "./server/rpc/pipeline.js";
import { createServices } from "./services/index.js";
import { Db } from "./store/db.js";
import { startEmbeddedPostgres } from "./store/embedded.js";
import { PgKeyRepository } from "./store/keys.js";
import { migrate } from "./store/migrate.js";
import { createPool } from "./store/pool.js";
import { startWebhookDispatcher, type WebhookDispatcher } from "./webhooks/index.js";
import { startSchemaThread } from "./domain/json-schema-thread.js";

export interface AppOptions {
  config: Config;
  logger: Logger;
  clock?: Clock;
  /** Overrides for the in-process job runner (tests shorten its intervals). */
  jobs?: Pick<JobRunnerOptions, "processEveryMs" | "intervals">;
}

export interface App {
  readonly url: string;
  readonly port: number;
  readonly pool: pg.Pool;
  /** The in-process job workers; undefined when AGENTBUS_WORKERS=false. */
  readonly jobs: JobRunner | undefined;
  /** The in-process webhook dispatcher; undefined when AGENTBUS_WORKERS=false. */
  readonly webhooks: WebhookDispatcher | undefined;
  /** The in-process PDF renderer (its Chromium starts on the first render); undefined when AGENTBUS_WORKERS=false. */
  readonly pdf: PdfRenderer | undefined;
  /** Drains in-flight requests, stops background work and the database. */
  close(): Promise<void>;
}

/** `agentbus worker`: the job runner alone, on the same database. */
export interface Worker {
  readonly pool: pg.Pool;
  readonly jobs: JobRunner;
  /** Stops the runner (running jobs wrap up), then the pool and the database. */
  close(): Promise<void>;
}

export interface Database {
  url: string;
  stop(): Promise<void>;
}

/** The configured external database, or the embedded one under AGENTBUS_DATA_DIR. */
export async function openDatabase(config: Config, logger: Logger): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {} };
  logger.info({ data_dir: config.dataDir }, "starting embedded PostgreSQL (set DATABASE_URL to use an external server)");
  return startEmbeddedPostgres({
    dataDir: config.dataDir,
    port: config.embeddedPgPort,
    log: (level, msg) => logger[level]({ component: "embedded-postgres" }, msg),
  });
}

/** The database, a migrated pool over it, and the steps that undo both (run in reverse). */
async function openStore(config: Config, logger: Logger, cleanups: Array<() => Promise<void>>): Promise<{ pool: pg.Pool; db: Db; url: string }> {
  const database = await openDatabase(config, logger);
  cleanups.push(() => database.stop());
  const pool = createPool(database.url, {
    max: config.dbPoolSize,
    onError: (err) => logger.warn({ err }, "idle database connection failed"),
  });
  cleanups.push(() => pool.end());
  const applied = await migrate(pool, { log: (msg) => logger.info({ component: "migrate" }, msg) });
  if (applied.length > 0) logger.info({ applied }, "migrations applied");
  return { pool, db: new Db(pool), url: database.url };
}

/**
 * Redis pub/sub when REDIS_URL is set, else LISTEN/NOTIFY on the database (P3).
 * With Redis, LISTEN/NOTIFY is also the fallback while Redis is unreachable
 * (see redis-bus.ts): one more connection per process, idle while Redis works.
 */
function openWakeBus(config: Config, pool: pg.Pool, databaseUrl: string, logger: Logger): WakeBus {
  const onError = (err: Error) => logger.warn({ err, component: "wake-bus" }, "wake-up transport error; wake-ups fall back to NOTIFY or a periodic re-read");
  if (!config.redisUrl) return new PgNotifyBus(pool, { connectionString: databaseUrl, onError });
  const fanout = new LocalFanout();
  const fallback = new PgNotifyBus(pool, { connectionString: databaseUrl, onError, fanout });
  return new RedisBus(config.redisUrl, onError, { fanout, fallback });
}

function cleanupRunner(cleanups: Array<() => Promise<void>>, logger: Logger): () => Promise<void> {
  return async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch((err: unknown) => logger.error({ err }, "shutdown step failed"));
  };
}

export async function startApp({ config, logger, clock = systemClock, jobs: jobOptions }: AppOptions): Promise<App> {
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = cleanupRunner(cleanups, logger);
  try {
    // Started now, not by the first channel with a metadata_schema: loading
    // Ajv on the schema thread is not that request's cost.
    startSchemaThread();
    const { pool, db, url } = await openStore(config, logger, cleanups);
    const bus = openWakeBus(config, pool, url, logger);
    cleanups.push(() => bus.close());
    const keys = new Keys(new PgKeyRepository(db), { clock, cacheTtlMs: 5_000 });
    const pipeline = new CallPipeline(
      createServices({ db, bus, clock, config, keys, mintLimiter: new FixedWindowLimiter(config.keyMintLimitPerHour, 3_600_000, clock) }),
      {
        db,
        keys,
        adminToken: config.adminToken,
        rateLimiter: new FixedWindowLimiter(config.rateLimitPerMinute, 60_000, clock),
        reportInternal: (err) => logger.error({ err }, "internal error"),
      },
    );

    const metrics = new Metrics();
    metrics.gauge("agentbus_db_pool_total_connections", "Open database connections.", () => pool.totalCount);
    metrics.gauge("agentbus_db_pool_idle_connections", "Idle database connections.", () => pool.idleCount);
    metrics.gauge("agentbus_db_pool_waiting_requests", "Queries waiting for a connection.", () => pool.waitingCount);
    if (bus instanceof RedisBus) {
      metrics.gauge("agentbus_wake_redis_connected", "1 while wake-ups arrive over Redis, 0 while they fall back.", () => (bus.connected ? 1 : 0));
    }

    // In-process workers unless AGENTBUS_WORKERS=false. Registered after the
    // pool, so stopped before it (cleanups run in reverse).
    const webhooks = config.workers ? await startWebhookDispatcher({ config, db, clock, logger }) : undefined;
    if (webhooks) cleanups.push(() => webhooks.stop(config.shutdownGraceMs));
    // Closed after the runner stopped (cleanups run in reverse), so no render is cut short by it.
    const pdf = config.workers ? PdfRenderer.fromConfig(config, logger) : undefined;
    if (pdf) cleanups.push(() => pdf.close());
    const fetchers = config.workers ? openFetchers(config) : undefined;
    if (fetchers) cleanups.push(() => fetchers.close());
    const jobs = config.workers
      ? await JobRunner.start({ pool, deps: { db, clock, logger, webhooks, pdf, ...fetchers?.deps }, stopTimeoutMs: config.shutdownGraceMs, ...jobOptions })
      : undefined;
    if (jobs) cleanups.push(() => jobs.stop());

    const shutdown = new AbortController();
    // Every in-flight call listens on this one signal; the default cap of 10
    // listeners would warn under ordinary concurrency.
    setMaxListeners(0, shutdown.signal);
    const listener: Listener = await listen({
      host: config.host,
      port: config.port,
      handler: createHttpHandler({
        pipeline,
        pool,
        metrics,
        logger,
        corsOrigins: config.corsOrigins,
        maxBodyBytes: config.maxBodyBytes,
        trustProxy: config.trustProxy,
        shutdownSignal: shutdown.signal,
      }),
    });

    let closed: Promise<void> | undefined;
    return {
      url: listener.url,
      port: listener.address.port,
      pool,
      jobs,
      webhooks,
      pdf,
      close() {
        closed ??= (async () => {
          // Long-lived calls (long-polls, streams) are told to finish half-way
          // through the grace period; ordinary requests just complete. Jobs
          // and webhook requests wrap up in the same grace period, alongside.
          const grace = config.shutdownGraceMs;
          const timer = setTimeout(() => shutdown.abort(), grace / 2);
          await Promise.all([listener.close(grace), jobs?.stop(), webhooks?.stop(grace)]);
          clearTimeout(timer);
          shutdown.abort();
          await cleanup();
        })();
        return closed;
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** Starts the job workers without the API (decision P2, the scale-out shape in DESIGN.md). */
export async function startWorker({ config, logger, clock = systemClock, jobs: jobOptions }: AppOptions): Promise<Worker> {
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = cleanupRunner(cleanups, logger);
  try {
    const { pool, db } = await openStore(config, logger, cleanups);
    const webhooks = await startWebhookDispatcher({ config, db, clock, logger });
    cleanups.push(() => webhooks.stop(config.shutdownGraceMs));
    const pdf = PdfRenderer.fromConfig(config, logger);
    cleanups.push(() => pdf.close());
    const fetchers = openFetchers(config);
    cleanups.push(() => fetchers.close());
    const jobs = await JobRunner.start({ pool, deps: { db, clock, logger, webhooks, pdf, ...fetchers.deps }, stopTimeoutMs: config.shutdownGraceMs, ...jobOptions });
    cleanups.push(() => jobs.stop());
    let closed: Promise<void> | undefined;
    return {
      pool,
      jobs,
      close() {
        closed ??= cleanup();
        return closed;
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
