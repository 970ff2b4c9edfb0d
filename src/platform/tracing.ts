/**
 * Spans through OpenTelemetry's API (docs/decisions.md#spans). The SDK is
 * started by src/telemetry.ts only when the standard OTEL_ settings ask for
 * it; until then `tracingEnabled()` is false and every helper here returns
 * at once, so a service without tracing pays one boolean test per call.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Tracer } from "@opentelemetry/api";
import type { TraceContext } from "../model/trace.js";

let enabled = false;

export const tracingEnabled = (): boolean => enabled;

/** Called once the SDK is registered. */
export function enableTracing(): void {
  enabled = true;
}

export const tracer = (): Tracer => trace.getTracer("agentbus");

/** A stored trace context as a parent context (a remote span). */
export function contextOf(stored: TraceContext | null | undefined): Context {
  if (stored === null || stored === undefined) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: stored.traceparent };
  if (stored.tracestate !== null) carrier.tracestate = stored.tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** The request's headers as a parent context. */
export function contextOfHeaders(headers: Headers): Context {
  return propagation.extract(ROOT_CONTEXT, headers, {
    get: (carrier, key) => carrier.get(key) ?? undefined,
    keys: (carrier) => [...carrier.keys()],
  });
}

/** The active span's context as a W3C trace context (what a message posted now keeps); undefined when no span records. */
export function activeTrace(tracestate: string | null): TraceContext | undefined {
  if (!enabled) return undefined;
  const span = trace.getSpan(context.active());
  if (span === undefined || !span.isRecording()) return undefined;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { traceparent: `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`, tracestate };
}

/** Runs `fn` with a stored trace context as the active parent (a webhook's message), when spans are on. */
export function withStoredTrace<T>(stored: TraceContext | null, fn: () => T): T {
  return enabled && stored !== null ? context.with(contextOf(stored), fn) : fn();
}

/** Runs a job's work in a span of the trace it was submitted in. */
export async function inJobSpan<T>(kind: string, jobId: number, attempt: number, stored: TraceContext | null, run: () => Promise<T>): Promise<T> {
  if (!enabled) return run();
  const parent = contextOf(stored);
  const span = tracer().startSpan(`job ${kind}`, { kind: SpanKind.CONSUMER, attributes: { "agentbus.job_id": jobId, "agentbus.job_kind": kind, "agentbus.attempt": attempt } }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), run);
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.name : "error" });
    throw err;
  } finally {
    span.end();
  }
}
