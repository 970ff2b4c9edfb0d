/**
 * Prometheus metrics. Labels are low-cardinality by construction: the route
 * is a template or an RPC procedure, never a concrete path.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: "agentbus_http_requests_total",
    help: "Requests served, by route template, method, protocol and status.",
    labelNames: ["route", "method", "protocol", "status"] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: "agentbus_http_request_duration_seconds",
    help: "Time from request start to the end of the response.",
    labelNames: ["route", "method", "protocol"] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "agentbus_" });
  }

  observeRequest(route: string, method: string, protocol: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, protocol, status: String(status) });
    this.duration.observe({ route, method, protocol }, seconds);
  }

  /** Registers a gauge read at scrape time (pool sizes and the like). */
  gauge(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
