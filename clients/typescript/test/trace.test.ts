/** The client sends the application's active OpenTelemetry context with every call (docs/decisions.md#trace-context). */
import { context, propagation, trace, TraceFlags } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { ChannelMode, type TransportKind } from "../src/index.js";
import { clientWithNewKey } from "./helpers.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  // What an application's OpenTelemetry SDK registers.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(async () => {
  context.disable();
  propagation.disable();
  await server?.close();
});

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID = "00f067aa0ba902b7";

describe.each(["grpc", "connect", "grpc-web"] as TransportKind[])("over %s", (transport) => {
  it("posts a message in the application's active trace", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const channel = await client.channels.createChannel({ name: "traced", mode: ChannelMode.CLAIMABLE });
    const active = trace.setSpanContext(context.active(), { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED, isRemote: false });
    const { message } = await context.with(active, () => client.messages.createMessage({ identifier: channel.id, content: "in a trace" }));
    expect(message?.trace?.traceparent).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
  });

  it("starts no trace of its own outside one: the service starts it", async () => {
    const { client } = await clientWithNewKey(server.url, { transport });
    const channel = await client.channels.createChannel({ name: "untraced", mode: ChannelMode.CLAIMABLE });
    const { message } = await client.messages.createMessage({ identifier: channel.id, content: "no trace" });
    expect(message?.trace?.traceparent).not.toContain(TRACE_ID);
  });
});
