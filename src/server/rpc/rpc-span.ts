/**
 * One span per RPC, whatever protocol carried it (docs/decisions.md#spans):
 * a server span named `<service>/<method>`, the child of the caller's
 * traceparent, active while the handler runs so that the statements it runs
 * and the requests it makes are its children, with the caller's key and the
 * catalog's error code as attributes.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { context, SpanKind, SpanStatusCode, trace, type Span } from "@opentelemetry/api";
import { ApiError } from "../../model/errors.js";
import { contextOfHeaders, tracer, tracingEnabled } from "../../platform/tracing.js";
import { callerKey } from "../../protocol/context.js";

function open(method: DescMethod, ctx: HandlerContext) {
  const parent = contextOfHeaders(ctx.requestHeader);
  const span = tracer().startSpan(
    `${method.parent.typeName}/${method.name}`,
    { kind: SpanKind.SERVER, attributes: { "rpc.system": "agentbus", "rpc.service": method.parent.typeName, "rpc.method": method.name } },
    parent,
  );
  return { span, active: trace.setSpan(parent, span) };
}

function close(span: Span, ctx: HandlerContext, err: unknown): void {
  const caller = ctx.values.get(callerKey);
  if (caller !== undefined) span.setAttribute("agentbus.key_id", caller.keyId);
  if (err !== undefined) {
    const code = err instanceof ApiError ? err.code : "internal_error";
    span.setAttribute("agentbus.error", code);
    if (!(err instanceof ApiError) || err.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  }
  span.end();
}

export async function inRpcSpan<T>(method: DescMethod, ctx: HandlerContext, run: () => Promise<T>): Promise<T> {
  if (!tracingEnabled()) return run();
  const { span, active } = open(method, ctx);
  let failure: unknown;
  try {
    return await context.with(active, run);
  } catch (err) {
    failure = err;
    throw err;
  } finally {
    close(span, ctx, failure);
  }
}

/** The same for a stream: each step of the handler runs in the span. */
export async function* inRpcStreamSpan<T>(method: DescMethod, ctx: HandlerContext, items: () => AsyncIterable<T>): AsyncIterable<T> {
  if (!tracingEnabled()) {
    yield* items();
    return;
  }
  const { span, active } = open(method, ctx);
  let failure: unknown;
  const iterator = context.with(active, () => items()[Symbol.asyncIterator]());
  try {
    for (;;) {
      const next = await context.with(active, () => iterator.next());
      if (next.done === true) return;
      yield next.value;
    }
  } catch (err) {
    failure = err;
    throw err;
  } finally {
    await context.with(active, async () => iterator.return?.());
    close(span, ctx, failure);
  }
}
