/**
 * GET /health: 200 when the database answers, 503 when it does not (the
 * top-level `status`, `database` and `db_latency_ms` keep their meaning), and
 * the state of every component (src/components.ts) under `components`, with
 * `state` summing them up: `down` only when the database is, `degraded`
 * when any component is not ok, else `ok`.
 */
import type pg from "pg";

export type ComponentState = "ok" | "degraded" | "down";

export interface ComponentReport {
  state: ComponentState;
  /** What anyone may read: no path, host, port, address or version (GET /health is public). */
  detail: string;
  /** The full text, for the operator (the start-up log, /status with the admin token); `detail` when absent. */
  operator?: string;
}

/** The REST API's version, as the reference reports it: "1.0" while the /v1 routes keep their shapes. */
export const API_VERSION = "1.0";

export interface HealthReport {
  status: "ok" | "unavailable";
  api_version: typeof API_VERSION;
  state: ComponentState;
  database: "ok" | "unreachable";
  db_latency_ms: number | null;
  components: Record<string, ComponentReport>;
  /** Whether POST /v1/keys is open; null when the database cannot say. */
  public_minting_enabled: boolean | null;
}

export interface HealthOptions {
  /** What the database is (embedded or external; where, for the operator), for its component's report. */
  database?: ComponentReport;
  /** The other components' current reports. */
  components?: () => Promise<Record<string, ComponentReport>>;
  /** Whether public minting is open (the operator's switch). */
  publicMinting?: () => Promise<boolean>;
  timeoutMs?: number;
}

export async function checkHealth(pool: pg.Pool, options: HealthOptions = {}): Promise<HealthReport> {
  const [database, others, minting] = await Promise.all([
    pingDatabase(pool, options.timeoutMs ?? 2000),
    options.components?.() ?? {},
    options.publicMinting?.().catch(() => null) ?? null,
  ]);
  const what = options.database?.detail ?? "PostgreSQL";
  // Public: the operator's texts stay out of it.
  const components: Record<string, ComponentReport> = {
    database: database.ok ? { state: "ok", detail: what } : { state: "down", detail: `${what} does not answer` },
  };
  for (const [name, report] of Object.entries(others as Record<string, ComponentReport>)) components[name] = { state: report.state, detail: report.detail };
  const state: ComponentState = !database.ok ? "down" : Object.values(components).every((c) => c.state === "ok") ? "ok" : "degraded";
  return {
    status: database.ok ? "ok" : "unavailable",
    api_version: API_VERSION,
    state,
    database: database.ok ? "ok" : "unreachable",
    db_latency_ms: database.latencyMs,
    components,
    public_minting_enabled: minting,
  };
}

/**
 * /health for everyone at once: requests that arrive while a check runs get
 * that check's answer instead of starting their own, so a flood of
 * unauthenticated probes costs the database one query at a time, and every
 * answer is still as fresh as the request (none is kept after it finished).
 */
export function sharedHealth(check: () => Promise<HealthReport>): () => Promise<HealthReport> {
  let running: Promise<HealthReport> | undefined;
  return () => {
    if (running === undefined) {
      const started = check();
      running = started;
      const done = () => {
        if (running === started) running = undefined;
      };
      started.then(done, done);
    }
    return running;
  };
}

/** The database's state as the health check's query finds it. */
export async function databaseState(pool: pg.Pool, timeoutMs = 2000): Promise<ComponentState> {
  return (await pingDatabase(pool, timeoutMs)).ok ? "ok" : "down";
}

async function pingDatabase(pool: pg.Pool, timeoutMs: number): Promise<{ ok: boolean; latencyMs: number | null }> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      pool.query("SELECT 1"),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("health check timed out")), timeoutMs))),
    ]);
    return { ok: true, latencyMs: Math.round((performance.now() - started) * 100) / 100 };
  } catch {
    return { ok: false, latencyMs: null };
  } finally {
    clearTimeout(timer);
  }
}
