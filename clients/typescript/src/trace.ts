/**
 * Every call carries the caller's active trace context when the application
 * uses OpenTelemetry (docs/decisions.md#trace-context): `@opentelemetry/api`
 * is an optional peer dependency, loaded on the first call; without it, or
 * without a registered SDK, nothing is added. A traceparent the caller set
 * on the call itself wins.
 */
import type { Interceptor } from "@connectrpc/connect";

/** The part of @opentelemetry/api this uses. */
interface OtelApi {
  context: { active(): unknown };
  propagation: { inject(context: unknown, carrier: Headers, setter: { set(carrier: Headers, key: string, value: string): void }): void };
}

// A variable specifier: bundlers leave it alone, so a browser build without the package still builds.
const OTEL_API = "@opentelemetry/api";
let loaded: Promise<OtelApi | undefined> | undefined;

function otel(): Promise<OtelApi | undefined> {
  loaded ??= (import(OTEL_API) as Promise<OtelApi>).then(
    (api) => (typeof api.propagation?.inject === "function" ? api : undefined),
    () => undefined,
  );
  return loaded;
}

export function traceInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (!req.header.has("traceparent")) {
      const api = await otel();
      api?.propagation.inject(api.context.active(), req.header, { set: (carrier, key, value) => carrier.set(key, value) });
    }
    return next(req);
  };
}
