/**
 * Starts OpenTelemetry's SDK when the standard settings ask for it
 * (docs/decisions.md#spans): OTEL_TRACES_EXPORTER=otlp, or unset with
 * OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT given.
 * "none", or nothing set: no SDK is loaded and no span is made.
 *
 * Imported first by the CLI: the PostgreSQL instrumentation patches `pg`
 * as it is loaded, so it must be registered before any module imports it.
 */
import { createRequire } from "node:module";
import type * as OtlpHttp from "@opentelemetry/exporter-trace-otlp-http";
import type * as Instrumentation from "@opentelemetry/instrumentation";
import type * as InstrumentationPg from "@opentelemetry/instrumentation-pg";
import type * as Resources from "@opentelemetry/resources";
import type * as SdkTraceBase from "@opentelemetry/sdk-trace-base";
import type * as SdkTraceNode from "@opentelemetry/sdk-trace-node";
import { enableTracing } from "./platform/tracing.js";

export interface Telemetry {
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** Whether the environment asks for traces. */
export function tracesWanted(env: NodeJS.ProcessEnv): boolean {
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter === "none" || env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return false;
  if (exporter !== undefined && exporter !== "") return exporter.split(",").map((e) => e.trim()).includes("otlp");
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

function start(env: NodeJS.ProcessEnv): Telemetry | undefined {
  if (!tracesWanted(env)) return undefined;
  // Loaded only when wanted: a service without tracing never loads the SDK.
  const require = createRequire(import.meta.url);
  const { NodeTracerProvider } = require("@opentelemetry/sdk-trace-node") as typeof SdkTraceNode;
  const { BatchSpanProcessor } = require("@opentelemetry/sdk-trace-base") as typeof SdkTraceBase;
  const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-http") as typeof OtlpHttp;
  const { resourceFromAttributes } = require("@opentelemetry/resources") as typeof Resources;
  const { registerInstrumentations } = require("@opentelemetry/instrumentation") as typeof Instrumentation;
  const { PgInstrumentation } = require("@opentelemetry/instrumentation-pg") as typeof InstrumentationPg;
  const provider = new NodeTracerProvider({
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by the SDK's default resource and win over this default.
    resource: resourceFromAttributes({ "service.name": env.OTEL_SERVICE_NAME?.trim() || "agentbus" }),
    // The exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT and _HEADERS itself.
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // W3C trace context propagation and AsyncLocalStorage context: the SDK's defaults.
  provider.register();
  // Statements inside a request's or a job's span only: the background loops' polling would drown the rest.
  registerInstrumentations({ tracerProvider: provider, instrumentations: [new PgInstrumentation({ requireParentSpan: true })] });
  enableTracing();
  return { shutdown: () => provider.shutdown() };
}

export const telemetry: Telemetry | undefined = start(process.env);
