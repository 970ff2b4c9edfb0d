import { describe, expect, it } from "vitest";
import { newTrace, parseTraceparent, parseTracestate, traceFrom, traceHeaders, traceIdOf } from "../../src/model/trace.js";

const VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("traceparent", () => {
  it("keeps a valid one", () => {
    expect(parseTraceparent(VALID)).toBe(VALID);
  });

  it("lower-cases one written in upper case", () => {
    expect(parseTraceparent(VALID.toUpperCase())).toBe(VALID);
  });

  it("drops an all-zero trace id", () => {
    expect(parseTraceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01")).toBeUndefined();
  });

  it("drops an all-zero parent id", () => {
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01")).toBeUndefined();
  });

  it("drops version ff", () => {
    expect(parseTraceparent(VALID.replace(/^00/, "ff"))).toBeUndefined();
  });

  it("drops version 00 with extra fields", () => {
    expect(parseTraceparent(`${VALID}-extra`)).toBeUndefined();
  });

  it("passes on a later version's first four fields", () => {
    expect(parseTraceparent(`01${VALID.slice(2)}-more`)).toBe(`01${VALID.slice(2)}`);
  });

  it("drops one of the wrong shape", () => {
    expect(parseTraceparent("not a traceparent")).toBeUndefined();
    expect(parseTraceparent("")).toBeUndefined();
  });
});

describe("tracestate", () => {
  it("keeps a list of members", () => {
    expect(parseTracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")).toBe("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7");
  });

  it("drops one over 512 characters", () => {
    expect(parseTracestate(`a=${"x".repeat(511)}`)).toBeNull();
  });

  it("drops one with more than 32 members", () => {
    expect(parseTracestate(Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(","))).toBeNull();
  });

  it("drops one with control characters", () => {
    expect(parseTracestate("a=b\u0000")).toBeNull();
  });
});

describe("a request's trace", () => {
  it("is none without a valid traceparent, whatever the tracestate", () => {
    expect(traceFrom(undefined, "a=b")).toBeUndefined();
  });

  it("carries the tracestate with a valid traceparent", () => {
    expect(traceFrom(VALID, "a=b")).toEqual({ traceparent: VALID, tracestate: "a=b" });
  });

  it("starts a new sampled trace with random ids when none came", () => {
    const a = newTrace();
    expect(parseTraceparent(a.traceparent)).toBe(a.traceparent);
    expect(a.traceparent.endsWith("-01")).toBe(true);
    expect(traceIdOf(a.traceparent)).not.toBe(traceIdOf(newTrace().traceparent));
  });

  it("becomes headers, without an empty tracestate", () => {
    expect(traceHeaders({ traceparent: VALID, tracestate: null })).toEqual({ traceparent: VALID });
    expect(traceHeaders(null)).toEqual({});
  });
});
