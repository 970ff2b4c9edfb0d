/**
 * Values a request carries through the handlers, whichever protocol it came
 * in on. Connect fills them from the Node request; the REST transcoder fills
 * them itself.
 */
import { createContextKey, type HandlerContext } from "@connectrpc/connect";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { traceFrom, type TraceContext } from "../model/trace.js";
import { activeTrace } from "../platform/tracing.js";

export const callerKey = createContextKey<Caller | undefined>(undefined, { description: "authenticated caller" });
/** A key's request budget in the current window. */
export interface RequestBudget {
  limit: number;
  remaining: number;
  resetSeconds: number;
  windowSeconds: number;
}

/** The caller's request budget as the pipeline's rate limit left it; undefined when there is no limit. */
export const requestBudgetKey = createContextKey<RequestBudget | undefined>(undefined, { description: "request budget" });
export const requestIdKey = createContextKey<string>("", { description: "request id" });
export const clientAddressKey = createContextKey<string>("", { description: "client address" });
/** The validated URL the request came to (server/base-url.ts), for links in answers. */
export const baseUrlKey = createContextKey<string>("", { description: "base URL" });
/**
 * Set by the REST transcoder on streaming calls: the handler calls it once
 * its checks have passed, so the transcoder can commit to a 200 event stream
 * (earlier failures still get a proper error status).
 */
export const streamOpenKey = createContextKey<(() => void) | undefined>(undefined, { description: "stream opened" });

/** A handler may override the REST success status (e.g. 200 instead of 202). */
export const httpStatusKey = createContextKey<number | undefined>(undefined, { description: "REST status override" });

/**
 * Set by the call pipeline on every call with a key: its signal aborts, with
 * the refusal as reason, once the key is revoked or loses the call's scope
 * (docs/decisions.md#revocation). Started only when a handler asks.
 */
export interface CallerWatch {
  readonly signal: AbortSignal;
}

export const callerWatchKey = createContextKey<CallerWatch | undefined>(undefined, { description: "caller watch" });

/**
 * What a call that waits (a long-poll, a watch stream) waits on: the client
 * going away, the server stopping, or its key no longer allowing it.
 */
export function callSignal(ctx: HandlerContext): AbortSignal {
  const watch = ctx.values.get(callerWatchKey);
  return watch === undefined ? ctx.signal : AbortSignal.any([ctx.signal, watch.signal]);
}

export function callerOf(ctx: HandlerContext): Caller {
  const caller = ctx.values.get(callerKey);
  // The pipeline authenticates before any handler runs; reaching this is a wiring bug.
  if (!caller) throw new ApiError("unauthorized");
  return caller;
}

/**
 * The trace context what the request writes keeps (docs/decisions.md#trace-context):
 * with spans on, the RPC's own span (a child of the caller's), so whoever
 * continues from the message continues from this call; otherwise the
 * context the request carries (headers or gRPC metadata), if any valid one.
 */
export function traceOf(ctx: HandlerContext): TraceContext | undefined {
  const carried = traceFrom(ctx.requestHeader.get("traceparent"), ctx.requestHeader.get("tracestate"));
  return activeTrace(carried?.tracestate ?? null) ?? carried;
}
