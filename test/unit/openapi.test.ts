/** GET /openapi.json, /llms.txt and docs/operations.md, checked against the route table, the rules and the config they describe. */
import type { DescMethod } from "@bufbuild/protobuf";
import { compileErrors, validate } from "@readme/openapi-parser";
import { Ajv2020 } from "ajv/dist/2020.js";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { A2aHttpEndpoint } from "../../src/server/a2a/http.js";
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import { ScheduleService } from "../../gen/agentbus/v1/schedule_service_pb.js";
import { WaitpointService } from "../../gen/agentbus/v1/waitpoint_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { SecurityService } from "../../gen/agentbus/v1/security_service_pb.js";
import { SessionService } from "../../gen/agentbus/v1/session_service_pb.js";
import { configVariables } from "../../src/platform/config.js";
import { errorCatalog, isErrorCode } from "../../src/model/errors.js";
import { renderLlmsTxt } from "../../src/server/docs/llms.js";
import { EXTRA_SUCCESS_STATUSES, HTTP_BODY_MEDIA_TYPES, buildOpenApiDocument, openApiPath, type OpenApiDocument } from "../../src/server/docs/openapi.js";
import type { JsonObject } from "../../src/model/json.js";
import { RestRoutes } from "../../src/server/rest/routes.js";
import { rulesOf } from "../../src/server/rpc/method-rules.js";

const services = [KeyService, ChannelService, MessageService, ActorService, AdminService, JobService, SessionService, LimitService, SecurityService, WaitpointService, ScheduleService];
const routes = new RestRoutes(services).routes;
const doc: OpenApiDocument = buildOpenApiDocument(services);
const methods = new Map<string, DescMethod>(services.flatMap((s) => s.methods.map((m) => [`${s.typeName}.${m.name}`, m] as const)));

const operationOf = (httpMethod: string, template: string): JsonObject | undefined =>
  doc.paths[openApiPath(template)]?.[httpMethod.toLowerCase()];

const asObject = (value: unknown): JsonObject => value as JsonObject;

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1 (@readme/openapi-parser)", async () => {
    // validate() dereferences in place; give it a copy.
    const result = await validate(structuredClone(doc) as never);
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
    expect(result.specification).toBe("OpenAPI");
    expect(doc.openapi).toBe("3.1.0");
  });

  it("has every REST route of the route table, with its method, and no REST operation the table lacks", () => {
    for (const route of routes) {
      const op = operationOf(route.httpMethod, route.template.template);
      expect(op, `${route.httpMethod} ${route.template.template}`).toBeDefined();
      expect(String(op?.operationId)).toContain(route.method.name);
    }
    const restOps = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).map((verb) => `${verb.toUpperCase()} ${path}`),
    ).filter((op) => !["/", "/health", "/status", "/status.html", "/metrics", "/openapi.json", "/llms.txt", "/agent-guide", "/docs/errors"].includes(op.split(" ")[1] ?? ""));
    expect(restOps.sort()).toEqual(routes.map((r) => `${r.httpMethod} ${openApiPath(r.template.template)}`).sort());
  });

  it("writes custom verbs and path variables as OpenAPI path templates", () => {
    expect(doc.paths["/v1/channels/{identifier}/messages:stream"]?.get).toBeDefined();
    expect(doc.paths["/jobs/{job_id}"]?.get).toBeDefined();
    expect(openApiPath("/v1/{name=projects/*/things/*}:run")).toBe("/v1/{name}:run");
    expect(() => openApiPath("/v1/*/x")).toThrow(/anonymous wildcard/);
  });

  it("declares each path variable as a required path parameter, typed like its field", () => {
    for (const route of routes) {
      const op = operationOf(route.httpMethod, route.template.template);
      const params = (op?.parameters as JsonObject[]).filter((p) => p.in === "path");
      expect(params.map((p) => p.name)).toEqual(route.template.variables);
      for (const p of params) expect(p.required).toBe(true);
    }
    const job = operationOf("GET", "/jobs/{job_id}");
    expect((job?.parameters as JsonObject[])[0]).toMatchObject({ name: "job_id", schema: { type: "integer", format: "int64" } });
  });

  it("lists as query parameters the fields neither the path nor the body binds", () => {
    const list = operationOf("GET", "/v1/channels/{identifier}/messages");
    const query = (list?.parameters as JsonObject[]).filter((p) => p.in === "query");
    expect(query.map((p) => p.name)).toEqual(["since", "cursor", "limit", "wait", "status"]);
    expect(query.find((p) => p.name === "status")?.schema).toMatchObject({ enum: ["unclaimed", "claimed"] });
    expect(query.find((p) => p.name === "wait")?.schema).toMatchObject({ type: "number" });
    // PATCH binds the body to `channel`; update_mask may still come from the query.
    const patch = operationOf("PATCH", "/v1/channels/{identifier}");
    expect((patch?.parameters as JsonObject[]).filter((p) => p.in === "query").map((p) => p.name)).toEqual(["update_mask"]);
    // body "*" leaves nothing to the query string.
    const post = operationOf("POST", "/v1/channels/{identifier}/messages");
    expect((post?.parameters as JsonObject[]).filter((p) => p.in === "query")).toEqual([]);
  });

  it("documents the success status of the rules option, the SSE stream, the PDF and 204", () => {
    for (const route of routes) {
      const op = operationOf(route.httpMethod, route.template.template);
      const responses = asObject(op?.responses);
      expect(Object.keys(responses), route.template.template).toContain(String(rulesOf(route.method).successStatus));
    }
    expect(Object.keys(asObject(operationOf("POST", "/v1/keys")?.responses))).toContain("201");
    expect(Object.keys(asObject(operationOf("POST", "/v1/pdf/generate")?.responses))).toContain("202");
    expect(Object.keys(asObject(operationOf("POST", "/v1/channels/{identifier}/access-requests")?.responses))).toEqual(
      expect.arrayContaining(["200", "202"]),
    );
    const deleted = asObject(asObject(operationOf("DELETE", "/v1/channels/{identifier}")?.responses)["204"]);
    expect(deleted.content).toBeUndefined();
    const stream = asObject(asObject(operationOf("GET", "/v1/channels/{identifier}/messages:stream")?.responses)["200"]);
    expect(Object.keys(asObject(stream.content))).toEqual(["text/event-stream"]);
    const pdf = asObject(asObject(operationOf("GET", "/v1/pdf/{job_id}")?.responses)["200"]);
    expect(Object.keys(asObject(pdf.content))).toEqual(["application/pdf"]);
  });

  it("names its run-time tables after real methods, and gives every HttpBody method a media type", () => {
    for (const name of [...Object.keys(EXTRA_SUCCESS_STATUSES), ...Object.keys(HTTP_BODY_MEDIA_TYPES)]) expect(methods.has(name), name).toBe(true);
    for (const [name, method] of methods) {
      if (method.output.typeName === "google.api.HttpBody") expect(HTTP_BODY_MEDIA_TYPES[name], name).toBeDefined();
    }
  });

  it("applies the rules' auth: no key for AUTH_NONE, the admin token for admin routes, the API key otherwise", () => {
    expect(doc.components.securitySchemes.ApiKeyAuth).toMatchObject({ type: "apiKey", in: "header", name: "X-API-Key" });
    expect(doc.components.securitySchemes.AdminToken).toMatchObject({ type: "apiKey", in: "header", name: "X-Admin-Token" });
    for (const route of routes) {
      const { auth } = rulesOf(route.method);
      const op = operationOf(route.httpMethod, route.template.template);
      const expected = auth === "none" ? [] : auth === "admin_token" ? [{ AdminToken: [] }] : [{ ApiKeyAuth: [] }];
      expect(op?.security, route.template.template).toEqual(expected);
    }
    expect(operationOf("POST", "/v1/keys")?.security).toEqual([]);
  });

  it("offers Idempotency-Key on exactly the operations the idempotency layer keys", () => {
    for (const route of routes) {
      const rules = rulesOf(route.method);
      const keyed = rules.mutates && rules.auth === "api_key" && route.method.methodKind === "unary";
      const op = operationOf(route.httpMethod, route.template.template);
      const has = (op?.parameters as JsonObject[]).some((p) => p.$ref === "#/components/parameters/Idempotency-Key");
      expect(has, `${route.httpMethod} ${route.template.template}`).toBe(keyed);
    }
  });

  it("refers every error response to the one Error schema, with catalog codes", () => {
    const error = doc.components.schemas.Error as JsonObject;
    expect(asObject(asObject(error.properties).error).enum).toEqual(Object.keys(errorCatalog));
    expect(error.required).toEqual(["error", "message", "request_id", "documentation_url"]);
    expect(error.additionalProperties).toBe(false);
    const responses = [
      ...Object.values(doc.components.responses),
      ...Object.values(doc.paths).flatMap((item) => Object.values(item).flatMap((op) => Object.values(asObject(op.responses)))),
    ].map(asObject);
    for (const response of responses) {
      for (const code of (response["x-error-codes"] as string[] | undefined) ?? []) {
        expect(isErrorCode(code), code).toBe(true);
        expect(asObject(response.content)["application/json"]).toEqual({ schema: { $ref: "#/components/schemas/Error" } });
      }
    }
    const list = asObject(operationOf("GET", "/v1/channels/{identifier}/messages")?.responses);
    expect(list["422"]).toMatchObject({ "x-error-codes": expect.arrayContaining(["invalid_limit", "invalid_wait", "invalid_status"]) });
    expect(list["401"]).toEqual({ $ref: "#/components/responses/401-unauthorized" });
    expect(list.default).toEqual({ $ref: "#/components/responses/OtherError" });
  });

  it("renders responses as the REST layer does: snake_case, closed objects, every field required, enums lowercase, int64 as integers", () => {
    const schemas = doc.components.schemas;
    const channel = schemas.Channel as JsonObject;
    expect(channel.additionalProperties).toBe(false);
    expect(channel.required).toEqual(Object.keys(asObject(channel.properties)));
    expect(Object.keys(asObject(channel.properties))).toContain("created_by_key_id");
    expect(asObject(asObject(channel.properties).mode).enum).toEqual(["broadcast", "claimable", null]);
    expect(asObject(asObject(channel.properties).max_messages).type).toEqual(["integer", "null"]);
    const job = asObject(schemas.Job);
    expect(asObject(asObject(job.properties).job_id)).toMatchObject({ type: "integer", format: "int64" });
    expect(Object.keys(asObject(job.properties))).toContain("result"); // the oneof, under its own name
    const message = asObject(asObject(schemas.Message).properties);
    expect(asObject(message.created_at).pattern).toBe("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$");
    expect(asObject(message.metadata).type).toEqual(["object", "null"]);
  });

  it("has schemas Ajv compiles in strict JSON Schema 2020-12 mode", () => {
    const ajv = new Ajv2020({ strict: true, formats: { "date-time": true, int32: true, int64: true, float: true, double: true } });
    const text = JSON.stringify({ $id: "urn:agentbus:openapi", $defs: doc.components.schemas }).replaceAll('"#/components/schemas/', '"urn:agentbus:openapi#/$defs/');
    ajv.addSchema(JSON.parse(text) as JsonObject);
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => ajv.getSchema(`urn:agentbus:openapi#/$defs/${name}`), name).not.toThrow();
    }
  });
});

describe("/llms.txt", () => {
  const text = renderLlmsTxt(services, "http://bus.example:8080");
  const matcher = new RestRoutes(services);

  it("shows the MCP set-up for both transports at the address the request came to", () => {
    expect(text).toContain(`"url": "http://bus.example:8080/mcp"`);
    expect(text).toContain(`"AGENTBUS_URL": "http://bus.example:8080"`);
    expect(text).toContain(`"args": ["/path/to/agentbus/bin/agentbus.mjs", "mcp"]`);
    expect(text).not.toContain("127.0.0.1");
  });

  it("covers every concept an agent needs", () => {
    for (const concept of [
      "POST /v1/keys",
      "X-API-Key",
      "claimable",
      "broadcast",
      "next_cursor",
      "since",
      "wait=",
      "/claim",
      "/ack",
      "claim-with-lease",
      "heartbeat",
      "release",
      "messages:stream",
      "WatchMessages",
      "mentions",
      "webhook",
      "Idempotency-Key",
      '"error"',
      "suggestion",
      "429",
      "Retry-After",
      "503",
      "store_unavailable",
      "backoff",
      "/openapi.json",
      "/docs/errors",
      "docs/operations.md",
    ]) {
      expect(text, concept).toContain(concept);
    }
  });

  it("uses only real routes in its curl examples", () => {
    const calls = [...text.matchAll(/curl (?:-s |-N )*(?:-X (\w+) )?"?\$B(\/[^\s"?]*)/g)];
    expect(calls.length).toBeGreaterThan(8);
    for (const [, verb, path] of calls) {
      // Shell variables stand for ids.
      const concrete = (path ?? "").replace(/\$[A-Z_]+/g, "x1");
      // A2A's card and JSON-RPC endpoint are served beside the route table.
      if (A2aHttpEndpoint.owns(concrete)) continue;
      expect(matcher.match(verb ?? "GET", concrete).kind, `${verb ?? "GET"} ${path}`).toBe("route");
    }
  });

  it("lists every route of the table", () => {
    for (const route of routes) expect(text).toContain(`${route.httpMethod} ${openApiPath(route.template.template)}`);
  });
});

describe("docs/operations.md", () => {
  const text = readFileSync(new URL("../../docs/operations.md", import.meta.url), "utf8");

  it("mentions every configuration variable", () => {
    for (const name of configVariables) expect(text, name).toContain(`\`${name}\``);
  });

  it("is linked from the README", () => {
    expect(readFileSync(new URL("../../README.md", import.meta.url), "utf8")).toContain("docs/operations.md");
  });
});
