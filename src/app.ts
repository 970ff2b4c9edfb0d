/**
 * Wires the service together: database (embedded or external), migrations,
 * domain, services, the call pipeline and the one-port listener. Used by the
 * CLI and by the integration tests, so both run exactly the same thing.
 */
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import type pg from "pg";
import { PgNotifyBus } from "./bus/pg-notify-bus.js";
import { LocalFanout } from "./bus/wake-bus.js";
import type { WakeBus } from "./ports/wake-bus.js";
import { componentReports, describeDatabase, isRedisBus, logComponents, type ComponentSources } from "./components.js";
import type { Config } from "./platform/config.js";
import { openDatabase, type Database } from "./database.js";
import { ActorWebhooks } from "./domain/actor-webhooks.js";
import { Actors } from "./domain/actors.js";
import { ChannelAdmin } from "./domain/channel-admin.js";
import { Channels } from "./domain/channels.js";
import { ChannelViewCache } from "./domain/channel-view-cache.js";
import { ChannelHistory } from "./domain/history.js";
import { AsyncJobs } from "./domain/jobs.js";
import { SecurityAudit } from "./domain/audit.js";
import { keyChangeTopic, Keys } from "./domain/keys.js";
import { Limits } from "./domain/limits.js";
import { Waitpoints } from "./domain/waitpoints.js";
import { Schedules } from "./domain/schedules.js";
import { ScheduleTicker } from "./domain/schedule-ticks.js";
import { Sessions } from "./domain/sessions.js";
import { TaskVerbs } from "./domain/task-verbs.js";
import { ensureSandbox, SANDBOX_ALIAS } from "./domain/sandbox.js";
import { UsageMetrics } from "./domain/usage-metrics.js";
import { Quotas } from "./domain/quotas.js";
import { PgQuotaStore } from "./store/quotas.js";
import { Membership } from "./domain/membership.js";
import { Messages } from "./domain/messages.js";
import { WebhookDeliveryLog } from "./domain/webhook-deliveries.js";
import { FixedWindowLimiter } from "./domain/rate-limit.js";
import { systemClock, type Clock } from "./model/time.js";
import { openFetchers } from "./jobs/fetchers.js";
import { JobRunner, type JobRunnerOptions } from "./jobs/runner.js";
import { LogLimiter } from "./platform/log-limiter.js";
import type { Logger } from "./platform/logger.js";
import { chromiumInstalled } from "./pdf/chromium.js";
import { PdfRenderer } from "./pdf/renderer.js";
import { createHttpHandler } from "./server/http-handler.js";
import { PublicMinting } from "./domain/minting.js";
import { PgSettingsStore } from "./store/settings.js";
import { PgWorkerPresence } from "./store/worker-presence.js";
import type { RequestLimiter } from "./ports/rate-limit.js";
import { SERVICE_VERSION } from "./platform/version.js";
import { databaseState } from "./server/health.js";
import { McpHttpEndpoint } from "./server/mcp/http.js";
import { A2aHttpEndpoint, AGENT_CARD_READS_PER_MINUTE } from "./server/a2a/http.js";
import { A2A_USER_AGENT, A2aForwarder } from "./forwarder/forwarder.js";
import { PgForwardingStore } from "./store/forwarding.js";
import { A2aPush } from "./domain/a2a-push.js";
import { PgA2aPushStore } from "./store/a2a-push.js";
import { BodyBudget } from "./server/http/body-budget.js";
import { listen, type Listener } from "./server/listener.js";
import { Metrics } from "./server/metrics.js";
import type { QueueMeter } from "./ports/queue-meter.js";
import { CallPipeline, INTERNAL_CALL_HEADER } from "./server/rpc/pipeline.js";
import { createContextValues } from "@connectrpc/connect";
import { randomBytes, randomUUID } from "node:crypto";
import { createServices, type Domain } from "./services/index.js";
import { PgActorStore } from "./store/actors.js";
import { PgChannelStore } from "./store/channels.js";
import { Db } from "./store/db.js";
import { PgHistoryStore } from "./store/history.js";
import { PgIdempotencyStore } from "./store/idempotency.js";
import { PgAuditLog } from "./store/audit.js";
import { PgKeyStore } from "./store/keys.js";
import { PgLimitStore } from "./store/limits.js";
import { PgWaitpointStore } from "./store/waitpoints.js";
import { PgScheduleStore } from "./store/schedules.js";
import { PgSessionStore } from "./store/sessions.js";
import { PgUsageMetricsStore } from "./store/usage-metrics.js";
import { PgSandboxStore } from "./store/sandbox.js";
import { PgMembershipStore } from "./store/membership.js";
import { PgMessageStore } from "./store/messages.js";
import { migrate } from "./store/migrate.js";
import { closePool, createPool } from "./store/pool.js";
import { startWebhookDispatcher, type WebhookDispatcher } from "./webhooks/index.js";
import { NOTIFY_CHANNEL } from "./webhooks/dispatcher.js";
import { USER_AGENT } from "./webhooks/payload.js";
import { createOutboundClient } from "./outbound/guarded-fetch.js";
import { agendaBackend } from "./store/agenda.js";
import { PgJobStore } from "./store/jobs.js";
import { NotificationListener } from "./store/notification-listener.js";
import { PgPurgeStore } from "./store/purge.js";
import { PgStatistics } from "./store/statistics.js";
import { PgWebhookStore } from "./store/webhooks.js";
import { startSchemaThread } from "./domain/json-schema-thread.js";

export { openDatabase, type Database };

const IDLE_CONNECTION_FAILED = "idle database connection failed";
/**
 * How long a key lookup is trusted without asking the database: a key
 * revoked elsewhere is refused here within this, and open calls re-check
 * their key at least this often (docs/decisions.md#revocation).
 */
const KEY_CACHE_MS = 5_000;
/** This process in the job runner's records (agenda_jobs.last_modified_by). */
const PROCESS_NAME = `${hostname()}:${process.pid}`;

export interface AppOptions {
  config: Config;
  logger: Logger;
  clock?: Clock;
  /** Overrides for the in-process job runner (tests shorten its intervals). */
  jobs?: Pick<JobRunnerOptions, "processEveryMs" | "intervals" | "retryDelayScale">;
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

export interface DomainDependencies {
  db: Db;
  bus: WakeBus;
  clock: Clock;
  config: Config;
  keys: Keys;
  /** The security audit the keys record into; the other use cases record into it too. */
  audit: SecurityAudit;
  /** Where deliveries and dead letters are counted (the /metrics registry); none when omitted. */
  meter?: QueueMeter;
}

/**
 * The keys and the security audit they record into, over PostgreSQL: made
 * before the rest of the domain, as the call pipeline needs the keys.
 */
export function createKeys(db: Db, clock: Clock, cacheTtlMs: number, bus?: WakeBus): { keys: Keys; audit: SecurityAudit } {
  const audit = new SecurityAudit(new PgAuditLog(db), clock);
  // A revoked or narrowed key is announced to every replica's open calls and MCP sessions (docs/decisions.md#revocation).
  const onChange = bus === undefined ? undefined : (keyId: string) => bus.publish(keyChangeTopic(keyId));
  return { audit, keys: new Keys(new PgKeyStore(db), audit, { clock, cacheTtlMs, afterCommit: (fn) => db.afterCommit(fn), onChange }) };
}

/** The use cases over the PostgreSQL stores and the wake-up bus: the one place they are wired together. */
export function createDomain({ db, bus, clock, config, keys, audit, meter }: DomainDependencies): Domain {
  // Posts, pages and receives remember channel lookups for a moment; any change through this process forgets them.
  const views = new ChannelViewCache(clock);
  const forget = () => views.clear();
  const channelStore = new PgChannelStore(db, forget);
  const actors = new Actors(new PgActorStore(db), (fn) => db.afterCommit(fn));
  const quotas = new Quotas(new PgQuotaStore(db), config.quotas, clock);
  const messages = new Messages(new PgMessageStore(db), channelStore, actors, clock, {
    maxContentBytes: config.maxContentBytes,
    bus,
    afterCommit: (fn) => db.afterCommit(fn),
    longPollMaxWaitSeconds: config.longPollMaxWaitSeconds,
    longPollMaxWaiters: config.longPollMaxWaiters,
    longPollMaxWaitersPerKey: config.longPollMaxWaitersPerKey,
    meter,
    views,
    quotas,
  });
  const webhookStore = new PgWebhookStore(db);
  const channels = new Channels(channelStore, { defaultDiscoverable: config.defaultDiscoverable, allowPrivateTargets: config.allowPrivateTargets }, quotas);
  const membership = new Membership(new PgMembershipStore(db, forget), channelStore, audit, clock);
  return {
    keys,
    channels,
    membership,
    history: new ChannelHistory(new PgHistoryStore(db), channelStore),
    webhookDeliveries: new WebhookDeliveryLog(webhookStore, (identifier, caller) => channelStore.findView(identifier, caller.keyId)),
    messages,
    actors,
    actorWebhooks: new ActorWebhooks(webhookStore, clock, { allowPrivateTargets: config.allowPrivateTargets }),
    channelAdmin: new ChannelAdmin(channelStore, audit),
    jobs: new AsyncJobs(new PgJobStore(db, PROCESS_NAME), clock, config.jobsMaxQueuedPerKey),
    minting: new PublicMinting(new PgSettingsStore(db), audit, config.publicMinting),
    sessions: new Sessions(new PgSessionStore(db), audit, { clock }),
    limits: new Limits(new PgLimitStore(db, forget), { clock }),
    schedules: new Schedules(new PgScheduleStore(db), channelStore, { clock, maxContentBytes: config.maxContentBytes }),
    waitpoints: new Waitpoints(new PgWaitpointStore(db), { clock, announce: (channelId) => db.afterCommit(() => bus.publish(channelId)) }),
    a2aPush: new A2aPush(new PgA2aPushStore(db), messages, { allowPrivateTargets: config.allowPrivateTargets }, randomUUID),
    audit,
    quotas,
    taskVerbs: new TaskVerbs(channels, messages, membership),
    usageMetrics: new UsageMetrics(messages, new PgUsageMetricsStore(db), clock),
  };
}

/**
 * The per-key request limit: counted in Redis when it is configured (every
 * replica shares it), else in this process; `shared` says whether Redis is
 * answering (for /health).
 */
async function requestLimiter(
  config: Config,
  clock: Clock,
  cleanups: Array<() => Promise<void>>,
): Promise<{ limiter: RequestLimiter; shared?: { readonly healthy: boolean } }> {
  const local = new FixedWindowLimiter(config.rateLimitPerMinute, 60_000, clock);
  if (config.redisUrl === undefined || config.rateLimitPerMinute <= 0) return { limiter: local };
  // Loaded only with REDIS_URL, like the Redis wake bus.
  const { RedisRateLimiter } = await import("./bus/redis-rate-limiter.js");
  const shared = new RedisRateLimiter({ url: config.redisUrl, limit: config.rateLimitPerMinute, windowMs: 60_000, fallback: local });
  cleanups.push(async () => shared.close());
  return { limiter: shared, shared };
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
 * Redis pub/sub when REDIS_URL is set, else LISTEN/NOTIFY on the database
 * (docs/decisions.md#wake-bus). With Redis, LISTEN/NOTIFY is also the fallback
 * while Redis is unreachable (see redis-bus.ts): one more connection per
 * process, idle while Redis works.
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
    const { audit, keys } = createKeys(db, clock, KEY_CACHE_MS, bus);
    const { limiter, shared: sharedLimits } = await requestLimiter(config, clock, cleanups);
    const components: ComponentSources = { config, databaseUrl: url, bus, pdf, sharedLimits };
    // Without a renderer here, the configured Chromium's presence is the check.
    const pdfAvailable = pdf ? async () => pdf.status.state !== "down" && (await chromiumInstalled(config.chromiumPath)) : undefined;
    const metrics = new Metrics();
    // Marks this process's own calls for MCP tools (CallPipeline.authenticate); never leaves the process.
    const internalCallToken = randomBytes(24).toString("base64url");
    const domain = createDomain({ db, bus, clock, config, keys, audit, meter: metrics });
    if (config.scheduler) {
      const ticker = startScheduleTicker(db, domain, clock, outageLog);
      cleanups.push(() => ticker.stop());
    }
    if (config.workers && config.a2aForwarder) startForwarder(db, domain, config, clock, logger, cleanups);
    if (config.sandbox && (await ensureSandbox(new PgSandboxStore(db))) === "alias_taken") {
      logger.warn({ alias: SANDBOX_ALIAS }, "another channel holds the alias 'sandbox': no sandbox channel this time (set AGENTBUS_SANDBOX=false to stop trying)");
    }
    const pipeline = new CallPipeline(
      createServices({
        domain,
        clock,
        config,
        mintLimiter: new FixedWindowLimiter(config.keyMintLimitPerHour, 3_600_000, clock),
        pdfAvailable,
      }),
      {
        idempotencyStore: new PgIdempotencyStore(db),
        keys,
        adminToken: config.adminToken,
        rateLimiter: limiter,
        reportInternal: (err) => logger.error({ err }, "internal error"),
        // Waiting calls re-check their key on its announcement, and at least this often.
        callerWatch: { feed: bus, topic: keyChangeTopic, clock, recheckMs: KEY_CACHE_MS },
        internalCallToken,
      },
    );

    metrics.gauge("agentbus_db_pool_total_connections", "Open database connections.", () => pool.totalCount);
    metrics.gauge("agentbus_db_pool_idle_connections", "Idle database connections.", () => pool.idleCount);
    metrics.gauge("agentbus_db_pool_waiting_requests", "Queries waiting for a connection.", () => pool.waitingCount);
    if (isRedisBus(bus)) {
      metrics.gauge("agentbus_wake_redis_connected", "1 while wake-ups go out and arrive over Redis, 0 while some fall back.", () => (bus.connected ? 1 : 0));
    }

    // In-process workers unless AGENTBUS_WORKERS=false. Registered after the
    // pool, so stopped before it (cleanups run in reverse).
    const { webhooks, jobs } = config.workers
      ? await startBackgroundWork({ pool, db, outageLog }, pdf, { config, logger, clock, jobOptions }, cleanups)
      : { webhooks: undefined, jobs: undefined };

    const shutdown = new AbortController();
    // Every in-flight call listens on this one signal; the default cap of 10
    // listeners would warn under ordinary concurrency.
    setMaxListeners(0, shutdown.signal);
    // One budget for the bodies of REST, Connect and /mcp requests alike.
    const budget = new BodyBudget({ perKeyBytes: config.maxBufferedBytesPerKey, totalBytes: config.maxBufferedBytes });
    // The MCP tools call this process's own REST API, at the address known once it listens.
    let selfUrl = "";
    const mcp = new McpHttpEndpoint({
      selfUrl: () => selfUrl,
      corsOrigins: config.corsOrigins,
      trustProxy: config.trustProxy,
      maxBodyBytes: config.maxBodyBytes,
      admit: (key, headers) => pipeline.authenticate(key, { requestHeader: headers, responseHeader: new Headers(), values: createContextValues() }),
      internalCallHeaders: { [INTERNAL_CALL_HEADER]: internalCallToken },
      keys,
      keyChanges: bus,
      keyTopic: keyChangeTopic,
      keyRecheckMs: KEY_CACHE_MS,
      budget,
      clock,
      maxSessions: config.mcpMaxSessions,
      maxSessionsPerKey: config.mcpMaxSessionsPerKey,
      idleMs: config.mcpSessionIdleSeconds * 1000,
    });
    cleanups.push(() => mcp.close());
    const a2a = new A2aHttpEndpoint({
      selfUrl: () => selfUrl,
      trustProxy: config.trustProxy,
      maxBodyBytes: config.maxBodyBytes,
      admit: (key, headers) => pipeline.authenticate(key, { requestHeader: headers, responseHeader: new Headers(), values: createContextValues() }),
      internalCallHeaders: { [INTERNAL_CALL_HEADER]: internalCallToken },
      budget,
      published: (id) => domain.channels.publishedAgent(id),
      cardLimiter: new FixedWindowLimiter(AGENT_CARD_READS_PER_MINUTE, 60_000, clock),
      push: domain.a2aPush,
    });
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
        keylessMaxBodyBytes: config.keylessMaxBodyBytes,
        budget,
        bodyTimeoutMs: config.bodyTimeoutMs,
        trustProxy: config.trustProxy,
        sandbox: config.sandbox,
        shutdownSignal: shutdown.signal,
        clock,
        health: {
          database: describeDatabase(config, url),
          components: () => componentReports(components),
          publicMinting: () => domain.minting.enabled(),
        },
        mcp,
        a2a,
        status: {
          version: SERVICE_VERSION,
          startedAt: clock.now(),
          now: () => clock.now(),
          database: () => databaseState(pool),
          databaseKind: config.databaseUrl === undefined ? "embedded" : "external",
          wakeBusKind: isRedisBus(bus) ? "redis" : "postgres-notify",
          components: () => componentReports(components),
          workers: new PgWorkerPresence(db),
          languageModelConfigured: config.openaiApiKey !== undefined,
          publicMinting: () => domain.minting.enabled(),
          operatorDetails: async () => ({ database: describeDatabase(config, url), ...(await componentReports(components)) }),
        },
        adminToken: config.adminToken,
      }),
    });
    selfUrl = listener.url;
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
          // MCP sessions end at once: their event streams would hold the listener for the whole grace period.
          await Promise.all([listener.close(grace), jobs?.stop(), webhooks?.stop(grace), mcp.close()]);
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

/**
 * The background workers of `agentbus serve` and `agentbus worker` alike: the
 * webhook dispatcher, the fetchers, and the job runner (whose webhook sweep
 * goes through that dispatcher). `cleanups` stops them in reverse order.
 */
async function startBackgroundWork(
  { pool, db, outageLog }: { pool: pg.Pool; db: Db; outageLog: LogLimiter },
  pdf: PdfRenderer | undefined,
  { config, logger, clock, jobOptions }: { config: Config; logger: Logger; clock: Clock; jobOptions: AppOptions["jobs"] },
  cleanups: Array<() => Promise<void>>,
): Promise<{ webhooks: WebhookDispatcher; jobs: JobRunner }> {
  const webhooks = await openWebhookDispatcher(config, db, clock, logger, outageLog);
  cleanups.push(() => webhooks.stop(config.shutdownGraceMs));
  const fetchers = openFetchers(config);
  cleanups.push(() => fetchers.close());
  const jobs = await JobRunner.start({
    backend: agendaBackend(pool),
    deps: { jobs: new PgJobStore(db, PROCESS_NAME), purge: new PgPurgeStore(db, { auditRetentionDays: config.auditRetentionDays }), statistics: new PgStatistics(db), clock, logger, webhooks, pdf, ...fetchers.deps },
    stopTimeoutMs: config.shutdownGraceMs,
    maxRunningPerKey: config.jobsMaxRunningPerKey,
    outageLog,
    ...jobOptions,
  });
  cleanups.push(() => jobs.stop());
  return { webhooks, jobs };
}

/** This process's A2A forwarder (docs/decisions.md#a2a-forward): in API processes with workers and in `agentbus worker`. */
function startForwarder(db: Db, domain: Domain, config: Config, clock: Clock, logger: Logger, cleanups: Array<() => Promise<void>>): void {
  const forwarder = new A2aForwarder({
    store: new PgForwardingStore(db),
    messages: domain.messages,
    http: createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, userAgent: A2A_USER_AGENT }),
    clock,
    logger: logger.child({ component: "a2a-forwarder" }),
  });
  forwarder.start();
  cleanups.push(() => forwarder.close());
}

/**
 * This process's share of running schedules' ticks (docs/decisions.md#schedules):
 * each posts as the schedule's creating key through the same use case as any post.
 */
function startScheduleTicker(db: Db, domain: Domain, clock: Clock, outageLog: LogLimiter): ScheduleTicker {
  const log = outageLog.child({ component: "schedules" });
  const ticker = new ScheduleTicker(new PgScheduleStore(db), {
    clock,
    post: async (caller, channelId, m) => {
      const posted = await domain.messages.create(caller, channelId, {
        content: m.content,
        metadata: m.metadata,
        groupKey: m.groupKey ?? undefined,
        priority: m.priority ?? undefined,
        actor: undefined,
        actorLabel: undefined,
        mentions: [],
      });
      return posted.message.id;
    },
    onError: (err) => log.warn("schedule ticks failed; retried within a second", err),
  });
  ticker.start();
  return ticker;
}

/** The webhook dispatcher over the outbox, woken by NOTIFY on its own connection, sending with the guarded outbound client. */
function openWebhookDispatcher(config: Config, db: Db, clock: Clock, logger: Logger, outageLog: LogLimiter): Promise<WebhookDispatcher> {
  return startWebhookDispatcher({
    config,
    store: new PgWebhookStore(db),
    http: createOutboundClient({ allowPrivateTargets: config.allowPrivateTargets, userAgent: USER_AGENT }),
    listen: (events) =>
      new NotificationListener({
        connectionString: db.pool.options.connectionString,
        channel: NOTIFY_CHANNEL,
        applicationName: "agentbus-webhooks",
        onNotification: () => events.onNotification(),
        onError: (err) => events.onError(err),
        onReconnected: () => events.onReconnected(),
      }),
    clock,
    logger,
    outageLog,
  });
}

/** Starts the job workers without the API (the scale-out shape of docs/operations.md#scaling-out). */
export async function startWorker({ config, logger, clock = systemClock, jobs: jobOptions, onFatal, database }: AppOptions): Promise<Worker> {
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = cleanupRunner(cleanups, logger);
  try {
    const pdf = openRenderer(config, logger, cleanups);
    const { pool, db, url, outageLog } = await openStore(config, logger, cleanups, onFatal, database);
    const { jobs } = await startBackgroundWork({ pool, db, outageLog }, pdf, { config, logger, clock, jobOptions }, cleanups);
    let bus: WakeBus | undefined;
    if (config.a2aForwarder) {
      // The forwarder receives and acknowledges through the use cases, whose acknowledgements wake the API processes' waiters.
      bus = await openWakeBus(config, pool, url, outageLog);
      const opened = bus;
      cleanups.push(() => opened.close());
      const { audit, keys } = createKeys(db, clock, KEY_CACHE_MS, opened);
      startForwarder(db, createDomain({ db, bus: opened, clock, config, keys, audit }), config, clock, logger, cleanups);
    }
    await logComponents({ config: { ...config, workers: true }, databaseUrl: url, bus, pdf }, logger);
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
