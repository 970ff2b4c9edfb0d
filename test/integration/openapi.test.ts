/**
 * GET /openapi.json and /llms.txt from the real server, and the proof that the
 * document describes what the REST layer really sends: real responses of a
 * representative set of routes, validated with Ajv against the document's
 * schema for that route and status (closed objects, so an undocumented field
 * fails as surely as a missing one).
 */
import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import { beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../../src/model/json.js";
import type { OpenApiDocument } from "../../src/server/docs/openapi.js";
import { mintKey, rest, useTestServer, type JsonResponse } from "../support/server.js";

const server = useTestServer();
let doc: OpenApiDocument;
let ajv: Ajv2020;
const SCHEMAS_ID = "urn:agentbus:openapi";

beforeAll(async () => {
  const res = await fetch(`${server.url}/openapi.json`);
  doc = (await res.json()) as OpenApiDocument;
  ajv = new Ajv2020({ strict: true, allErrors: true, formats: { "date-time": true, int32: true, int64: true, float: true, double: true } });
  // The document's refs point into components; Ajv gets them as $defs of one schema.
  const text = JSON.stringify({ $id: SCHEMAS_ID, $defs: doc.components.schemas }).replaceAll('"#/components/schemas/', `"${SCHEMAS_ID}#/$defs/`);
  ajv.addSchema(JSON.parse(text) as JsonObject);
});

const asObject = (value: unknown): JsonObject => value as JsonObject;

/** The documented response of an operation for a status (or `default`), with component refs followed. */
function documentedResponse(method: string, path: string, status: number): JsonObject {
  const op = doc.paths[path]?.[method.toLowerCase()];
  if (op === undefined) throw new Error(`${method} ${path} is not in the document`);
  const responses = asObject(op.responses);
  let response = asObject(responses[String(status)] ?? responses.default);
  if (typeof response.$ref === "string") {
    response = asObject(doc.components.responses[response.$ref.replace("#/components/responses/", "")]);
  }
  return response;
}

const validators = new Map<string, ValidateFunction>();

function validatorFor(method: string, path: string, status: number): ValidateFunction {
  const key = `${method} ${path} ${status}`;
  let validator = validators.get(key);
  if (validator === undefined) {
    const content = asObject(documentedResponse(method, path, status).content);
    const schema = asObject(asObject(content["application/json"]).schema);
    const text = JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${SCHEMAS_ID}#/$defs/`);
    validator = ajv.compile(JSON.parse(text) as JsonObject);
    validators.set(key, validator);
  }
  return validator;
}

/**
 * Asserts that a real response matches the document: its status is
 * documented for the route (explicitly, or as an error under `default`) and
 * its body validates against that status's schema.
 */
function expectDocumented(method: string, path: string, res: JsonResponse<unknown>): void {
  const responses = asObject(doc.paths[path]?.[method.toLowerCase()]?.responses);
  const explicit = String(res.status) in responses;
  expect(explicit || res.status >= 400, `${method} ${path} answered ${res.status}, which is not documented`).toBe(true);
  const validate = validatorFor(method, path, res.status);
  expect(validate(res.body), `${method} ${path} ${res.status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(res.body)}`).toBe(true);
}

async function call(
  method: string,
  template: string,
  concrete: string,
  options: Parameters<typeof rest>[3] = {},
): Promise<JsonResponse<Record<string, unknown>>> {
  const res = await rest(server.url, method, concrete, options);
  expectDocumented(method, template, res);
  return res;
}

describe("GET /openapi.json", () => {
  it("is served as JSON and is valid OpenAPI 3.1", async () => {
    const res = await fetch(`${server.url}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json; charset=utf-8");
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
    expect(Object.keys(doc.paths)).toContain("/v1/channels/{identifier}/messages:stream");
  });
});

describe("GET /", () => {
  it("answers JSON the document describes", async () => {
    const res = await call("GET", "/", "/");
    expect(res.status).toBe(200);
  });
});

describe("GET /llms.txt", () => {
  it("is served as text/plain markdown", async () => {
    const res = await fetch(`${server.url}/llms.txt`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    const text = await res.text();
    expect(text.startsWith("# agentbus\n")).toBe(true);
    expect(text).toContain("/openapi.json");
  });
});

describe("real REST responses match the document", () => {
  it("keys, channels, messages, claims, leases and acks", async () => {
    const minted = await call("POST", "/v1/keys", "/v1/keys", { body: { agent_label: "openapi-owner" } });
    expect(minted.status).toBe(201);
    const key = String(minted.body.key);
    const other = await mintKey(server.url, "openapi-other");
    await call("GET", "/v1/keys/me", "/v1/keys/me", { key });

    const created = await call("POST", "/v1/channels", "/v1/channels", {
      key,
      body: { name: "openapi-work", mode: "claimable", metadata_schema: { type: "object" }, max_messages: 100 },
    });
    expect(created.status).toBe(201);
    const ch = String(created.body.id);
    await call("GET", "/v1/channels/{identifier}", `/v1/channels/${ch}`, { key });
    await call("GET", "/v1/channels", "/v1/channels?limit=5", { key });
    await call("PATCH", "/v1/channels/{identifier}", `/v1/channels/${ch}`, { key, body: { description: "queue", pinned_message: null } });
    await call("POST", "/v1/channels/{identifier}/aliases", `/v1/channels/${ch}/aliases`, { key, body: { alias: "openapi-alias" } });

    const posted = await call("POST", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages`, {
      key,
      headers: { "Idempotency-Key": "openapi-1" },
      body: { content: "task 1", metadata: { n: 1 }, actor_label: "writer" },
    });
    expect(posted.status).toBe(201);
    const replay = await call("POST", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages`, {
      key,
      headers: { "Idempotency-Key": "openapi-1" },
      body: { content: "task 1", metadata: { n: 1 }, actor_label: "writer" },
    });
    expect(replay.headers.get("x-idempotent-replay")).toBe("true");
    const second = await call("POST", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages`, { key, body: { content: "task 2" } });
    const msg = String(asObject(posted.body.message).id);
    const msg2 = String(asObject(second.body.message).id);

    await call("GET", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages?since=0&limit=10&status=unclaimed`, { key });
    const empty = await call("GET", "/v1/channels/{identifier}/messages", `/v1/channels/openapi-alias/messages?since=${encodeURIComponent(String(second.body.next_cursor))}`, { key });
    expect(empty.body.data).toEqual([]);

    const claimed = await call("POST", "/v1/messages/{message_id}/claim", `/v1/messages/${msg}/claim`, { key, body: {} });
    expect(claimed.body.status).toBe("claimed");
    const conflict = await call("POST", "/v1/messages/{message_id}/claim", `/v1/messages/${msg}/claim`, { key: other, body: {} });
    expect(conflict.status).toBe(409);
    const acked = await call("POST", "/v1/messages/{message_id}/ack", `/v1/messages/${msg}/ack`, { key, body: {} });
    expect(acked.body.status).toBe("acknowledged");
    // Claimed and acknowledged: claimed_by, claimed_at and acknowledged_by are filled in.
    await call("GET", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages?status=claimed`, { key });

    const lease = await call("POST", "/v1/messages/{message_id}/claim-with-lease", `/v1/messages/${msg2}/claim-with-lease`, { key, body: { lease_seconds: 60 } });
    expect(lease.status).toBe(200);
    await call("POST", "/v1/leases/{lease_token}/heartbeat", `/v1/leases/${String(lease.body.lease_token)}/heartbeat`, { key, body: { lease_seconds: 60 } });
    await call("POST", "/v1/messages/{message_id}/release", `/v1/messages/${msg2}/release`, { key, body: {} });
    await call("DELETE", "/v1/messages/{message_id}", `/v1/messages/${msg2}`, { key });
    await call("GET", "/v1/channels/{identifier}/history", `/v1/channels/${ch}/history`, { key });
    await call("GET", "/v1/channels/{identifier}/members", `/v1/channels/${ch}/members`, { key });

    const actor = await call("POST", "/v1/actors", "/v1/actors", { key, body: { name: "openapi-bot", metadata: { v: 1 } } });
    await call("GET", "/v1/actors/{identifier}", `/v1/actors/${String(actor.body.id)}`, { key });

    // Access requests: 200 on an open channel, 202 while pending on a restricted one.
    const open = await call("POST", "/v1/channels/{identifier}/access-requests", `/v1/channels/${ch}/access-requests`, { key: other, body: {} });
    expect(open.status).toBe(200);
    const restricted = await call("POST", "/v1/channels", "/v1/channels", { key, body: { name: "openapi-private", mode: "broadcast", access: "restricted" } });
    const pending = await call("POST", "/v1/channels/{identifier}/access-requests", `/v1/channels/${String(restricted.body.id)}/access-requests`, {
      key: other,
      body: { reason: "please" },
    });
    expect(pending.status).toBe(202);
    await call("GET", "/v1/channels/{identifier}/access-requests", `/v1/channels/${String(restricted.body.id)}/access-requests`, { key });

    const deleted = await rest(server.url, "DELETE", `/v1/channels/${String(restricted.body.id)}`, { key });
    expect(deleted.status).toBe(204);
    expect(Object.keys(asObject(documentedResponse("DELETE", "/v1/channels/{identifier}", 204)))).not.toContain("content");
  });

  it("shared limits, and a channel and messages with groups, priorities and limits (issue 28)", async () => {
    const key = await mintKey(server.url, "openapi-groups");
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/limits", "/v1/limits/{name}"]));
    const limit = await call("POST", "/v1/limits", "/v1/limits", { key, body: { name: "openapi-model", max_in_flight: 5, rate: { count: 100, per_seconds: 60 } } });
    expect(limit.status).toBe(201);
    await call("POST", "/v1/limits", "/v1/limits", { key, body: { name: "openapi-calls", rate: { count: 10, per_seconds: 1 } } });
    await call("GET", "/v1/limits", "/v1/limits", { key });
    await call("PATCH", "/v1/limits/{name}", "/v1/limits/openapi-calls", { key, body: { max_in_flight: 3, rate: null } });

    const created = await call("POST", "/v1/channels", "/v1/channels", {
      key,
      body: { name: "openapi-groups", mode: "claimable", group_concurrency: 2, dispatch: "fair", priority_aging_seconds: 30, limits: ["openapi-model"] },
    });
    expect(created.body).toMatchObject({ group_concurrency: 2, dispatch: "fair", priority_aging_seconds: 30, limits: ["openapi-model"] });
    const ch = String(created.body.id);
    await call("PATCH", "/v1/channels/{identifier}", `/v1/channels/${ch}`, { key, body: { group_concurrency: null, dispatch: "fifo" } });
    const posted = await call("POST", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages`, {
      key,
      body: { content: "task", group_key: "repo-a", priority: 1, ttl_seconds: 600, limits: ["openapi-calls"] },
    });
    expect(posted.body.message).toMatchObject({ group_key: "repo-a", priority: 1, limits: ["openapi-calls"] });
    await call("POST", "/v1/channels/{identifier}/messages:batchCreate", `/v1/channels/${ch}/messages:batchCreate`, {
      key,
      body: { messages: [{ content: "b1", group_key: "repo-b", priority: 5 }, { content: "b2" }] },
    });
    const received = await call("POST", "/v1/channels/{identifier}/messages:receive", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 1 } });
    const task = String(asObject(asObject((received.body.data as JsonObject[])[0]).message).id);
    await call("GET", "/v1/channels/{identifier}/stats", `/v1/channels/${ch}/stats`, { key });
    await call("GET", "/v1/limits/{name}", "/v1/limits/openapi-model", { key });
    await call("POST", "/v1/messages/{message_id}/release", `/v1/messages/${task}/release`, { key, body: { priority: 2 } });
    const invalid = await call("POST", "/v1/channels/{identifier}/messages", `/v1/channels/${ch}/messages`, { key, body: { content: "x", priority: 9 } });
    expect(invalid.body.error).toBe("invalid_priority");
    const deleted = await rest(server.url, "DELETE", "/v1/limits/openapi-calls", { key });
    expect(deleted.status).toBe(204);
    const gone = await call("GET", "/v1/limits/{name}", "/v1/limits/openapi-calls", { key });
    expect(gone.body.error).toBe("limit_not_found");
  });

  it("error bodies, documented by status or under default", async () => {
    const key = await mintKey(server.url, "openapi-errors");
    const unauthorized = await call("GET", "/v1/keys/me", "/v1/keys/me");
    expect(unauthorized.status).toBe(401);
    const notFound = await call("GET", "/v1/channels/{identifier}", "/v1/channels/no-such-channel", { key });
    expect(notFound.body.error).toBe("channel_not_found");
    const badLimit = await call("GET", "/v1/channels/{identifier}/messages", "/v1/channels/x/messages?limit=abc", { key });
    expect(badLimit.status).toBe(422);
    const unknownQuery = await call("GET", "/v1/channels/{identifier}/messages", "/v1/channels/x/messages?bogus=1", { key });
    expect(unknownQuery.body).toMatchObject({ error: "invalid_fields", fields: ["bogus"] });
    const badJson = await call("POST", "/v1/channels", "/v1/channels", { key, rawBody: "{nope" });
    expect(badJson.status).toBe(400);
    const missing = await call("POST", "/v1/channels", "/v1/channels", { key, body: { name: "x" } });
    expect(missing.body).toMatchObject({ error: "missing_field", field: "mode" });
    const admin = await call("POST", "/v1/admin/channels/{identifier}/pause", "/v1/admin/channels/x/pause", { body: {} });
    expect(admin.status).toBe(403);
    const job = await call("GET", "/jobs/{job_id}", "/jobs/999999", { key });
    expect(job.body.error).toBe("job_not_found");
  });

  it("would catch an undocumented, a missing or a mistyped field (the check has teeth)", async () => {
    const key = await mintKey(server.url, "openapi-teeth");
    const res = await rest(server.url, "GET", "/v1/keys/me", { key });
    const check = validatorFor("GET", "/v1/keys/me", 200);
    expect(check(res.body)).toBe(true);
    expect(check({ ...res.body, extra: 1 })).toBe(false);
    const { created_at: _dropped, ...missing } = res.body;
    expect(check(missing)).toBe(false);
    expect(check({ ...res.body, created_at: "2026-01-01T00:00:00Z" })).toBe(false); // six fractional digits
    const error = validatorFor("GET", "/v1/keys/me", 401);
    expect(error({ error: "unauthorized", message: "x", request_id: "r", documentation_url: "/docs/errors#unauthorized", details: {} })).toBe(false);
  });

  it("the SSE route answers text/event-stream", async () => {
    const key = await mintKey(server.url, "openapi-sse");
    const ch = String((await rest(server.url, "POST", "/v1/channels", { key, body: { name: "openapi-feed", mode: "broadcast" } })).body.id);
    const controller = new AbortController();
    const res = await fetch(`${server.url}/v1/channels/${ch}/messages:stream`, { headers: { "X-API-Key": key }, signal: controller.signal });
    expect(res.status).toBe(200);
    const documented = asObject(documentedResponse("GET", "/v1/channels/{identifier}/messages:stream", 200).content);
    expect(res.headers.get("content-type")?.split(";")[0]).toBe(Object.keys(documented)[0]);
    controller.abort();
    await res.body?.cancel().catch(() => undefined);
  });
});
