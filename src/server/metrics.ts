/**
 * Prometheus metrics. Labels are low-cardinality by construction: the route
 * is a template or an RPC procedure, never a concrete path.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { QueueMeter } from "../ports/queue-meter.js";

export class Metrics implements QueueMeter {
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

  private readonly received = new Counter({
    name: "agentbus_messages_received_total",
    help: "Messages leased by receive calls, across all channels.",
    registers: [this.registry],
  });
  private readonly redelivered = new Counter({
    name: "agentbus_messages_redelivered_total",
    help: "Deliveries (receive or claim) of messages delivered before: released, or their lease lapsed.",
    registers: [this.registry],
  });
  private readonly deadLetters = new Counter({
    name: "agentbus_messages_dead_lettered_total",
    help: "Messages moved out of their channel after max_deliveries deliveries.",
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: "agentbus_" });
  }

  observeRequest(route: string, method: string, protocol: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, protocol, status: String(status) });
    this.duration.observe({ route, method, protocol }, seconds);
  }

  delivered({ received, redelivered }: { received: number; redelivered: number }): void {
    if (received > 0) this.received.inc(received);
    if (redelivered > 0) this.redelivered.inc(redelivered);
  }

  deadLettered(count: number): void {
    this.deadLetters.inc(count);
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
