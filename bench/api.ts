/**
 * The few REST calls the benchmark makes, timed, with every unexpected
 * answer (non-2xx other than the 409 a lost claim race returns, or a network
 * failure) counted in the error tally.
 */
import type { HttpClient } from "./http.js";
import type { ErrorTally } from "./stats.js";

export interface Answer {
  status: number;
  body: string;
  /** Round-trip time in milliseconds. */
  ms: number;
  ok: boolean;
}

export interface Key {
  key: string;
  key_id: string;
  label: string;
}

export interface MessageJson {
  id: string;
  created_at: string;
  claimed_by: { id: string; name: string } | null;
  claimed_by_key_id: string | null;
  acknowledged_by: Array<{ id: string; name: string; occurred_at: string }>;
}

export interface ListJson {
  data: MessageJson[];
  limit: number;
  next_cursor: string | null;
}

export class SetupError extends Error {}

export class Api {
  constructor(
    readonly client: HttpClient,
    readonly errors: ErrorTally,
  ) {}

  /**
   * One request. `route` names it in the error tally; `allowed` lists the
   * non-2xx statuses that are expected answers rather than errors.
   */
  async call(method: string, path: string, route: string, key: string | undefined, body?: string, allowed: readonly number[] = []): Promise<Answer> {
    const headers: Record<string, string> = key === undefined ? {} : { "X-API-Key": key };
    const started = performance.now();
    try {
      const res = await this.client.request(method, path, body, headers);
      const ms = performance.now() - started;
      const ok = res.status >= 200 && res.status < 300;
      if (!ok && !allowed.includes(res.status)) this.errors.add(`${method} ${route} → ${res.status} ${errorCode(res.body)}`, res.body);
      return { status: res.status, body: res.body, ms, ok };
    } catch (err) {
      const ms = performance.now() - started;
      this.errors.add(`${method} ${route} → network error`, (err as Error).message);
      return { status: 0, body: "", ms, ok: false };
    }
  }

  /** A call that must succeed during setup; a failure stops the benchmark with the answer. */
  async must(method: string, path: string, route: string, key: string | undefined, body?: string): Promise<Answer> {
    const a = await this.call(method, path, route, key, body);
    if (!a.ok) {
      const hint = a.status === 501 ? " (not implemented yet on this server)" : "";
      throw new SetupError(`${method} ${path} answered ${a.status}${hint}: ${a.body.slice(0, 400)}`);
    }
    return a;
  }

  async mintKey(label: string): Promise<Key> {
    const a = await this.must("POST", "/v1/keys", "/v1/keys", undefined, JSON.stringify({ agent_label: label }));
    const json = JSON.parse(a.body) as { key: string; key_id: string };
    return { key: json.key, key_id: json.key_id, label };
  }

  /** A claimable open channel (TTL an hour unless `settings` say otherwise). */
  async createChannel(key: Key, name: string, settings: Record<string, unknown> = {}): Promise<string> {
    const body = JSON.stringify({
      name,
      mode: "claimable",
      access: "open",
      discoverable: false,
      description: "agentbus benchmark",
      ttl_seconds: 3600,
      ...settings,
    });
    const a = await this.must("POST", "/v1/channels", "/v1/channels", key.key, body);
    return (JSON.parse(a.body) as { id: string }).id;
  }
}

function errorCode(body: string): string {
  try {
    const json = JSON.parse(body) as { error?: unknown };
    return typeof json.error === "string" ? json.error : "";
  } catch {
    return "";
  }
}

/** Message content of exactly `bytes` ASCII bytes, unique per (tag, n). */
export function content(tag: string, n: number, bytes = 100): string {
  const head = `${tag} task ${n}: `;
  return head + "x".repeat(Math.max(1, bytes - head.length));
}
