/**
 * Every setting of the service, read once from the environment and validated
 * at start. A bad value stops the process with a message naming the variable.
 * Nothing else in the code base reads process.env.
 */
import { z } from "zod";

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);
const nonNegativeInt = z.coerce.number().int().min(0);
const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const httpUrl = z
  .string()
  .url()
  .refine((v) => /^https?:\/\//i.test(v), "expected an http:// or https:// URL")
  // Stored without a trailing slash, so paths can be appended.
  .transform((v) => v.replace(/\/+$/, ""));
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? undefined : v));

/** Each variable with its default and the reason for the default. */
const schema = z.object({
  // Loopback by default: exposing the service is a deliberate act.
  HOST: z.string().min(1).default("127.0.0.1"),
  PORT: port.default(8080),
  // Unset: an embedded PostgreSQL is started under AGENTBUS_DATA_DIR.
  DATABASE_URL: optionalString.pipe(z.string().url().optional()),
  AGENTBUS_DATA_DIR: z.string().min(1).default("./.agentbus"),
  // 0 picks a free port at each start; the embedded server is only ours.
  AGENTBUS_EMBEDDED_PG_PORT: port.default(0),
  // Enough for the hot paths on a small machine without starving PostgreSQL.
  AGENTBUS_DB_POOL_SIZE: positiveInt.max(1000).default(20),
  // HTTP processes `agentbus serve` runs on the one port (docs/operations.md#several-processes);
  // they share AGENTBUS_DB_POOL_SIZE.
  AGENTBUS_HTTP_PROCESSES: positiveInt.max(64).default(1),
  AGENTBUS_LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  // auto: readable lines in a terminal, JSON lines otherwise (pipes, files, log collectors).
  AGENTBUS_LOG_FORMAT: z.enum(["auto", "json", "pretty"]).default("auto"),
  AGENTBUS_CORS_ORIGINS: z.string().min(1).default("*"),
  // Per source address per hour; stops one client from minting unbounded keys.
  AGENTBUS_KEY_MINT_LIMIT: nonNegativeInt.default(20),
  // Requests per key per minute; 0 turns the limit off.
  AGENTBUS_RATE_LIMIT: nonNegativeInt.default(600),
  // Unset disables the admin routes (403 admin_disabled).
  AGENTBUS_ADMIN_TOKEN: optionalString,
  // JSON bodies above this are refused with 413 before parsing.
  AGENTBUS_MAX_BODY_BYTES: positiveInt.default(1024 * 1024),
  // What a request without a valid key may send (minting a key needs a few hundred bytes):
  // anyone can make such requests, so they must be cheap (docs/operations.md#body-limits).
  AGENTBUS_KEYLESS_MAX_BODY_BYTES: positiveInt.default(16 * 1024),
  // Request-body bytes one key's requests may hold at once (three 10 MiB PDFs), and all
  // requests together: uploads in parallel cannot pin more of the process's memory.
  AGENTBUS_MAX_BUFFERED_BYTES_PER_KEY: positiveInt.default(32 * 1024 * 1024),
  AGENTBUS_MAX_BUFFERED_BYTES: positiveInt.default(256 * 1024 * 1024),
  // Storage quotas per key (docs/decisions.md#quotas), sized for a public deployment where
  // anyone may mint keys: what a key's messages may take (live and in history, which is kept
  // for days), how many may be live, how many channels it may own; 0 turns one off.
  AGENTBUS_QUOTA_STORED_BYTES: nonNegativeInt.default(256 * 1024 * 1024),
  AGENTBUS_QUOTA_LIVE_MESSAGES: nonNegativeInt.default(250_000),
  AGENTBUS_QUOTA_CHANNELS: nonNegativeInt.default(1_000),
  // A request body must arrive whole within this many seconds (408 request_timeout), so a
  // client trickling bytes cannot hold a connection or an HTTP/2 stream; generous for slow links.
  AGENTBUS_BODY_TIMEOUT_SECONDS: z.coerce.number().positive().max(3600).default(30),
  // Concurrent streams one HTTP/2 connection may open (SETTINGS_MAX_CONCURRENT_STREAMS;
  // Node's default is unlimited). Clients queue beyond it; a client that ignores it gets REFUSED_STREAM.
  AGENTBUS_HTTP2_MAX_STREAMS: positiveInt.max(10_000).default(100),
  // Repeated failures of one kind during an outage (database, Redis) log once, then one
  // summary per this many seconds, so an outage cannot flood the log.
  AGENTBUS_LOG_REPEAT_INTERVAL_SECONDS: z.coerce.number().positive().max(3600).default(30),
  // How long SIGTERM waits for in-flight requests before closing connections.
  AGENTBUS_SHUTDOWN_GRACE_MS: nonNegativeInt.default(5000),
  // Honour X-Forwarded-For for per-address limits (only behind a trusted proxy).
  AGENTBUS_TRUST_PROXY: bool.default(false),
  // Open channels are listed by discovery unless their creator says otherwise.
  AGENTBUS_DEFAULT_DISCOVERABLE: bool.default(true),
  // Large enough for structured task descriptions; big payloads belong in a link.
  AGENTBUS_MAX_CONTENT_BYTES: positiveInt.max(16 * 1024 * 1024).default(65536),
  // Unset: wake-ups travel over PostgreSQL LISTEN/NOTIFY (docs/decisions.md#wake-bus).
  REDIS_URL: optionalString.pipe(z.string().url().optional()),
  // Below common proxy and client idle timeouts (30–60 s), so a wait never looks like a dead connection.
  AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: z.coerce.number().min(0).max(300).default(25),
  // Each waiter costs a promise and a timer, not a connection; the cap bounds memory.
  AGENTBUS_LONGPOLL_MAX_WAITERS: nonNegativeInt.default(10_000),
  // One key's share of them (long-polls and watch streams together), so a
  // single key cannot take every waiter: an agent follows a few channels,
  // and 100 leaves a process cap of 10,000 needing a hundred busy keys.
  AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY: nonNegativeInt.default(100),
  // Whether anyone may mint a key (POST /v1/keys) until the operator sets the
  // switch (POST /v1/admin/minting), which then holds in the database.
  AGENTBUS_PUBLIC_MINTING: bool.default(true),
  // How long security audit events are kept before the purge deletes them.
  AGENTBUS_AUDIT_RETENTION_DAYS: positiveInt.max(3650).default(90),
  // MCP sessions at /mcp (each holds a server and its followers' long-polls):
  // bounded per process and per key, and closed after an idle while.
  AGENTBUS_MCP_MAX_SESSIONS: nonNegativeInt.default(1000),
  AGENTBUS_MCP_MAX_SESSIONS_PER_KEY: nonNegativeInt.default(32),
  AGENTBUS_MCP_SESSION_IDLE_SECONDS: z.coerce.number().int().min(1).default(1800),
  // One process runs everything by default; API replicas set false when
  // separate `agentbus worker` processes run the jobs.
  AGENTBUS_WORKERS: bool.default(true),
  // Every API process runs schedules' ticks (each runs once whichever takes it); false leaves them to the others.
  AGENTBUS_SCHEDULER: bool.default(true),
  // Every worker process (and API process that runs workers) forwards channels' work to remote A2A agents (leases keep each message with one).
  AGENTBUS_A2A_FORWARDER: bool.default(true),
  // Outbound requests (webhooks, fetched URLs) may not reach loopback,
  // private, link-local or metadata addresses unless this is set (docs/decisions.md#outbound-addresses).
  AGENTBUS_ALLOW_PRIVATE_TARGETS: bool.default(false),
  // Per webhook attempt, connection and answer included.
  AGENTBUS_WEBHOOK_TIMEOUT_MS: positiveInt.max(120_000).default(10_000),
  // Delays between webhook attempts: about a day of retries (docs/decisions.md#webhook-delivery).
  AGENTBUS_WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .default("5s,30s,2m,10m,30m,1h,3h,6h,12h")
    .transform((value, ctx) => {
      const delays = parseDurations(value);
      if (delays === undefined) {
        ctx.addIssue({ code: "custom", message: "expected comma-separated durations such as 5s,30s,2m,1h (units ms, s, m, h)" });
        return z.NEVER;
      }
      return delays;
    }),
  // Webhook requests in flight at once per worker process.
  AGENTBUS_WEBHOOK_CONCURRENCY: positiveInt.max(1000).default(16),
  // Of those, at most this many to one destination (URL origin), so a slow
  // or dead receiver holds a few slots, never all of them (docs/decisions.md#webhook-isolation).
  AGENTBUS_WEBHOOK_DESTINATION_CONCURRENCY: positiveInt.max(1000).default(2),
  // Of those, at most this many for one owning key (the key owning the
  // channel, or the actor of a mention push) across all its destinations, so
  // one key's many slow receivers hold a share, never all
  // (docs/decisions.md#webhook-isolation). Default: defaultWebhookOwnerConcurrency.
  AGENTBUS_WEBHOOK_OWNER_CONCURRENCY: positiveInt.max(1000).optional(),
  // Consecutive attempts without an answer (timeout, refused or reset) after
  // which a destination is not attempted for a while; 0 turns the breaker off.
  AGENTBUS_WEBHOOK_BREAKER_THRESHOLD: nonNegativeInt.max(1000).default(3),
  // The first pause of a tripped destination; it doubles with each trip.
  AGENTBUS_WEBHOOK_BREAKER_OPEN_MS: positiveInt.max(86_400_000).default(30_000),
  // The longest pause: a receiver that comes back is tried within this.
  AGENTBUS_WEBHOOK_BREAKER_MAX_OPEN_MS: positiveInt.max(86_400_000).default(1_800_000),
  // Also sign deliveries under this header name (e.g. X-Backchannel-Signature), the same
  // HMAC as X-Agentbus-Signature, so receivers written for the reference verify unchanged.
  AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9-]{0,63}$/, "a header name: letters, digits and '-', starting with a letter")
    .optional(),
  // A public open broadcast channel, alias "sandbox", with a short TTL, created at start-up
  // so a new agent can post and read at once (docs/decisions.md#sandbox).
  AGENTBUS_SANDBOX: bool.default(true),
  // Unset: job-posting parse submissions answer 503 llm_not_configured (docs/decisions.md#parse-jobs).
  OPENAI_API_KEY: optionalString,
  // Any OpenAI-compatible chat-completions API, path prefix included.
  OPENAI_BASE_URL: httpUrl.default("https://api.openai.com/v1"),
  // Small, cheap, and supports strict JSON-schema responses.
  AGENTBUS_LLM_MODEL: z.string().min(1).default("gpt-4o-mini"),
  // One model call; parsing a posting typically takes 3–8 s, slow providers more.
  AGENTBUS_LLM_TIMEOUT_MS: positiveInt.max(600_000).default(60_000),
  // Fetching a posting page: deadline, byte cap, and the main text sent to the model.
  AGENTBUS_PARSE_FETCH_TIMEOUT_MS: positiveInt.max(120_000).default(15_000),
  // Job-board pages with inline scripts reach a few MiB; beyond this the caller should send text.
  AGENTBUS_PARSE_MAX_PAGE_BYTES: positiveInt.max(64 * 1024 * 1024).default(5 * 1024 * 1024),
  // About 8k tokens: every posting fits, and a runaway page cannot run up the model bill.
  AGENTBUS_PARSE_MAX_TEXT_CHARS: positiveInt.max(1_000_000).default(30_000),
  // The video host; tests point it at a local fake.
  AGENTBUS_VIDEO_BASE_URL: httpUrl.default("https://www.youtube.com"),
  // Each request to the video host (watch page, player data, captions).
  AGENTBUS_VIDEO_TIMEOUT_MS: positiveInt.max(120_000).default(15_000),
  // Unset: the Chromium of the @sparticuz/chromium npm package, unpacked once
  // (no apt step, the same Chromium everywhere, faster than Debian's); set it
  // to use another, e.g. /usr/bin/chromium. PDF submissions answer 503 when
  // the one chosen cannot run (docs/decisions.md#pdf-jobs).
  AGENTBUS_CHROMIUM_PATH: optionalString,
  // Pages rendered at once per worker process. Rendering is CPU-bound (layout
  // and PDF painting in Chromium's renderer), so about one per core: on 2 cores,
  // 2 already keeps both busy (3 adds 10–20 % throughput, 4 nothing more), and
  // `agentbus serve` shares them with the API and PostgreSQL. One more render
  // is kept for a key with no PDF rendering (docs/decisions.md#job-fairness),
  // so up to this + 1 run at once.
  AGENTBUS_PDF_CONCURRENCY: positiveInt.max(64).default(2),
  // One render (load, layout, print); longer fails the job with pdf_render_timeout.
  AGENTBUS_PDF_TIMEOUT_MS: positiveInt.max(600_000).default(30_000),
  // Unfinished (queued or running) async jobs one key may have, all kinds
  // together; beyond it submissions answer 429 job_limit_exceeded (docs/decisions.md#job-fairness).
  AGENTBUS_JOBS_MAX_QUEUED_PER_KEY: positiveInt.max(100_000).default(20),
  // Jobs of one key and kind running at once across all workers; the rest
  // of its jobs wait while other keys' jobs take the free slots. Even at or
  // above a worker's slot count, one key never holds the slot each worker
  // keeps for a key with none running (docs/decisions.md#job-fairness).
  AGENTBUS_JOBS_MAX_RUNNING_PER_KEY: positiveInt.max(1000).default(2),
});

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/;
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** "5s,30s,2m" → [5000, 30000, 120000]; "" → [] (no retries); undefined when malformed. */
function parseDurations(value: string): number[] | undefined {
  if (value.trim() === "") return [];
  const delays: number[] = [];
  for (const item of value.split(",")) {
    const match = DURATION.exec(item.trim());
    if (!match) return undefined;
    delays.push(Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]));
  }
  return delays;
}

/**
 * AGENTBUS_WEBHOOK_OWNER_CONCURRENCY when unset: a quarter of the slots, at
 * least one. One key's slow receivers then hold at most a quarter of a
 * dispatcher, filling it takes four keys' at once, and a key with healthy
 * receivers still has room for two destinations at their default cap
 * (docs/decisions.md#webhook-isolation).
 */
export function defaultWebhookOwnerConcurrency(concurrency: number): number {
  return Math.max(1, Math.floor(concurrency / 4));
}

export type Env = Record<string, string | undefined>;

export interface Config {
  host: string;
  port: number;
  databaseUrl: string | undefined;
  dataDir: string;
  embeddedPgPort: number;
  dbPoolSize: number;
  /** HTTP processes of `agentbus serve` on the one port (1: this process serves). */
  httpProcesses: number;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  logFormat: "auto" | "json" | "pretty";
  corsOrigins: string[];
  keyMintLimitPerHour: number;
  rateLimitPerMinute: number;
  adminToken: string | undefined;
  maxBodyBytes: number;
  keylessMaxBodyBytes: number;
  maxBufferedBytesPerKey: number;
  maxBufferedBytes: number;
  /** Default storage quotas per key; null: unlimited. */
  quotas: { stored_bytes: number | null; live_messages: number | null; channels: number | null };
  bodyTimeoutMs: number;
  http2MaxStreams: number;
  shutdownGraceMs: number;
  /** Repeated outage failures of one kind are summed up at most once per this interval. */
  logRepeatIntervalMs: number;
  trustProxy: boolean;
  defaultDiscoverable: boolean;
  maxContentBytes: number;
  /** `agentbus serve` also runs the job workers (purge, webhooks, and later the async jobs). */
  workers: boolean;
  /** Whether this process runs schedules' ticks (AGENTBUS_SCHEDULER). */
  scheduler: boolean;
  /** Whether this process forwards channels' work to remote A2A agents: `agentbus worker`, or `serve` with its workers (AGENTBUS_A2A_FORWARDER). */
  a2aForwarder: boolean;
  redisUrl: string | undefined;
  longPollMaxWaitSeconds: number;
  longPollMaxWaiters: number;
  longPollMaxWaitersPerKey: number;
  publicMinting: boolean;
  auditRetentionDays: number;
  mcpMaxSessions: number;
  mcpMaxSessionsPerKey: number;
  mcpSessionIdleSeconds: number;
  /** Outbound requests may reach non-public addresses (docs/decisions.md#outbound-addresses). */
  allowPrivateTargets: boolean;
  webhookTimeoutMs: number;
  /** Delays between webhook attempts, in ms; attempts = length + 1. */
  webhookRetryScheduleMs: number[];
  webhookConcurrency: number;
  webhookDestinationConcurrency: number;
  webhookOwnerConcurrency: number;
  /** 0: no breaker. */
  webhookBreakerThreshold: number;
  webhookBreakerOpenMs: number;
  webhookBreakerMaxOpenMs: number;
  /** A second header name the webhook signature is also sent under; undefined: only the native one. */
  webhookLegacySignatureHeader: string | undefined;
  /** Create the sandbox channel at start-up. */
  sandbox: boolean;
  /** Unset: job-posting parse is refused with 503 llm_not_configured. */
  openaiApiKey: string | undefined;
  /** Without a trailing slash. */
  openaiBaseUrl: string;
  llmModel: string;
  llmTimeoutMs: number;
  parseFetchTimeoutMs: number;
  parseMaxPageBytes: number;
  /** Characters of a posting's text sent to the model; the rest is cut. */
  parseMaxTextChars: number;
  /** Without a trailing slash. */
  videoBaseUrl: string;
  videoTimeoutMs: number;
  /** Undefined: the npm-shipped Chromium (src/pdf/chromium.ts). */
  chromiumPath: string | undefined;
  pdfConcurrency: number;
  pdfTimeoutMs: number;
  jobsMaxQueuedPerKey: number;
  jobsMaxRunningPerKey: number;
}

export class ConfigError extends Error {
  constructor(readonly variable: string, detail: string) {
    super(`Invalid configuration: ${variable}: ${detail}`);
    this.name = "ConfigError";
  }
}

/** Reads and validates the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env): Config {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(schema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== "") raw[key] = value;
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue?.path[0] ?? "environment");
    throw new ConfigError(variable, `${issue?.message ?? "invalid value"} (got ${JSON.stringify(env[variable] ?? null)})`);
  }
  const c = parsed.data;
  return {
    host: c.HOST,
    port: c.PORT,
    databaseUrl: c.DATABASE_URL,
    dataDir: c.AGENTBUS_DATA_DIR,
    embeddedPgPort: c.AGENTBUS_EMBEDDED_PG_PORT,
    dbPoolSize: c.AGENTBUS_DB_POOL_SIZE,
    httpProcesses: c.AGENTBUS_HTTP_PROCESSES,
    logLevel: c.AGENTBUS_LOG_LEVEL,
    logFormat: c.AGENTBUS_LOG_FORMAT,
    corsOrigins: c.AGENTBUS_CORS_ORIGINS.split(",").map((o) => o.trim()).filter((o) => o !== ""),
    keyMintLimitPerHour: c.AGENTBUS_KEY_MINT_LIMIT,
    rateLimitPerMinute: c.AGENTBUS_RATE_LIMIT,
    adminToken: c.AGENTBUS_ADMIN_TOKEN,
    maxBodyBytes: c.AGENTBUS_MAX_BODY_BYTES,
    keylessMaxBodyBytes: c.AGENTBUS_KEYLESS_MAX_BODY_BYTES,
    maxBufferedBytesPerKey: c.AGENTBUS_MAX_BUFFERED_BYTES_PER_KEY,
    maxBufferedBytes: c.AGENTBUS_MAX_BUFFERED_BYTES,
    quotas: {
      stored_bytes: c.AGENTBUS_QUOTA_STORED_BYTES || null,
      live_messages: c.AGENTBUS_QUOTA_LIVE_MESSAGES || null,
      channels: c.AGENTBUS_QUOTA_CHANNELS || null,
    },
    bodyTimeoutMs: Math.round(c.AGENTBUS_BODY_TIMEOUT_SECONDS * 1000),
    http2MaxStreams: c.AGENTBUS_HTTP2_MAX_STREAMS,
    logRepeatIntervalMs: Math.round(c.AGENTBUS_LOG_REPEAT_INTERVAL_SECONDS * 1000),
    shutdownGraceMs: c.AGENTBUS_SHUTDOWN_GRACE_MS,
    trustProxy: c.AGENTBUS_TRUST_PROXY,
    defaultDiscoverable: c.AGENTBUS_DEFAULT_DISCOVERABLE,
    maxContentBytes: c.AGENTBUS_MAX_CONTENT_BYTES,
    workers: c.AGENTBUS_WORKERS,
    scheduler: c.AGENTBUS_SCHEDULER,
    a2aForwarder: c.AGENTBUS_A2A_FORWARDER,
    redisUrl: c.REDIS_URL,
    longPollMaxWaitSeconds: c.AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS,
    longPollMaxWaiters: c.AGENTBUS_LONGPOLL_MAX_WAITERS,
    longPollMaxWaitersPerKey: c.AGENTBUS_LONGPOLL_MAX_WAITERS_PER_KEY,
    publicMinting: c.AGENTBUS_PUBLIC_MINTING,
    auditRetentionDays: c.AGENTBUS_AUDIT_RETENTION_DAYS,
    mcpMaxSessions: c.AGENTBUS_MCP_MAX_SESSIONS,
    mcpMaxSessionsPerKey: c.AGENTBUS_MCP_MAX_SESSIONS_PER_KEY,
    mcpSessionIdleSeconds: c.AGENTBUS_MCP_SESSION_IDLE_SECONDS,
    allowPrivateTargets: c.AGENTBUS_ALLOW_PRIVATE_TARGETS,
    webhookTimeoutMs: c.AGENTBUS_WEBHOOK_TIMEOUT_MS,
    webhookRetryScheduleMs: c.AGENTBUS_WEBHOOK_RETRY_SCHEDULE,
    webhookConcurrency: c.AGENTBUS_WEBHOOK_CONCURRENCY,
    webhookDestinationConcurrency: c.AGENTBUS_WEBHOOK_DESTINATION_CONCURRENCY,
    webhookOwnerConcurrency: c.AGENTBUS_WEBHOOK_OWNER_CONCURRENCY ?? defaultWebhookOwnerConcurrency(c.AGENTBUS_WEBHOOK_CONCURRENCY),
    webhookBreakerThreshold: c.AGENTBUS_WEBHOOK_BREAKER_THRESHOLD,
    webhookBreakerOpenMs: c.AGENTBUS_WEBHOOK_BREAKER_OPEN_MS,
    webhookBreakerMaxOpenMs: c.AGENTBUS_WEBHOOK_BREAKER_MAX_OPEN_MS,
    webhookLegacySignatureHeader: c.AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER,
    sandbox: c.AGENTBUS_SANDBOX,
    openaiApiKey: c.OPENAI_API_KEY,
    openaiBaseUrl: c.OPENAI_BASE_URL,
    llmModel: c.AGENTBUS_LLM_MODEL,
    llmTimeoutMs: c.AGENTBUS_LLM_TIMEOUT_MS,
    parseFetchTimeoutMs: c.AGENTBUS_PARSE_FETCH_TIMEOUT_MS,
    parseMaxPageBytes: c.AGENTBUS_PARSE_MAX_PAGE_BYTES,
    parseMaxTextChars: c.AGENTBUS_PARSE_MAX_TEXT_CHARS,
    videoBaseUrl: c.AGENTBUS_VIDEO_BASE_URL,
    videoTimeoutMs: c.AGENTBUS_VIDEO_TIMEOUT_MS,
    chromiumPath: c.AGENTBUS_CHROMIUM_PATH,
    pdfConcurrency: c.AGENTBUS_PDF_CONCURRENCY,
    pdfTimeoutMs: c.AGENTBUS_PDF_TIMEOUT_MS,
    jobsMaxQueuedPerKey: c.AGENTBUS_JOBS_MAX_QUEUED_PER_KEY,
    jobsMaxRunningPerKey: c.AGENTBUS_JOBS_MAX_RUNNING_PER_KEY,
  };
}

/** Names, defaults and meanings for the README table and `agentbus --help`. */
export const configVariables = Object.keys(schema.shape);
