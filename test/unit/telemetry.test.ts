/** When the service makes spans: the standard OpenTelemetry settings, off unless they ask (docs/decisions.md#spans). */
import { describe, expect, it } from "vitest";
import { tracesWanted } from "../../src/telemetry.js";
import { tracingEnabled } from "../../src/platform/tracing.js";

describe("traces", () => {
  it("are off when nothing is set", () => {
    expect(tracesWanted({})).toBe(false);
  });

  it("are on with an OTLP endpoint", () => {
    expect(tracesWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toBe(true);
    expect(tracesWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:4318/v1/traces" })).toBe(true);
  });

  it("are on with OTEL_TRACES_EXPORTER=otlp, which the SDK sends to its default endpoint", () => {
    expect(tracesWanted({ OTEL_TRACES_EXPORTER: "otlp" })).toBe(true);
  });

  it("are off with OTEL_TRACES_EXPORTER=none, even with an endpoint", () => {
    expect(tracesWanted({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toBe(false);
  });

  it("are off with OTEL_SDK_DISABLED=true", () => {
    expect(tracesWanted({ OTEL_SDK_DISABLED: "true", OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318" })).toBe(false);
  });

  it("are off for an exporter other than otlp", () => {
    expect(tracesWanted({ OTEL_TRACES_EXPORTER: "zipkin" })).toBe(false);
  });

  it("leave the service without an SDK when off", () => {
    expect(tracingEnabled()).toBe(false);
  });
});
