/**
 * GET /status and /status.html (issue 17): what an operator or a user wants
 * to know at a glance (version, uptime, each component's state, whether
 * public minting is open), and nothing secret: no addresses, paths, hosts or
 * tokens (/health's details name those; /status only states).
 */
import type { ComponentReport, ComponentState } from "./health.js";
import type { WorkerPresence } from "../ports/worker-presence.js";
import { formatTimestamp, type Micros } from "../model/time.js";

export interface StatusSources {
  version: string;
  startedAt: Micros;
  now: () => Micros;
  /** The database's state, as the health check's query finds it. */
  database: () => Promise<ComponentState>;
  /** embedded or external. */
  databaseKind: "embedded" | "external";
  /** postgres-notify or redis. */
  wakeBusKind: "postgres-notify" | "redis";
  components: () => Promise<Record<string, ComponentReport>>;
  workers: WorkerPresence;
  languageModelConfigured: boolean;
  publicMinting: () => Promise<boolean>;
}

export interface StatusReport {
  service: "agentbus";
  version: string;
  state: ComponentState;
  started_at: string;
  uptime_seconds: number;
  database: { state: ComponentState; kind: string };
  wake_bus: { state: ComponentState; kind: string };
  /** Where per-key request limits are counted (Redis: across replicas), and whether that works. */
  request_limits: { state: ComponentState };
  job_workers: { state: ComponentState; last_seen_at: string | null; seen_last_minute: number };
  pdf_renderer: { state: ComponentState };
  language_model: { configured: boolean };
  public_minting_enabled: boolean | null;
}

const worst = (states: ComponentState[]): ComponentState => (states.includes("down") ? "down" : states.includes("degraded") ? "degraded" : "ok");

export async function statusReport(s: StatusSources): Promise<StatusReport> {
  const [database, components, workers, minting] = await Promise.all([
    s.database(),
    s.components(),
    s.workers.lastSeen(60).catch(() => ({ lastSeenAt: null, recent: 0 })),
    s.publicMinting().catch(() => null),
  ]);
  const state = (name: string): ComponentState => components[name]?.state ?? "ok";
  const now = s.now();
  const report: Omit<StatusReport, "state"> = {
    service: "agentbus",
    version: s.version,
    started_at: formatTimestamp(s.startedAt),
    uptime_seconds: Math.floor((now - s.startedAt) / 1_000_000),
    database: { state: database, kind: s.databaseKind },
    wake_bus: { state: state("wake_bus"), kind: s.wakeBusKind },
    request_limits: { state: state("request_limits") },
    job_workers: {
      // No worker seen for two minutes while there are recurring jobs to run: nobody is running them.
      state: workers.lastSeenAt !== null && now - workers.lastSeenAt > 120_000_000 ? "degraded" : "ok",
      last_seen_at: workers.lastSeenAt === null ? null : formatTimestamp(workers.lastSeenAt),
      seen_last_minute: workers.recent,
    },
    pdf_renderer: { state: state("pdf_renderer") },
    language_model: { configured: s.languageModelConfigured },
    public_minting_enabled: minting,
  };
  const overall = worst([report.database.state, report.wake_bus.state, report.request_limits.state, report.job_workers.state, report.pdf_renderer.state]);
  return { ...report, state: overall };
}

/**
 * The report, computed at most once a second whoever asks: /status needs no
 * key, and a flood of it must not turn into a flood of database queries that
 * other callers then wait behind.
 */
export function sharedStatus(sources: StatusSources, ttlMs = 1000): () => Promise<StatusReport> {
  let last: { at: number; report: Promise<StatusReport> } | undefined;
  return () => {
    const at = sources.now();
    if (last === undefined || at - last.at >= ttlMs * 1000) {
      const report = statusReport(sources);
      last = { at, report };
      // A failed report is not kept: the next request tries again.
      report.catch(() => {
        if (last?.report === report) last = undefined;
      });
    }
    return last.report;
  };
}

/**
 * The report with each component's full text (hosts, ports, folders,
 * versions): for the operator, who asks with the admin token (issue 26, F17:
 * nothing public names them).
 */
export async function withOperatorDetails(report: StatusReport, components: () => Promise<Record<string, ComponentReport>>): Promise<StatusReport & { details: Record<string, string> }> {
  const all = await components();
  return { ...report, details: Object.fromEntries(Object.entries(all).map(([name, c]) => [name, c.operator ?? c.detail])) };
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The same report as a small page: inline style only, no scripts, nothing fetched. */
export function renderStatusHtml(r: StatusReport): string {
  const row = (name: string, state: string, detail = "") =>
    `<tr><th>${escape(name)}</th><td class="${escape(state)}">${escape(state)}</td><td>${escape(detail)}</td></tr>`;
  const rows = [
    row("database", r.database.state, r.database.kind),
    row("wake bus", r.wake_bus.state, r.wake_bus.kind),
    row("request limits", r.request_limits.state),
    row("job workers", r.job_workers.state, r.job_workers.last_seen_at === null ? "not seen yet" : `last seen ${r.job_workers.last_seen_at}`),
    row("PDF renderer", r.pdf_renderer.state),
    row("language model", r.language_model.configured ? "ok" : "degraded", r.language_model.configured ? "configured" : "not configured"),
    row("public key minting", r.public_minting_enabled === null ? "unknown" : r.public_minting_enabled ? "open" : "closed"),
  ].join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentbus status: ${escape(r.state)}</title>
<style>body{font:15px/1.4 system-ui,sans-serif;margin:2rem auto;max-width:40rem;padding:0 1rem}table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid #ddd}.ok,.open{color:#176b2c}.degraded,.unknown{color:#8a5a00}.down,.closed{color:#a01818}</style>
</head><body>
<h1>agentbus is <span class="${escape(r.state)}">${escape(r.state)}</span></h1>
<p>Version ${escape(r.version)}, up since ${escape(r.started_at)} (${r.uptime_seconds} s). JSON: <a href="/status">/status</a>.</p>
<table>
${rows}
</table>
</body></html>
`;
}
