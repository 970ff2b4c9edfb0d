/**
 * Continuous REST load for the resilience tests: writers that post messages
 * and remember every id acknowledged with 201, readers that list, and a log of
 * every answer with its status, error code and duration.
 */
import { setTimeout as sleep } from "node:timers/promises";

export interface Outcome {
  kind: "write" | "read";
  /** performance.now() when the request started. */
  startedAt: number;
  durationMs: number;
  /** HTTP status, or 0 when the request itself failed (connection refused, reset). */
  status: number;
  /** The error body's code, when there is one. */
  error?: string;
  /** What went wrong at the transport level when status is 0. */
  failure?: string;
}

export interface Load {
  readonly outcomes: Outcome[];
  /** Message ids acknowledged with 201, per channel. */
  readonly acknowledged: Map<string, Set<string>>;
  /** Stops the loops and waits for their last requests. */
  stop(): Promise<void>;
}

export interface LoadOptions {
  base: string;
  key: string;
  channels: string[];
  writers: number;
  readers: number;
  /** Pause between two requests of one loop; default 10 ms. */
  pauseMs?: number;
  /** Per-request client timeout: a request still open after it counts as a hang (status 0). Default 15 s. */
  requestTimeoutMs?: number;
}

export function startLoad(options: LoadOptions): Load {
  const outcomes: Outcome[] = [];
  const acknowledged = new Map(options.channels.map((c) => [c, new Set<string>()]));
  let running = true;
  let counter = 0;
  const pause = options.pauseMs ?? 10;
  const timeout = options.requestTimeoutMs ?? 15_000;

  const call = async (kind: Outcome["kind"], method: string, path: string, body?: unknown): Promise<{ outcome: Outcome; json: unknown }> => {
    const startedAt = performance.now();
    const outcome: Outcome = { kind, startedAt, durationMs: 0, status: 0 };
    let json: unknown;
    try {
      const res = await fetch(`${options.base}${path}`, {
        method,
        headers: { "X-API-Key": options.key, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeout),
      });
      const text = await res.text();
      outcome.status = res.status;
      json = text === "" ? undefined : JSON.parse(text);
      if (res.status >= 400) outcome.error = (json as { error?: string } | undefined)?.error;
    } catch (err) {
      outcome.failure = err instanceof Error ? `${err.name}: ${err.message} ${String((err.cause as Error | undefined)?.message ?? "")}` : String(err);
    }
    outcome.durationMs = performance.now() - startedAt;
    outcomes.push(outcome);
    return { outcome, json };
  };

  const writer = async (w: number) => {
    while (running) {
      const channel = options.channels[counter++ % options.channels.length]!;
      const { outcome, json } = await call("write", "POST", `/v1/channels/${channel}/messages`, {
        content: `w${w}-${counter}`,
      });
      if (outcome.status === 201) acknowledged.get(channel)!.add((json as { message: { id: string } }).message.id);
      // Real time: paces load against a real server.
      await sleep(pause);
    }
  };
  const reader = async (r: number) => {
    while (running) {
      const channel = options.channels[r % options.channels.length]!;
      await call("read", "GET", `/v1/channels/${channel}/messages?limit=20`);
      // Real time: paces load against a real server.
      await sleep(pause);
    }
  };

  const loops = [
    ...Array.from({ length: options.writers }, (_, i) => writer(i)),
    ...Array.from({ length: options.readers }, (_, i) => reader(i)),
  ];
  return {
    outcomes,
    acknowledged,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** Every live message id of a channel, following next_cursor page by page. */
export async function listAllIds(base: string, key: string, channel: string): Promise<Set<string>> {
  const ids = new Set<string>();
  let since = "0";
  for (;;) {
    const res = await fetch(`${base}/v1/channels/${channel}/messages?since=${encodeURIComponent(since)}&limit=100`, {
      headers: { "X-API-Key": key },
    });
    if (res.status !== 200) throw new Error(`listing ${channel} answered ${res.status}: ${await res.text()}`);
    const page = (await res.json()) as { data: Array<{ id: string }>; next_cursor: string | null };
    for (const m of page.data) ids.add(m.id);
    if (page.data.length === 0 || page.next_cursor === null) return ids;
    since = page.next_cursor;
  }
}

/** Polls fn until it returns true or the time is up; returns how long it took (ms). */
export async function waitUntil(fn: () => Promise<boolean>, timeoutMs: number, what: string, intervalMs = 50): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await fn().catch(() => false)) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    // Real time: polls a real server or process.
    await sleep(intervalMs);
  }
}

/** A compact summary of outcomes for failure messages and logs. */
export function summarise(outcomes: Outcome[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of outcomes) {
    const label = `${o.kind} ${o.status}${o.error ? ` ${o.error}` : ""}${o.failure ? ` ${o.failure.slice(0, 80)}` : ""}`;
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}
