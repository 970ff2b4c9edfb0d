/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the traceparent
 * and tracestate a request carries, kept with each message so that a chain
 * of hand-offs is one trace (docs/decisions.md#trace-context).
 */
import { randomBytes } from "node:crypto";

export interface TraceContext {
  /** `00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>`. */
  traceparent: string;
  /** Vendor entries, passed on as received; null when none came. */
  tracestate: string | null;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
/** The specification's limit on a tracestate a service must pass on. */
export const MAX_TRACESTATE_CHARS = 512;
/** At most 32 list members, each key=value of printable ASCII without ',' or '='. */
const TRACESTATE = /^[\x20-\x7e]*$/;

/**
 * A valid traceparent, lower-cased as the specification writes it, or
 * undefined. Invalid ones are dropped, not refused: the specification has a
 * receiver that cannot parse one start a new trace, and one caller's tracing
 * library must not make its requests fail.
 */
export function parseTraceparent(value: string | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim().toLowerCase();
  const match = TRACEPARENT.exec(text);
  if (match === null) return undefined;
  const [, version, traceId, parentId, , rest] = match;
  if (version === "ff" || /^0+$/.test(traceId!) || /^0+$/.test(parentId!)) return undefined;
  // Version 00 has exactly four fields; a later version may add some, which we do not pass on.
  if (version === "00" && rest !== undefined) return undefined;
  return text.slice(0, 55);
}

/** A tracestate to pass on, or null: too long, too many members or not printable ASCII is dropped (the specification allows it). */
export function parseTracestate(value: string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (text === "" || text.length > MAX_TRACESTATE_CHARS || !TRACESTATE.test(text)) return null;
  if (text.split(",").filter((m) => m.trim() !== "").length > 32) return null;
  return text;
}

/** The context a request carries, or undefined when it carries no valid traceparent (its tracestate alone means nothing). */
export function traceFrom(traceparent: string | null | undefined, tracestate: string | null | undefined): TraceContext | undefined {
  const parent = parseTraceparent(traceparent);
  return parent === undefined ? undefined : { traceparent: parent, tracestate: parseTracestate(tracestate) };
}

/** A new trace, sampled: the start of a chain of hand-offs whose first poster sent none. */
export function newTrace(): TraceContext {
  // One draw for both ids: a trace starts with every post that carries none.
  const hex = randomBytes(24).toString("hex");
  return { traceparent: `00-${hex.slice(0, 32)}-${hex.slice(32)}-01`, tracestate: null };
}

/** The trace id of a traceparent (its second field). */
export const traceIdOf = (traceparent: string): string => traceparent.slice(3, 35);

/** The headers that carry a context on. */
export function traceHeaders(trace: TraceContext | null | undefined): Record<string, string> {
  if (trace === null || trace === undefined) return {};
  return trace.tracestate === null ? { traceparent: trace.traceparent } : { traceparent: trace.traceparent, tracestate: trace.tracestate };
}
