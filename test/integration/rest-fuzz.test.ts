/**
 * Seeded fuzzing of every REST route: random bodies, query strings, path
 * values and headers, with and without a valid key. Whatever arrives, the
 * service answers without a 5xx, every 4xx carries the error body with a
 * catalog code, and it is still healthy afterwards. Values include what the
 * store cannot take (unpaired surrogates, NUL, 1e999) in fields, keys and
 * Structs. Then metadata_schema edge cases (catastrophic patterns, schemas
 * near the body limit), and gRPC: garbage and poisoned protobuf for every
 * method of every service, answered with a catalog status and ErrorDetail,
 * never INTERNAL or UNKNOWN.
 *
 * The seed is printed; AGENTBUS_FUZZ_SEED=<seed> replays the same requests
 * (the order of concurrent requests, and so some answers, may differ).
 * AGENTBUS_FUZZ_REQUESTS changes the number of requests (default 5000).
 */
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, toBinary, type DescMessage, type DescMethod, type DescService, type Message } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import type { WakeBus } from "../../src/ports/wake-bus.js";
import { loadConfig } from "../../src/platform/config.js";
import { errorCatalog } from "../../src/model/errors.js";
import { FixedWindowLimiter } from "../../src/domain/rate-limit.js";
import { systemClock } from "../../src/model/time.js";
import { RestRoutes, type RestRoute } from "../../src/server/rest/routes.js";
import { rulesOf } from "../../src/server/rpc/method-rules.js";
import { createDomain, createKeys } from "../../src/app.js";
import { createServices } from "../../src/services/index.js";
import { Db } from "../../src/store/db.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { grpcFrame, RawGrpcClient, type RawGrpcAnswer } from "../support/grpc-raw.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const ADMIN_TOKEN = "fuzz-admin-token";
const MAX_BODY = 64 * 1024;
const seed = Number(process.env.AGENTBUS_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const TOTAL = Number(process.env.AGENTBUS_FUZZ_REQUESTS ?? 5000);
const CONCURRENCY = 12;

/** Code units PostgreSQL text and jsonb refuse: unpaired surrogates (either half) and NUL. */
const UNSTORABLE_CHARS = ["\ud800", "\udbff", "\udc00", "\udfff", "\u0000"];

/**
 * JSON text (not producible with JSON.stringify) that decodes to values the
 * store cannot take: escaped unpaired surrogates and NUL, numbers beyond a
 * double (1e999 is Infinity), in values, keys and nested Struct members.
 */
const POISONED_JSON = [
  '"a\\ud800b"',
  '"\\udc00"',
  '"\\udfff\\ud800"',
  '"a\\u0000"',
  "1e999",
  "-1e999",
  "1e400",
  '{"k\\ud800":1}',
  '{"\\u0000":"x"}',
  '{"a":[1,{"b":1e999}]}',
  '{"a":{"b":"\\ud83d"}}',
  '["\\u0000",1e999]',
];

/** mulberry32: small, fast, good enough to fuzz with. */
function prng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

class Fuzzer {
  constructor(private readonly rand: () => number) {}
  int(n: number): number {
    return Math.floor(this.rand() * n);
  }
  chance(p: number): boolean {
    return this.rand() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  string(max = 20): string {
    const alphabets = [[..."abcxyz"], [..."0123456789"], [..." \t\n\"'\\/{}[]<>%&?=#."], [..."éüñ中文😀\u0000\u200b\ufeff"], ["\ud800\udfff"], UNSTORABLE_CHARS];
    let out = "";
    const n = this.int(max + 1);
    for (let i = 0; i < n; i++) out += this.pick(this.pick(alphabets));
    return out;
  }
  number(): number {
    return this.pick([0, -1, 1, 2.5, -0, 1e308, -1e308, 2 ** 31, 2 ** 53 + 1, -(2 ** 63), 1e-320, 300, 86400, 99999999999, this.int(1000)]);
  }
  value(depth: number, fields: string[] = []): unknown {
    const kind = this.int(depth > 3 ? 6 : 9);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return this.chance(0.5);
      case 2:
        return this.number();
      case 3:
      case 4:
        return this.string();
      case 5:
        return this.pick(["claimable", "broadcast", "open", "restricted", "UNCLAIMED", "1970-01-01T00:00:00Z", "0", "-1", "me", "1.5", "true"]);
      case 6:
        return Array.from({ length: this.int(4) }, () => this.value(depth + 1, fields));
      default:
        return this.object(depth + 1, fields);
    }
  }
  object(depth: number, fields: string[]): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    const n = this.int(5);
    for (let i = 0; i < n; i++) {
      const name = fields.length > 0 && this.chance(0.8) ? this.pick(fields) : this.pick(["unknown_field", "__proto__", "constructor", "", this.string(8)]);
      out[name] = this.value(depth, fields);
    }
    return out;
  }
}

/** Field names a method's request knows, in both spellings, nested messages included (one level). */
function fieldNames(method: DescMethod): string[] {
  const names = new Set<string>();
  for (const f of method.input.fields) {
    names.add(f.name);
    names.add(f.jsonName);
    if (f.fieldKind === "message") for (const g of f.message.fields) names.add(g.name);
  }
  return [...names];
}

interface Sent {
  route: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer | undefined;
}

interface Answer {
  status: number;
  contentType: string;
  body: Buffer;
}

const server = useTestServer({
  AGENTBUS_ADMIN_TOKEN: ADMIN_TOKEN,
  AGENTBUS_MAX_BODY_BYTES: String(MAX_BODY),
  AGENTBUS_LONGPOLL_MAX_WAIT_SECONDS: "0.2",
  AGENTBUS_LOG_LEVEL: "silent",
  // Submissions are accepted (not 503 "not configured"); workers are off, so nothing runs them.
  AGENTBUS_CHROMIUM_PATH: "/bin/true",
  OPENAI_API_KEY: "sk-fuzz",
  OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
});
let routes: readonly RestRoute[];
let serviceList: DescService[];
const keys: string[] = [];
/** Owns fixtures; never sent by the fuzzer, so never revoked by it. */
let fixtureOwner: string;
let channelIds: string[] = [];
let messageIds: string[] = [];
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });

beforeAll(async () => {
  // The same service list the server builds its routes from (app.ts → createDomain, createServices → http-handler).
  const db = new Db(server.app.pool);
  const bus: WakeBus = { publish() {}, subscribe: () => () => {}, subscriptions: 0, close: async () => {} };
  const config = loadConfig({ DATABASE_URL: server.databaseUrl });
  const services = createServices({
    domain: createDomain({ db, bus, clock: systemClock, config, ...createKeys(db, systemClock, 0) }),
    clock: systemClock,
    config,
    mintLimiter: new FixedWindowLimiter(0, 3_600_000, systemClock),
  });
  serviceList = services.map((s) => s.service);
  routes = new RestRoutes(serviceList).routes;
  for (let i = 0; i < 4; i++) keys.push(await mintKey(server.url));
  fixtureOwner = await mintKey(server.url);
  await refreshFixtures();
});

afterAll(() => {
  agent.destroy();
});

/**
 * Fresh channels and messages for the fuzzed paths to hit: one pair owned by
 * a key the fuzzer never sends (so this always works), and one owned by a
 * fuzzed key when it still can (so owner paths get exercised too). A fuzzed
 * DELETE /v1/keys/me may have revoked that key a moment ago, while another
 * worker is still minting its replacement: then it is skipped this time.
 */
async function refreshFixtures(): Promise<void> {
  const add = (channel: string, message: string) => {
    channelIds = [channel, ...channelIds].slice(0, 3);
    messageIds = [message, ...messageIds].slice(0, 3);
  };
  const ch = await createChannel(server.url, fixtureOwner);
  add(ch, (await postMessage(server.url, fixtureOwner, ch, { content: "fuzz target" })).id);
  const key = keys[0]!;
  const owned = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: `fz-${Math.random().toString(36).slice(2, 8)}` } });
  if (owned.status !== 201) return;
  const posted = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${owned.body.id}/messages`, { key, body: { content: "fuzz target" } });
  if (posted.status === 201) add(owned.body.id, posted.body.message.id);
}

function send(req: Sent): Promise<Answer | { clientError: string }> {
  return new Promise((resolve) => {
    let request: http.ClientRequest;
    try {
      request = http.request(`${server.url}${req.path}`, { method: req.method, headers: req.headers, agent, timeout: 15_000 }, (res) => {
        const chunks: Buffer[] = [];
        const contentType = String(res.headers["content-type"] ?? "");
        // A stream that opened: the route works; no need to hold it.
        if (contentType.startsWith("text/event-stream")) {
          res.destroy();
          resolve({ status: res.statusCode ?? 0, contentType, body: Buffer.alloc(0) });
          return;
        }
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, contentType, body: Buffer.concat(chunks) }));
        res.on("error", (err) => resolve({ clientError: `response: ${err.message}` }));
      });
    } catch (err) {
      // Something Node's client itself refuses to send (e.g. a character not allowed in a header).
      resolve({ clientError: `unsendable: ${(err as Error).message}` });
      return;
    }
    request.on("timeout", () => request.destroy(new Error("timed out (hang)")));
    request.on("error", (err) => resolve({ clientError: `request: ${err.message}` }));
    request.end(req.body);
  });
}

/**
 * Percent-encodes anything, an unpaired surrogate as the UTF-8 bytes it would
 * have (%ED%A0%80 for \ud800), which no valid URL carries.
 */
function encodeLoosely(text: string): string {
  return text.replace(/[\ud800-\udbff][\udc00-\udfff]|[^]/g, (c) => {
    const unit = c.charCodeAt(0);
    if (c.length === 1 && unit >= 0xd800 && unit <= 0xdfff) {
      return [0xe0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3f), 0x80 | (unit & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join("");
    }
    return encodeURIComponent(c);
  });
}

const PATH_VALUES = [
  "%2e%2e",
  "..",
  ".",
  "%00",
  "%ZZ",
  "%C3%28",
  "%FF%FE",
  "%E2%82",
  "%ED%A0%80",
  "a%00b",
  "%2F",
  "a%2Fb",
  "%25",
  "caf%C3%A9",
  "%F0%9F%98%80",
  "null",
  "0",
  "-1",
  "1e400",
  "me",
  "00000000-0000-0000-0000-000000000000",
  "%20",
  "+",
  "~",
];

function fuzzPath(f: Fuzzer, route: RestRoute): string {
  return route.template.template.replace(/\{([^}=]+)(=[^}]*)?\}/g, (_m, name: string) => {
    const r = f.int(10);
    if (r < 3) {
      if (/channel|identifier/.test(name) && channelIds.length > 0) return f.pick(channelIds);
      if (/message/.test(name) && messageIds.length > 0) return f.pick(messageIds);
    }
    if (r === 3) return "x".repeat(f.pick([256, 2048, 8000]));
    if (r === 4) return encodeLoosely(f.string(30)).replace(/%25/g, f.chance(0.5) ? "%" : "%25");
    return f.pick(PATH_VALUES);
  });
}

function fuzzQuery(f: Fuzzer, names: string[]): string {
  if (f.chance(0.3)) return "";
  const parts: string[] = [];
  const n = 1 + f.int(5);
  for (let i = 0; i < n; i++) {
    const name = f.chance(0.8) && names.length > 0 ? f.pick(names) : f.pick(["x", "limit[]", "%ZZ", "", "a%00b", "since", "wait", "status", "cursor"]);
    const value = f.pick([
      "",
      "1",
      "-5",
      "0",
      "1e400",
      "NaN",
      "Infinity",
      "0x10",
      "1.5",
      "99999999999999999999",
      "true",
      "%ZZ",
      "%C3%28",
      "unclaimed",
      "claimable",
      "1970-01-01T00:00:00.000000Z",
      "9999-12-31T23:59:59Z",
      encodeLoosely(f.string(12)),
      "x".repeat(f.pick([10, 5000])),
      "a+b",
      "a=b=c",
    ]);
    parts.push(f.chance(0.1) ? name : `${name}=${value}`);
    // Repeated parameters.
    if (f.chance(0.15)) parts.push(`${name}=${value}`);
  }
  return `?${parts.join(f.chance(0.05) ? ";" : "&")}`;
}

function nested(depth: number, open: string, close: string): string {
  return open.repeat(depth) + close.repeat(depth);
}

function fuzzBody(f: Fuzzer, route: RestRoute): Buffer | undefined {
  const fields = fieldNames(route.method);
  const max = rulesOf(route.method).maxBodyBytes || MAX_BODY;
  const r = f.int(22);
  if (route.bodyField === "" && r < 14) return undefined;
  switch (r) {
    case 0:
      return Buffer.alloc(0);
    case 1:
      return Buffer.from(f.pick(["not json", "{", "{\"a\":", "[1,2", "'single'", "{a:1}", "NaN", "undefined", "\u0000", "{}{}", "1 2"]));
    case 2:
      return Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0xff, 0xfe, 0x22, 0x7d]); // {"a":"<invalid UTF-8>"}
    case 3:
      return Buffer.from(nested(f.pick([50, 1000, 20000]), "[", "]"));
    case 4:
    {
      // Deeply nested objects under a known field.
      const depth = f.pick([100, 5000]);
      return Buffer.from(`{"${f.pick(fields.length > 0 ? fields : ["a"])}":${'{"a":'.repeat(depth)}1${"}".repeat(depth)}}`);
    }
    case 5: {
      // Long strings: just under and over the body limit.
      const size = f.pick([max - 64, max + 1024, 1024 * 8]);
      const field = fields.length > 0 ? f.pick(fields) : "content";
      return Buffer.from(JSON.stringify({ [field]: "a".repeat(Math.max(0, size)) }));
    }
    case 6:
      return Buffer.from(f.pick(["null", "1", "\"str\"", "true", "[]", "[{}]", "1e400", "-0", "{\"a\":1e400}"]));
    case 7:
      return Buffer.from(JSON.stringify(f.value(0, fields)));
    case 8:
    case 9: {
      // A poisoned value in a known field, or inside a Struct (metadata, metadata_schema) of one.
      const field = fields.length > 0 ? f.pick(fields) : "metadata";
      const value = f.pick(POISONED_JSON);
      const wrapped = f.chance(0.5) ? `{"${f.pick(["a", "pattern", "type", "k"])}":${value}}` : value;
      return Buffer.from(`{"content":"x","name":"fz","${field}":${wrapped}}`);
    }
    default:
      return Buffer.from(JSON.stringify(f.object(0, fields)));
  }
}

function fuzzHeaders(f: Fuzzer, body: Buffer | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  const keyChoice = f.int(10);
  if (keyChoice < 5) headers["X-API-Key"] = f.pick(keys);
  else if (keyChoice < 9) {
    headers["X-API-Key"] = f.pick([
      "",
      ".",
      "abc",
      "a.b",
      `${f.pick(keys).split(".")[0]}.wrong-secret`,
      `${f.pick(keys)}x`,
      "x".repeat(5000),
      "ünïcödé.secret",
      `${f.pick(keys)}, ${f.pick(keys)}`,
    ]);
  }
  if (body !== undefined || f.chance(0.2)) {
    headers["Content-Type"] = f.pick([
      "application/json",
      "application/json",
      "application/json; charset=utf-8",
      "application/json; charset=latin1",
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/grpc",
      "application/connect+json",
      "application/proto",
      "garbage",
      "",
    ]);
  }
  if (f.chance(0.3)) headers["Idempotency-Key"] = f.pick(["", "k", "x".repeat(300), "x".repeat(5000), "ünï", "a b c", "\t", `fuzz-${f.int(50)}`]);
  if (f.chance(0.1)) headers["X-Admin-Token"] = f.pick([ADMIN_TOKEN, "wrong", ""]);
  if (f.chance(0.05)) headers["X-Huge"] = "h".repeat(f.pick([4000, 12000]));
  if (f.chance(0.05)) headers["X-Request-Id"] = f.pick(["", "ok-id", "bad id", "x".repeat(500)]);
  if (f.chance(0.05)) headers["Last-Event-ID"] = f.pick(["", "0", "garbage", "1e400"]);
  if (f.chance(0.05)) headers["Content-Encoding"] = f.pick(["gzip", "br", "identity"]);
  if (body !== undefined) headers["Content-Length"] = String(body.length);
  return headers;
}

describe("REST fuzz", () => {
  it(`never answers 5xx, and every 4xx has the error body (seed ${seed})`, async () => {
    console.log(`[rest-fuzz] seed ${seed} (reproduce with AGENTBUS_FUZZ_SEED=${seed}), ${TOTAL} requests over ${routes.length} routes`);
    const f = new Fuzzer(prng(seed));
    // Generated up front, in order, so a seed gives the same requests whatever the timing.
    const plan: Sent[] = [];
    for (let i = 0; i < TOTAL; i++) {
      const route = routes[i % routes.length]!;
      const body = fuzzBody(f, route);
      const names = fieldNames(route.method);
      plan.push({ route: `${route.httpMethod} ${route.template.template}`, method: route.httpMethod, path: fuzzPath(f, route) + fuzzQuery(f, names), headers: fuzzHeaders(f, body), body });
    }

    const problems: string[] = [];
    const statuses = new Map<string, number>();
    const perRoute = new Map<string, number>();
    let clientErrors = 0;
    let next = 0;
    const describeReq = (s: Sent) =>
      `${s.method} ${s.path.slice(0, 200)} headers=${JSON.stringify(Object.fromEntries(Object.entries(s.headers).map(([k, v]) => [k, v.slice(0, 60)])))} body=${s.body?.subarray(0, 200).toString("utf8") ?? "-"}`;

    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= plan.length) return;
        const sent = plan[i]!;
        if (i > 0 && i % 500 === 0) await refreshFixtures();
        const answer = await send(sent);
        if ("clientError" in answer) {
          if (!answer.clientError.startsWith("unsendable")) problems.push(`#${i} ${answer.clientError}: ${describeReq(sent)}`);
          clientErrors++;
          continue;
        }
        statuses.set(String(answer.status), (statuses.get(String(answer.status)) ?? 0) + 1);
        perRoute.set(sent.route, (perRoute.get(sent.route) ?? 0) + 1);
        if (answer.status >= 500) {
          problems.push(`#${i} ${answer.status} ${answer.body.toString("utf8").slice(0, 300)} for ${describeReq(sent)}`);
          continue;
        }
        if (answer.status >= 400) {
          let parsed: { error?: unknown; message?: unknown } | undefined;
          try {
            parsed = JSON.parse(answer.body.toString("utf8")) as typeof parsed;
          } catch {
            parsed = undefined;
          }
          const ok =
            answer.contentType.startsWith("application/json") &&
            typeof parsed?.error === "string" &&
            typeof parsed.message === "string" &&
            (parsed.error in errorCatalog || parsed.error === "api_key_required");
          if (!ok) problems.push(`#${i} ${answer.status} bad error body ${JSON.stringify(answer.body.toString("utf8").slice(0, 200))} for ${describeReq(sent)}`);
        }
        // A revoked key is replaced so later requests still get past authentication.
        if (sent.method === "DELETE" && sent.path.startsWith("/v1/keys/me") && answer.status < 300) {
          const idx = keys.indexOf(sent.headers["X-API-Key"] ?? "");
          if (idx >= 0) keys[idx] = await mintKey(server.url);
        }
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `[rest-fuzz] ${TOTAL} requests in ${seconds.toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; unsendable ${clientErrors}`,
    );

    expect(problems.slice(0, 20), `seed ${seed}: ${problems.length} problems`).toEqual([]);
    // Every route was reached.
    expect(perRoute.size).toBe(new Set(routes.map((r) => `${r.httpMethod} ${r.template.template}`)).size);
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
  }, 120_000);
});

/**
 * metadata_schema inputs that cost the service CPU: a pattern with catastrophic
 * backtracking and a schema near the body limit
 * (docs/decisions.md#schemas-off-thread): each answers without a 5xx, and the
 * test's timeout bounds them.
 */
describe("metadata_schema fuzz", () => {
  it("catastrophic patterns and huge schemas answer without a 5xx, in the error shape", async () => {
    const key = keys[0]!;
    const answers: Array<{ what: string; status: number; body: Record<string, unknown> }> = [];
    const note = (what: string, res: { status: number; body: Record<string, unknown> }) => answers.push({ what, ...res });
    const schema = { type: "object", properties: { a: { type: "string", pattern: "^(a+)+$" } } };
    const created = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: "redos", mode: "broadcast", metadata_schema: schema } });
    note("create with a catastrophic pattern", created as never);
    if (created.status === 201) {
      // Backtracking doubles per character: 29 a's cost ~10 s and 60 would
      // outlast the test's timeout without linear-time matching.
      for (const n of [20, 29, 60, 10_000]) {
        const body = { content: "x", metadata: { a: `${"a".repeat(n)}!` } };
        note(`post against the pattern (${n})`, await rest(server.url, "POST", `/v1/channels/${created.body.id}/messages`, { key, body }));
      }
    }
    // Near the 64 KiB body limit: ~1500 properties, each with its own pattern.
    const properties: Record<string, unknown> = {};
    for (let i = 0; JSON.stringify(properties).length < MAX_BODY - 2048; i++) properties[`p${i}`] = { type: "string", pattern: `^(x${i}|y+)+$`, maxLength: i };
    note("create with a huge schema", await rest(server.url, "POST", "/v1/channels", { key, body: { name: "huge", mode: "broadcast", metadata_schema: { type: "object", properties } } }));

    for (const a of answers) {
      expect(a.status, `${a.what}: ${JSON.stringify(a.body).slice(0, 300)}`).toBeLessThan(500);
      if (a.status >= 400) expect(Object.keys(errorCatalog)).toContain(a.body.error);
    }
  }, 120_000);
});

/** A request message with every field set, strings and numbers poisoned where the fuzzer chooses. */
function poisonedMessage(f: Fuzzer, desc: DescMessage, depth = 0): Message {
  const message = create(desc) as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    if (f.chance(0.2)) continue;
    let value: unknown;
    switch (field.fieldKind) {
      case "scalar":
        value = poisonedScalar(f, field.scalar);
        break;
      case "enum":
        value = f.int(4);
        break;
      case "list":
        if (field.listKind === "scalar") value = [poisonedScalar(f, field.scalar), poisonedScalar(f, field.scalar)];
        break;
      case "map":
        break;
      case "message":
        if (field.message.typeName === "google.protobuf.Struct") {
          value = f.pick<Record<string, unknown>>([{ "k\u0000": 1 }, { n: Infinity }, { a: [Number.NaN] }, { a: { b: "x\u0000" } }, { ok: 1 }]);
        } else if (!field.message.typeName.startsWith("google.") && depth < 2) {
          value = poisonedMessage(f, field.message, depth + 1);
        }
        break;
    }
    if (value === undefined) continue;
    if (field.oneof) message[field.oneof.localName] = { case: field.localName, value };
    else message[field.localName] = value;
  }
  return message as unknown as Message;
}

function poisonedScalar(f: Fuzzer, type: ScalarType): unknown {
  switch (type) {
    case ScalarType.STRING:
      return f.pick(["a\u0000b", "\u0000", "ok", f.string(6)]);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return f.pick([Number.NaN, Infinity, -Infinity, 1.5]);
    case ScalarType.BOOL:
      return f.chance(0.5);
    case ScalarType.BYTES:
      return new Uint8Array([0, 255, 1]);
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return BigInt(f.int(1000));
    default:
      return f.int(1000);
  }
}

/** Bytes that are not a valid message, or barely: truncated, bad wire types, invalid UTF-8, random. */
function garbageBytes(f: Fuzzer): Uint8Array {
  switch (f.int(6)) {
    case 0:
      return new Uint8Array([0x0a, 0x05, 0x61]); // a string field cut short
    case 1:
      return new Uint8Array([0x0a, 0x02, 0xc3, 0x28]); // invalid UTF-8 in field 1
    case 2:
      return new Uint8Array([0x0f, 0x01]); // wire type 7
    case 3:
      return new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]); // overlong varint tag
    case 4:
      return new Uint8Array(Array.from({ length: 1 + f.int(64) }, () => f.int(256)));
    default:
      return new Uint8Array([0x12, 0xff, 0xff, 0xff, 0x0f]); // a length far past the end
  }
}

describe("gRPC fuzz", () => {
  it(`every method answers garbage and poisoned messages with a catalog status, never INTERNAL or UNKNOWN (seed ${seed})`, async () => {
    const f = new Fuzzer(prng(seed ^ 0x5eed));
    const PER_METHOD = 12;
    const plan: Array<{ path: string; body: Buffer; headers: Record<string, string>; streaming: boolean; what: string }> = [];
    for (const service of serviceList) {
      for (const method of service.methods) {
        for (let i = 0; i < PER_METHOD; i++) {
          const garbage = i % 2 === 0;
          const payload = garbage ? garbageBytes(f) : toBinary(method.input, poisonedMessage(f, method.input));
          plan.push({
            path: `/${service.typeName}/${method.name}`,
            body: grpcFrame(payload),
            headers: f.chance(0.8) ? { "x-api-key": f.pick(keys) } : {},
            streaming: method.methodKind !== "unary",
            what: `${garbage ? "garbage" : "poisoned"} ${Buffer.from(payload).toString("hex").slice(0, 80)}`,
          });
        }
      }
    }
    const client = new RawGrpcClient(server.url);
    const problems: string[] = [];
    const statuses = new Map<number, number>();
    let next = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= plan.length) return;
        const call = plan[i]!;
        let answer: RawGrpcAnswer;
        try {
          answer = await client.call(call.path, call.body, call.headers, call.streaming ? 2_000 : 15_000);
        } catch (err) {
          // A stream that opened and stayed open is a valid request being served.
          if (!call.streaming) problems.push(`${call.path} ${call.what}: ${(err as Error).message}`);
          continue;
        }
        statuses.set(answer.grpcStatus, (statuses.get(answer.grpcStatus) ?? 0) + 1);
        if (answer.grpcStatus === 0) continue;
        const bad = answer.grpcStatus === 2 || answer.grpcStatus === 13 || answer.detail === undefined || !(answer.detail.error in errorCatalog);
        if (bad) problems.push(`${call.path} ${call.what}: status ${answer.grpcStatus} ${answer.grpcMessage.slice(0, 120)} detail ${answer.detail?.error}`);
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    client.close();
    console.log(
      `[grpc-fuzz] ${plan.length} calls in ${((performance.now() - started) / 1000).toFixed(1)} s; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`,
    );
    expect(problems.slice(0, 20), `seed ${seed}: ${problems.length} problems`).toEqual([]);
  }, 120_000);
});
