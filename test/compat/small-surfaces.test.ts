/**
 * The small things a migrating client or a newcomer meets first (issue 27,
 * item 4 and 5): /agent-guide, /health's api_version, the OpenAPI key scheme's
 * name, HSTS behind a trusted HTTPS proxy, the sandbox channel, and the
 * reference's webhook signature header.
 */
import { afterAll, describe, expect, it } from "vitest";
import { WebhookReceiver } from "../fakes/webhook-receiver.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;

describe("documents", () => {
  it("serves the agent guide at /agent-guide as Markdown, the same text as /llms.txt", async () => {
    const guide = await fetch(`${url()}/agent-guide`);
    expect(guide.status).toBe(200);
    expect(guide.headers.get("content-type")).toMatch(/^text\/markdown/);
    expect(await guide.text()).toBe(await (await fetch(`${url()}/llms.txt`)).text());
  });

  it("reports api_version 1.0 on /health", async () => {
    expect(await (await fetch(`${url()}/health`)).json()).toMatchObject({ status: "ok", api_version: "1.0" });
  });

  it("names the key's security scheme ApiKeyAuth in OpenAPI, and lists the compatibility verbs under their own tag", async () => {
    const doc = (await (await fetch(`${url()}/openapi.json`)).json()) as {
      components: { securitySchemes: Record<string, { name: string }> };
      paths: Record<string, Record<string, { security: unknown[]; tags: string[] }>>;
      tags: Array<{ name: string; description?: string }>;
    };
    expect(doc.components.securitySchemes.ApiKeyAuth).toMatchObject({ name: "X-API-Key" });
    expect(doc.components.securitySchemes.ApiKey).toBeUndefined();
    expect(doc.paths["/v1/tasks/post"]?.post?.security).toEqual([{ ApiKeyAuth: [] }]);
    expect(doc.paths["/v1/tasks/post"]?.post?.tags).toEqual(["CompatService"]);
    expect(doc.tags.find((t) => t.name === "CompatService")?.description).toMatch(/native routes/);
    for (const path of ["/v1/tasks/claim", "/v1/tasks/{id}/result", "/v1/channels/{identifier}/metrics", "/v1/observability/metrics", "/account/usage"]) {
      expect(doc.paths[path], path).toBeDefined();
    }
  });

  it("lists the compatibility routes in /llms.txt as such", async () => {
    const text = await (await fetch(`${url()}/llms.txt`)).text();
    expect(text).toContain("Coming from Backchannel");
    expect(text).toContain("`POST /v1/tasks/post` → 201: CompatService.PostTask [messages:write, channels:write]");
  });
});

describe("HSTS", () => {
  it("is sent when a trusted proxy says the request came over HTTPS", async () => {
    const proxied = await startTestServer({ AGENTBUS_TRUST_PROXY: "true" });
    try {
      const res = await fetch(`${proxied.url}/health`, { headers: { "X-Forwarded-Proto": "https" } });
      expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
      const plain = await fetch(`${proxied.url}/health`, { headers: { "X-Forwarded-Proto": "http" } });
      expect(plain.headers.get("strict-transport-security")).toBeNull();
    } finally {
      await proxied.close();
    }
  });

  it("is not sent when the proxy is not trusted, whatever the header says", async () => {
    const res = await fetch(`${url()}/health`, { headers: { "X-Forwarded-Proto": "https" } });
    expect(res.headers.get("strict-transport-security")).toBeNull();
  });
});

describe("the sandbox channel", () => {
  it("exists from start-up: any new key posts to it and reads it back by the alias sandbox", async () => {
    const a = await mintKey(url());
    const b = await mintKey(url());
    const posted = await rest<{ message: { id: string; channel_id: string } }>(url(), "POST", "/v1/channels/sandbox/messages", { key: a, body: { content: "hello" } });
    expect(posted.status).toBe(201);
    const read = await rest<{ data: Array<{ id: string }> }>(url(), "GET", "/v1/channels/sandbox/messages", { key: b });
    expect(read.body.data.map((m) => m.id)).toContain(posted.body.message.id);
    const channel = await rest<Record<string, unknown>>(url(), "GET", "/v1/channels/sandbox", { key: b });
    expect(channel.body).toMatchObject({ mode: "broadcast", access: "open", discoverable: true, ttl_seconds: 300, max_messages: 500, aliases: ["sandbox"] });
  });

  it("is created once however many replicas start on one database", async () => {
    const others = await Promise.all([startTestServer({ DATABASE_URL: server.databaseUrl }), startTestServer({ DATABASE_URL: server.databaseUrl })]);
    try {
      const key = await mintKey(url());
      const found = await rest<{ data: Array<{ name: string }> }>(url(), "GET", "/v1/channels?limit=100", { key });
      expect(found.body.data.filter((c) => c.name === "sandbox")).toHaveLength(1);
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });

  it("is named on / and in /llms.txt", async () => {
    expect(await (await fetch(`${url()}/`)).json()).toMatchObject({ sandbox: { channel: "sandbox", messages: `${url()}/v1/channels/sandbox/messages` } });
    expect(await (await fetch(`${url()}/llms.txt`)).text()).toContain("## Try it: the sandbox channel");
  });

  it("is not made, nor mentioned, with AGENTBUS_SANDBOX=false", async () => {
    const bare = await startTestServer({ AGENTBUS_SANDBOX: "false" });
    try {
      const key = await mintKey(bare.url);
      expect((await rest(bare.url, "GET", "/v1/channels/sandbox", { key })).status).toBe(404);
      expect(await (await fetch(`${bare.url}/`)).json()).not.toHaveProperty("sandbox");
      expect(await (await fetch(`${bare.url}/llms.txt`)).text()).not.toContain("sandbox channel");
    } finally {
      await bare.close();
    }
  });
});

describe("the reference's webhook signature header", () => {
  const receivers: WebhookReceiver[] = [];
  afterAll(async () => Promise.all(receivers.map((r) => r.close())));

  async function deliveryTo(env: Record<string, string>) {
    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    const running = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true", ...env });
    try {
      const key = await mintKey(running.url);
      const ch = await rest<{ id: string }>(running.url, "POST", "/v1/channels", { key, body: { name: "hooked", mode: "broadcast", webhook_url: receiver.url, webhook_secret: "s3cret" } });
      await rest(running.url, "POST", `/v1/channels/${ch.body.id}/messages`, { key, body: { content: "ping" } });
      return (await receiver.waitFor(1))[0]!;
    } finally {
      await running.close();
    }
  }

  it("carries the same HMAC under AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER as under X-Service-Signature", async () => {
    const request = await deliveryTo({ AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER: "X-Backchannel-Signature" });
    expect(request.headers["x-service-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(request.headers["x-backchannel-signature"]).toBe(request.headers["x-service-signature"]);
  });

  it("is not sent unless asked for", async () => {
    const request = await deliveryTo({});
    expect(request.headers["x-backchannel-signature"]).toBeUndefined();
  });

  it("refuses a setting that is not a header name at start-up", async () => {
    await expect(startTestServer({ AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER: "X Bad: header" })).rejects.toThrow(/AGENTBUS_WEBHOOK_LEGACY_SIGNATURE_HEADER/);
  });
});
