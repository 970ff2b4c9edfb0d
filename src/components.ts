/**
 * What each part of a running service is doing, said once at start (one log
 * line per component) and on every GET /health, so that neither hides a
 * part that does not work: a PDF renderer that cannot run, a language model
 * that is not configured, Redis that is down while NOTIFY carries wake-ups.
 *
 * States: `ok`; `degraded` (the service serves, but something is impaired or
 * missing); `down` (the component does not work; only the database being
 * down makes the whole service unavailable). Each report has two texts:
 * `detail`, which GET /health shows anyone and so names no path, host,
 * port, address or version of a component (issue 26, F17), and `operator`,
 * the full one (hosts, ports, folders, versions; never a password, key or
 * token), for the start-up log and /status under the admin token.
 */
import path from "node:path";
import type { RedisBus } from "./bus/redis-bus.js";
import type { WakeBus } from "./ports/wake-bus.js";
import type { Config } from "./platform/config.js";
import { jobKinds } from "./jobs/index.js";
import type { Logger } from "./platform/logger.js";
import { chromiumInstalled, chromiumSource } from "./pdf/chromium.js";
import type { PdfRenderer } from "./pdf/renderer.js";
import type { ComponentReport } from "./server/health.js";

const TITLES = {
  database: "database",
  wake_bus: "wake bus",
  request_limits: "request limits",
  job_workers: "job workers",
  pdf_renderer: "PDF renderer",
  language_model: "language model",
} as const;

/** The components other than the database (whose state is the health check's own query). */
export interface ServiceComponents {
  wake_bus: ComponentReport;
  request_limits: ComponentReport;
  job_workers: ComponentReport;
  pdf_renderer: ComponentReport;
  language_model: ComponentReport;
}

export interface ComponentSources {
  config: Config;
  /** The database's URL as opened (embedded or external). */
  databaseUrl: string;
  /** Undefined in `agentbus worker`, which serves no wake-ups. */
  bus: WakeBus | undefined;
  /** This process's renderer; undefined when its jobs run elsewhere. */
  pdf: PdfRenderer | undefined;
  /** The per-key request limit counted in Redis (REDIS_URL with a limit); undefined: counted in each process. */
  sharedLimits?: { readonly healthy: boolean };
}

/** "embedded PostgreSQL in <dir> on port N" or "external PostgreSQL at host:port" (the operator's text), and without where (anyone's). */
export function describeDatabase(config: Config, databaseUrl: string): ComponentReport {
  const url = new URL(databaseUrl);
  if (config.databaseUrl === undefined) return { state: "ok", detail: "embedded PostgreSQL", operator: `embedded PostgreSQL in ${path.resolve(config.dataDir)} on port ${url.port}` };
  return { state: "ok", detail: "external PostgreSQL", operator: `external PostgreSQL at ${url.hostname}${url.port === "" ? "" : `:${url.port}`}` };
}

/** The current report of every component but the database. */
export async function componentReports(sources: ComponentSources): Promise<ServiceComponents & Record<string, ComponentReport>> {
  return {
    wake_bus: wakeBus(sources),
    request_limits: requestLimits(sources),
    job_workers: jobWorkers(sources.config),
    pdf_renderer: await pdfRenderer(sources),
    language_model: languageModel(sources.config),
  };
}

/**
 * Logs one line per component. The PDF renderer's line waits for its
 * Chromium to be ready (the first start unpacks it, which takes seconds):
 * until then a line says it is being prepared.
 */
export async function logComponents(sources: ComponentSources, logger: Logger): Promise<void> {
  const log = (component: keyof typeof TITLES, report: ComponentReport) =>
    logger[report.state === "ok" ? "info" : "warn"]({ component, state: report.state }, `${TITLES[component]}: ${report.operator ?? report.detail}`);
  log("database", describeDatabase(sources.config, sources.databaseUrl));
  const reports = await componentReports(sources);
  if (sources.bus) {
    log("wake_bus", reports.wake_bus);
    log("request_limits", reports.request_limits);
  }
  log("job_workers", reports.job_workers);
  const pdf = sources.pdf;
  if (pdf?.status.state === "starting") {
    log("pdf_renderer", reports.pdf_renderer);
    void pdf.prepare().then(async () => log("pdf_renderer", await pdfRenderer(sources)));
  } else {
    log("pdf_renderer", reports.pdf_renderer);
  }
  log("language_model", reports.language_model);
}

/**
 * Whether the bus is Redis's (the only one reporting `connected`). Told by its
 * shape rather than instanceof, so that redis-bus.ts, and ioredis with it
 * (~0.4 s of start-up), load only when REDIS_URL is set.
 */
export function isRedisBus(bus: WakeBus | undefined): bus is RedisBus {
  return bus !== undefined && "connected" in bus;
}

function wakeBus({ config, bus }: ComponentSources): ComponentReport {
  if (!isRedisBus(bus)) return { state: "ok", detail: "PostgreSQL LISTEN/NOTIFY" };
  const at = config.redisUrl === undefined ? "Redis" : `Redis at ${hostOf(config.redisUrl)}`;
  return bus.connected
    ? { state: "ok", detail: "Redis (LISTEN/NOTIFY while it is unreachable)", operator: `${at} (LISTEN/NOTIFY while it is unreachable)` }
    : {
        state: "degraded",
        detail: "Redis unreachable or not answering; wake-ups travel over PostgreSQL LISTEN/NOTIFY meanwhile",
        operator: `${at} unreachable or not answering; wake-ups travel over PostgreSQL LISTEN/NOTIFY meanwhile`,
      };
}

function requestLimits({ sharedLimits }: ComponentSources): ComponentReport {
  if (sharedLimits === undefined) return { state: "ok", detail: "counted in each process" };
  return sharedLimits.healthy
    ? { state: "ok", detail: "counted in Redis, across replicas" }
    : { state: "degraded", detail: "Redis does not answer; each process counts its own requests until it does" };
}

function jobWorkers(config: Config): ComponentReport {
  if (!config.workers) {
    return { state: "ok", detail: "off in this process (AGENTBUS_WORKERS=false); `agentbus worker` processes run the jobs" };
  }
  const kinds = jobKinds.filter((k) => k.every === undefined).map((k) => k.name);
  const recurring = jobKinds.filter((k) => k.every !== undefined).map((k) => k.name);
  return { state: "ok", detail: `on: ${kinds.join(", ")} jobs, webhook deliveries, ${recurring.join(", ")}` };
}

async function pdfRenderer({ config, pdf }: ComponentSources): Promise<ComponentReport> {
  const unavailable = "; PDF submissions answer 503 pdf_renderer_unavailable";
  if (pdf === undefined) {
    if (!(await chromiumInstalled(config.chromiumPath))) {
      return { state: "down", detail: `the configured Chromium is not an executable file${unavailable}`, operator: `AGENTBUS_CHROMIUM_PATH=${config.chromiumPath} is not an executable file${unavailable}` };
    }
    return { state: "ok", detail: "in the worker processes", operator: `in the worker processes, with Chromium from ${chromiumSource(config.chromiumPath)}` };
  }
  const status = pdf.status;
  switch (status.state) {
    case "starting":
      return { state: "ok", detail: "preparing Chromium (the first start unpacks it)", operator: `preparing Chromium from ${status.source} (the first start unpacks it)` };
    case "ready":
      return { state: "ok", detail: "ready", operator: `${status.setup.version} from ${status.setup.source}, fonts ${status.setup.fonts}` };
    case "down":
      return { state: "down", detail: `Chromium cannot run${unavailable}; the start-up log and /status (admin token) say why`, operator: `${status.reason}${unavailable}` };
  }
}

function languageModel(config: Config): ComponentReport {
  if (config.openaiApiKey === undefined) {
    return { state: "degraded", detail: "not configured (OPENAI_API_KEY is unset); job-posting parse submissions answer 503 llm_not_configured" };
  }
  return { state: "ok", detail: "configured", operator: `${config.llmModel} at ${hostOf(config.openaiBaseUrl)}` };
}

/** host[:port] of a URL, without its credentials or path. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "(unparsable URL)";
  }
}
