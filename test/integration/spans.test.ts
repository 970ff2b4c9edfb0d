/**
 * Spans with the standard OpenTelemetry settings (docs/decisions.md#spans):
 * the service, started as a process with OTEL_EXPORTER_OTLP_ENDPOINT
 * pointing at a small OTLP/HTTP receiver on 127.0.0.1, exports one trace
 * that holds a producer's post, the delivery to a worker of another key,
 * the worker's ack and the producer's read of the result, with the
 * statements each ran.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/database.js";
import { eventually } from "../support/eventually.js";
import { createChannel, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mintKey, rest } from "../support/server.js";

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string; boolValue?: boolean };
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  links?: Array<{ traceId: string; spanId: string }>;
}

/** A minimal OTLP/HTTP (JSON) trace receiver: every span it was sent, with the service name. */
class OtlpReceiver {
  readonly spans: Array<OtlpSpan & { service: string }> = [];
  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<OtlpReceiver> {
    const spans: Array<(body: { resourceSpans: unknown[] }) => void> = [];
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        if (req.url === "/v1/traces") for (const take of spans) take(JSON.parse(Buffer.concat(chunks).toString("utf8")) as { resourceSpans: unknown[] });
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end("{}");
      });
    });
    const receiver = new OtlpReceiver(server);
    spans.push((body) => receiver.take(body));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private take(body: { resourceSpans: unknown[] }): void {
    for (const rs of body.resourceSpans as Array<{ resource: { attributes: OtlpAttribute[] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }>) {
      const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? "";
      for (const ss of rs.scopeSpans) for (const span of ss.spans) this.spans.push({ ...span, service });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const attr = (span: OtlpSpan, key: string) => {
  const v = span.attributes?.find((a) => a.key === key)?.value;
  return v?.stringValue ?? (v?.intValue === undefined ? undefined : String(v.intValue));
};
const keyIdOf = (key: string) => key.split(".")[0]!;

let receiver: OtlpReceiver;
let db: TestDatabase;
let svc: ServiceProcess | undefined;
beforeAll(async () => {
  receiver = await OtlpReceiver.start();
  db = await createTestDatabase();
  svc = await startServiceProcess({
    DATABASE_URL: db.url,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: "agentbus-under-test",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  });
}, 60_000);
afterAll(async () => {
  await stopServiceProcess(svc, 5_000);
  await receiver?.close();
  await db?.drop();
});

describe("spans", () => {
  it("put a producer's post, the delivery, the worker's ack and the result read in one trace, across two keys", async () => {
    const url = svc!.url;
    const producer = await mintKey(url, "producer");
    const worker = await mintKey(url, "worker");
    const ch = await createChannel(url, producer);
    const posted = await rest<{ message: MessageJson & { trace: { traceparent: string } } }>(url, "POST", `/v1/channels/${ch}/messages`, { key: producer, body: { content: "summarise" } });
    expect(posted.status).toBe(201);
    const traceparent = posted.body.message.trace.traceparent;
    const traceId = traceparent.slice(3, 35);

    const got = await rest<{ data: Array<ReceivedJson & { message: { trace: { traceparent: string } } }> }>(url, "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body: { lease_seconds: 30 } });
    const lease = got.body.data[0]!;
    expect(lease.message.trace.traceparent).toBe(traceparent);
    // The worker continues the message's trace, as agentbus work and the clients do.
    const ack = await fetch(`${url}/v1/messages/${lease.message.id}/ack`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-API-Key": worker, traceparent },
      body: JSON.stringify({ lease_token: lease.lease_token, result: "a summary" }),
    });
    expect(ack.status).toBe(200);
    const read = await fetch(`${url}/v1/messages/${lease.message.id}`, { headers: { "X-API-Key": producer, traceparent } });
    expect(((await read.json()) as { result: string }).result).toBe("a summary");

    const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    const expected = ["agentbus.v1.MessageService/CreateMessage", "agentbus.deliver", "agentbus.v1.MessageService/AckMessage", "agentbus.v1.MessageService/GetMessage"];
    await eventually(async () => expected.every((name) => inTrace().some((s) => s.name === name)), 10_000);
    const spans = inTrace();
    const named = (name: string) => spans.find((s) => s.name === name)!;
    const post = named("agentbus.v1.MessageService/CreateMessage");
    expect(post.service).toBe("agentbus-under-test");
    expect(attr(post, "agentbus.key_id")).toBe(keyIdOf(producer));
    expect(attr(named("agentbus.v1.MessageService/GetMessage"), "agentbus.key_id")).toBe(keyIdOf(producer));
    expect(attr(named("agentbus.v1.MessageService/AckMessage"), "agentbus.key_id")).toBe(keyIdOf(worker));
    const deliver = named("agentbus.deliver");
    expect(attr(deliver, "agentbus.key_id")).toBe(keyIdOf(worker));
    // The delivery is the child of the post's span, and links to the worker's receive, in the worker's own trace.
    expect(deliver.parentSpanId).toBe(post.spanId);
    const receive = receiver.spans.find((s) => s.name === "agentbus.v1.MessageService/ReceiveMessages" && s.spanId === deliver.links?.[0]?.spanId);
    expect(receive).toBeDefined();
    expect(attr(receive!, "agentbus.key_id")).toBe(keyIdOf(worker));
    // The statements each call ran are its children.
    const statements = spans.filter((s) => attr(s, "db.system") === "postgresql" || attr(s, "db.system.name") === "postgresql");
    expect(statements.some((s) => s.parentSpanId === post.spanId)).toBe(true);
  }, 30_000);
});
