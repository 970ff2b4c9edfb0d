/**
 * Starts the real service on a free port over its own fresh database, exactly
 * as `agentbus serve` does, for integration tests.
 */
import { Writable } from "node:stream";
import pg from "pg";
import { startApp, type App, type AppOptions } from "../../src/app.js";
import { loadConfig, type Config, type Env } from "../../src/platform/config.js";
import type { Clock } from "../../src/model/time.js";
import { createLogger } from "../../src/platform/logger.js";
import { createTestDatabase } from "./database.js";
import { eventually } from "./eventually.js";
import { forSuite } from "./suite.js";

export interface TestServer {
  url: string;
  app: App;
  databaseUrl: string;
  /** Every log line the server wrote, as parsed JSON. */
  logs: Array<Record<string, unknown>>;
  rawLogs: string[];
  close(): Promise<void>;
}

export interface TestServerOptions {
  clock?: Clock;
  jobs?: AppOptions["jobs"];
}

/**
 * The settings every test service runs with over `databaseUrl`: a free port on
 * loopback, no mint or rate limit, a short shutdown grace; `env` on top.
 */
export function testConfig(databaseUrl: string, env: Env = {}): Config {
  return loadConfig({
    DATABASE_URL: databaseUrl,
    HOST: "127.0.0.1",
    PORT: "0",
    AGENTBUS_KEY_MINT_LIMIT: "0",
    AGENTBUS_RATE_LIMIT: "0",
    AGENTBUS_SHUTDOWN_GRACE_MS: "1000",
    ...env,
  });
}

export async function startTestServer(env: Env = {}, options: TestServerOptions = {}): Promise<TestServer> {
  const db = await createTestDatabase();
  const config = testConfig(db.url, {
    AGENTBUS_LOG_LEVEL: "info",
    // No background purge racing a test that moves the clock; tests that
    // want the workers pass AGENTBUS_WORKERS: "true" (or call purge()).
    AGENTBUS_WORKERS: "false",
    ...env,
  });
  const rawLogs: string[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line === "") continue;
        rawLogs.push(line);
        logs.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  const app = await startApp({ config, logger: createLogger(config.logLevel, sink), clock: options.clock, jobs: options.jobs });
  return {
    url: app.url,
    app,
    databaseUrl: db.url,
    logs,
    rawLogs,
    async close() {
      await app.close();
      await db.drop();
    },
  };
}

/** The server of a suite: started before its first test, closed after its last (the suite owns closing it). */
export type SuiteServer = Omit<TestServer, "close">;

/** A test server for the enclosing suite (see forSuite). */
export function useTestServer(env: Env = {}, options: TestServerOptions = {}): SuiteServer {
  return forSuite(() => startTestServer(env, options), (server) => server.close());
}

/** A SQL connection to the suite server's database, for what the API does not show (see forSuite). */
export function useSqlClient(server: SuiteServer): pg.Client {
  return forSuite(
    async () => {
      const client = new pg.Client({ connectionString: server.databaseUrl });
      await client.connect();
      return client;
    },
    (client) => client.end(),
  );
}

export interface JsonResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

/** A REST call with a JSON body; parses the JSON answer (or {} when empty). */
export async function rest<T = Record<string, unknown>>(
  base: string,
  method: string,
  path: string,
  options: { body?: unknown; rawBody?: string; key?: string; headers?: Record<string, string> } = {},
): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.key !== undefined) headers["X-API-Key"] = options.key;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["Content-Type"] = "application/json";
  }
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: (text === "" ? {} : JSON.parse(text)) as T };
}

export async function mintKey(base: string, label = `agent-${Math.random().toString(36).slice(2, 10)}`): Promise<string> {
  const res = await rest<{ key: string }>(base, "POST", "/v1/keys", { body: { agent_label: label } });
  if (res.status !== 201) throw new Error(`minting a key failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.key;
}

/**
 * Until `count` long-polls or watches wait on the server's wake bus: a write
 * from then on must wake them. What a test would otherwise sleep to let happen.
 */
export function untilParked(server: Pick<TestServer, "app">, count: number): Promise<true> {
  return eventually(async () => server.app.bus.subscriptions >= count);
}
