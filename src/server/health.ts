/** GET /health: 200 when the database answers, 503 when it does not. */
import type pg from "pg";

export interface HealthReport {
  status: "ok" | "unavailable";
  database: "ok" | "unreachable";
  db_latency_ms: number | null;
}

export async function checkHealth(pool: pg.Pool, timeoutMs = 2000): Promise<HealthReport> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      pool.query("SELECT 1"),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("health check timed out")), timeoutMs))),
    ]);
    return { status: "ok", database: "ok", db_latency_ms: Math.round((performance.now() - started) * 100) / 100 };
  } catch {
    return { status: "unavailable", database: "unreachable", db_latency_ms: null };
  } finally {
    clearTimeout(timer);
  }
}
