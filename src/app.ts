/**
 * Wires the service together: database (embedded or external), migrations,
 * domain, services, the call pipeline and the one-port listener. Used by the
 * CLI and by the integration tests, so both run exactly the same thing.
 */
import { setMaxListeners } from "node:events";
import type pg from "pg";
import { PgNotifyBus } from "./bus/pg-notify-bus.js";
import { LocalFanout, type WakeBus } from "./bus/wake-bus.js";
import { componentReports, describeDatabase, isRedisBus, logComponents, type ComponentSources } from "./components.js";
import type { Config } from "./platform/config.js";
import { openDatabase, type Database } from "./database.js";
import { Keys } from "./domain/keys.js";
import { FixedWindowLimiter } from "./domain/rate-limit.js";
import { systemClock, type Clock } from "./model/time.js";
import { openFetchers } from "./jobs/fetchers.js";
import { JobRunner, type JobRunnerOptions } from "./jobs/runner.js";
import { LogLimiter } from "./platform/log-limiter.js";
import type { Logger } from "./platform/logger.js";
import { chromiumInstalled } from "./pdf/chromium.js";
import { PdfRenderer } from "./pdf/renderer.js";
import { createHttpHandler } from "./server/http-handler.js";
import { listen, type Listener } from "./server/listener.js";
import { Metrics } from "./server/metrics.js";
import { CallPipeline } from "./server/rpc/pipeline.js";
import { createServices } from "./services/index.js";
import { Db } from "./store/db.js";
import { PgKeyRepository } from "./store/keys.js";
import { migrate } from "./store/migrate.js";
import { closePool, createPool } from "./store/pool.js";
import { startWebhookDispatcher, type WebhookDispatcher } from "./webhooks/index.js";
import { startSchemaThread } from "./domain/json-schema-thread.js";

export { openDatabase, type Database };

const IDLE_CONNECTION_FAILED = "idle database connection failed";

export interface AppOptions {
  config: Config;
  logger: Logger;
  clock?: Clock;
  /** Overrides for the in-process job runner (tests shorten its intervals). */
  jobs?: Pick<JobRunnerOptions, "processEveryMs" | "intervals">;
  /**
   * The service cannot go on (the embedded PostgreSQL keeps crashing and is no
   * longer restarted); already logged as fatal. The CLI shuts down and exits
   * non-zero so that an outer supervisor (systemd, Kubernetes) takes over.
   */
  onFatal?: (err: Error) => void;
  /**
   * The database, already starting: the CLI starts the embedded PostgreSQL
   * (a child process) while this module graph loads, about a second saved
   * at every start. Default: opened here.
   */
  database?: Promise<Database>;
}

export interface App {
  readonly url: string;
  readonly port: number;
  readonly pool: pg.Pool;
  /** The in-process job workers; undefined when AGENTBUS_WORKERS=false. */
  readonly jobs: JobRunner | undefined;
  /** The in-process webhook dispatcher; undefined when AGENTBUS_WORKERS=false. */
  readonly webhooks: WebhookDispatcher | undefined;
  /** The in-process PDF renderer (prepared at start, its Chromium launched on the first render); undefined when AGENTBUS_WORKERS=false. */
  readonly pdf: PdfRenderer | undefined;
  /** Where long-polls and watches wait: its subscriptions tell a test that a long-poll is parked. */
  readonly bus: WakeBus;
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

/** The database, a migrated pool over it, and the steps that undo both (run in reverse). */
async function openStore(
  config: Config,
  logger: Logger,
  cleanups: Array<() => Promise<void>>,
  onFatal: AppOptions["onFatal"],
  starting: AppOptions["database"],
): Promise<{ pool: pg.Pool; db: Db; url: string; outageLog: LogLimiter }> {
  const database = await (starting ?? openDatabase(config, logger, onFatal));
  cleanups.push(() => database.stop());
  const outageLog = new LogLimiter(logger, { intervalMs: config.logRepeatIntervalMs });
  const pool = createPool(database.url, {
    max: config.dbPoolSize,
    onError: (err) => outageLog.warn(IDLE_CONNECTION_FAILED, err),
  });
  pool.on("connect", () => outageLog.recovered(IDLE_CONNECTION_FAILED, "database connections work again"));
  cleanups.push(() => closePool(pool));
  const applied = await migrate(pool, { log: (msg) => logger.info({ component: "migrate" }, msg) });
  if (applied.length > 0) logger.info({ applied }, "migrations applied");
  return { pool, db: new Db(pool), url: database.url, outageLog };
}

/**
 * Redis pub/sub when REDIS_URL is set, else LISTEN/NOTIFY on the database (P3).
 * With Redis, LISTEN/NOTIFY is also the fallback while Redis is unreachable
 * (see redis-bus.ts): one more connection per process, idle while Redis works.
 */
async function openWakeBus(config: Config, pool: pg.Pool, databaseUrl: string, outageLog: LogLimiter): Promise<WakeBus> {
  const log = outageLog.child({ component: "wake-bus" });
  const condition = "wake-up transport error; wake-ups fall back to NOTIFY or a periodic re-read";
  const onError = (err: Error) => log.warn(condition, err);
  const onReconnected = () => log.recovered(condition, "wake-up LISTEN connection restored");
  if (!config.redisUrl) return new PgNotifyBus(pool, { connectionString: databaseUrl, onError, onReconnected });
  // Loaded only with REDIS_URL: ioredis adds ~0.4 s to every start otherwise.
  const { RedisBus } = await import("./bus/redis-bus.js");
  const fanout = new LocalFanout();
  const fallback = new PgNotifyBus(pool, { connectionString: databaseUrl, onError, onReconnected, fanout });
  const redisDown = "Redis wake-up transport error; wake-ups fall back to NOTIFY";
  return new RedisBus(config.redisUrl, (err) => log.warn(redisDown, err), {
    fanout,
    fallback,
    onResubscribed: () => log.recovered(redisDown, "Redis wake-ups restored"),
  });
}

/**
 * This process's PDF renderer, its Chromium being prepared in the background
 * (a failure there is its state, reported, never a failed start).
 */
function openRenderer(config: Config, logger: Logger, cleanups: Array<() => Promise<void>>): PdfRenderer {
  const pdf = PdfRenderer.fromConfig(config, logger);
  cleanups.push(() => pdf.close());
  void pdf.prepare();
  return pdf;
}

function cleanupRunner(cleanups: Array<() => Promise<void>>, logger: Logger): () => Promise<void> {
  return async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch((err: unknown) => logger.error({ err }, "shutdown step failed"));
  };
}

export async function startApp({ config, logger, clock = systemClock, jobs: jobOptions, onFatal, database }: AppOptions): Promise<App> {
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = cleanupRunner(cleanups, logger);
  try {
    // Started now, not by the first channel with a metadata_schema: loading
    // Ajv on the schema thread is not that request's cost.
    startSchemaThread();
    // Prepared (the first start unpacks Chromium) while the database starts;
    // closed last, after the job runner stopped, so no render is cut short by it.
    const pdf = config.workers ? openRenderer(config, logger, cleanups) : undefined;
    const { pool, db, url, outageLog } = await openStore(config, logger, cleanups, onFatal, database);
    const bus = await openWakeBus(config, pool, url, outageLog);
    cleanups.push(() => bus.close());
    const keys = new Keys(new PgKeyRepository(db), { clock, cacheTtlMs: 5_000 });
    const components: ComponentSources = { config, databaseUrl: url, bus, pdf };
    // Without a renderer here, the configured Chromium's presence is the check.
    const pdfAvailable = pdf ? async () => pdf.status.state !== "down" && (await chromiumInstalled(config.chromiumPath)) : undefined;
    const pipeline = new CallPipeline(
      createServices({
        db,
        bus,
        clock,
        config,
        keys,
        mintLimiter: new FixedWindowLimiter(config.keyMintLimitPerHour, 3_600_000, clock),
        pdfAvailable,
      }),
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
    if (isRedisBus(bus)) {
      metrics.gauge("agentbus_wake_redis_connected", "1 while wake-ups arrive over Redis, 0 while they fall back.", () => (bus.connected ? 1 : 0));
    }

    // In-process workers unless AGENTBUS_WORKERS=false. Registered after the
    // pool, so stopped before it (cleanups run in reverse).
    const webhooks = config.workers ? await startWebhookDispatcher({ config, db, clock, logger, outageLog }) : undefined;
    if (webhooks) cleanups.push(() => webhooks.stop(config.shutdownGraceMs));
    const fetchers = config.workers ? openFetchers(config) : undefined;
    if (fetchers) cleanups.push(() => fetchers.close());
    const jobs = config.workers
      ? await JobRunner.start({ pool, deps: { db, clock, logger, webhooks, pdf, ...fetchers?.deps }, stopTimeoutMs: config.shutdownGraceMs, maxRunningPerKey: config.jobsMaxRunningPerKey, outageLog, ...jobOptions })
      : undefined;
    if (jobs) cleanups.push(() => jobs.stop());

    const shutdown = new AbortController();
    // Every in-flight call listens on this one signal; the default cap of 10
    // listeners would warn under ordinary concurrency.
    setMaxListeners(0, shutdown.signal);
    const listener: Listener = await listen({
      host: config.host,
      port: config.port,
      http2MaxStreams: config.http2MaxStreams,
      handler: createHttpHandler({
        pipeline,
        pool,
        metrics,
        logger,
        corsOrigins: config.corsOrigins,
        maxBodyBytes: config.maxBodyBytes,
        bodyTimeoutMs: config.bodyTimeoutMs,
        trustProxy: config.trustProxy,
        shutdownSignal: shutdown.signal,
        clock,
        health: { database: describeDatabase(config, url), components: () => componentReports(components) },
      }),
    });
    await logComponents(components, logger);

    let closed: Promise<void> | undefined;
    return {
      url: listener.url,
      port: listener.address.port,
      pool,
      jobs,
      webhooks,
      pdf,
      bus,
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
export async function startWorker({ config, logger, clock = systemClock, jobs: jobOptions, onFatal, database }: AppOptions): Promise<Worker> {
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = cleanupRunner(cleanups, logger);
  try {
    const pdf = openRenderer(config, logger, cleanups);
    const { pool, db, url, outageLog } = await openStore(config, logger, cleanups, onFatal, database);
    const webhooks = await startWebhookDispatcher({ config, db, clock, logger, outageLog });
    cleanups.push(() => webhooks.stop(config.shutdownGraceMs));
    const fetchers = openFetchers(config);
    cleanups.push(() => fetchers.close());
    const jobs = await JobRunner.start({ pool, deps: { db, clock, logger, webhooks, pdf, ...fetchers.deps }, stopTimeoutMs: config.shutdownGraceMs, maxRunningPerKey: config.jobsMaxRunningPerKey, outageLog, ...jobOptions });
    cleanups.push(() => jobs.stop());
    await logComponents({ config: { ...config, workers: true }, databaseUrl: url, bus: undefined, pdf }, logger);
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
