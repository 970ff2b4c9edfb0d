/**
 * The console's one way to the API: the generated Connect client for
 * browsers (clients/typescript, web entry), on this page's own origin. The
 * key lives in sessionStorage only: never in a URL, never in a log, gone
 * when the tab closes.
 */
import { createClient, isAgentbusError, type AgentbusClient } from "../../clients/typescript/src/web.js";

const KEY_ITEM = "agentbus.console.key";

export function storedKey(): string | undefined {
  return sessionStorage.getItem(KEY_ITEM) ?? undefined;
}

export function storeKey(key: string | undefined): void {
  if (key === undefined) sessionStorage.removeItem(KEY_ITEM);
  else sessionStorage.setItem(KEY_ITEM, key);
}

export function clientFor(apiKey?: string): AgentbusClient {
  return createClient({ baseUrl: location.origin, transport: "connect", ...(apiKey === undefined ? {} : { apiKey }) });
}

let sandbox: Promise<boolean> | undefined;

/**
 * Whether the service has the public sandbox channel (alias "sandbox"), asked
 * once per page load. From the landing document (GET / as JSON), not from
 * GET /v1/channels/sandbox: the sign-in page has no key to ask the API with,
 * the landing document reads no database, and the API's 404 on a service
 * without a sandbox would show in the browser's log as a failed request.
 */
export function hasSandbox(): Promise<boolean> {
  sandbox ??= fetch("/", { headers: { Accept: "application/json" } })
    .then(async (res) => res.ok && typeof ((await res.json()) as { sandbox?: unknown }).sandbox === "object")
    .catch(() => false);
  return sandbox;
}

/** What a person is shown for a failed call: the service's message and its advice. */
export interface Problem {
  code: string;
  message: string;
  suggestion: string;
}

/** A failure the console itself reports in the service's terms (a job that failed, say). */
export class ProblemError extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

export function problemOf(err: unknown): Problem {
  if (err instanceof ProblemError) return err.problem;
  if (isAgentbusError(err)) {
    const unreachable = !err.fromService && (err.code === "unavailable" || err.code === "unknown");
    return {
      code: err.code,
      message: unreachable ? "The service did not answer." : err.message,
      suggestion: unreachable ? "Check that agentbus is running, then try again." : err.suggestion,
    };
  }
  return { code: "console_error", message: err instanceof Error ? err.message : String(err), suggestion: "" };
}

/** True for the failure a stream ends with when the page itself stopped it. */
export const isCancelled = (err: unknown): boolean => isAgentbusError(err, "canceled");

export type { AgentbusClient };
