/**
 * RestCallContext keeps HandlerContext's promise about its signal (aborted
 * when the client goes away, when the service shuts down, and when the call
 * ends) while only creating one for handlers that ask.
 */
import { createContextValues } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { RestCallContext } from "../../src/server/rest/call-context.js";

const method = MessageService.method.listMessages;

function context(shutdown = new AbortController()) {
  const url = new URL("/v1/channels/c1/messages?limit=5", "http://agentbus.invalid");
  const ctx = new RestCallContext(method, "GET", new Headers({ "x-api-key": "k" }), createContextValues(), url, shutdown.signal);
  return { ctx, shutdown };
}

describe("RestCallContext", () => {
  it("describes the call like connect's context", () => {
    const { ctx } = context();
    expect(ctx.method).toBe(method);
    expect(ctx.service).toBe(MessageService);
    expect(ctx.protocolName).toBe("rest");
    expect(ctx.requestMethod).toBe("GET");
    expect(ctx.url).toBe("http://agentbus.invalid/v1/channels/c1/messages?limit=5");
    expect(ctx.requestHeader.get("x-api-key")).toBe("k");
    expect(ctx.timeoutMs()).toBeUndefined();
  });

  it("aborts a signal handed out when the call ends, telling whatever still listens", () => {
    const { ctx } = context();
    const signal = ctx.signal;
    let told: unknown;
    signal.addEventListener("abort", () => (told = signal.reason));
    expect(signal.aborted).toBe(false);
    ctx.end();
    expect(signal.aborted).toBe(true);
    expect((told as Error).name).toBe("AbortError");
  });

  it("skips the abort at the end when nothing listens to the signal any more", () => {
    const { ctx } = context();
    const signal = ctx.signal;
    const listener = () => {};
    signal.addEventListener("abort", listener);
    signal.removeEventListener("abort", listener);
    ctx.end();
    expect(signal.aborted).toBe(false);
  });

  it("hands out an aborted signal once the call has ended", () => {
    const { ctx } = context();
    ctx.end();
    expect(ctx.signal.aborted).toBe(true);
  });

  it("aborts when the client goes away, before or after the signal is asked for", () => {
    const early = context().ctx;
    const signal = early.signal;
    early.clientClosed();
    expect(signal.aborted).toBe(true);

    const late = context().ctx;
    late.clientClosed();
    expect(late.signal.aborted).toBe(true);
  });

  it("aborts with the shutdown reason, and stops listening to shutdown when the call ends", () => {
    const { ctx, shutdown } = context();
    const signal = ctx.signal;
    shutdown.abort(new Error("shutting down"));
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe("shutting down");

    const ended = context();
    const endedSignal = ended.ctx.signal;
    ended.ctx.end();
    const reason = endedSignal.reason as unknown;
    ended.shutdown.abort(new Error("later"));
    expect(endedSignal.reason).toBe(reason);
  });

  it("hands out an aborted signal when the service is already shutting down", () => {
    const shutdown = new AbortController();
    shutdown.abort(new Error("down"));
    const { ctx } = context(shutdown);
    expect(ctx.signal.aborted).toBe(true);
    expect((ctx.signal.reason as Error).message).toBe("down");
  });
});
