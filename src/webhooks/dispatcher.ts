/**
 * Sends what the webhook outbox holds (docs/decisions.md#webhook-delivery). One per process
 * that runs workers (`agentbus serve` unless AGENTBUS_WORKERS=false, and
 * `agentbus worker`).
 *
 * When a row is sent:
 * - At once after the commit that wrote it: every outbox insert NOTIFYs
 *   `agentbus_webhooks` (a trigger; PostgreSQL delivers it on commit only),
 *   and each dispatcher LISTENs on its own connection. That one path serves
 *   the in-process dispatcher and separate worker processes alike.
 * - Retries: the dispatcher that recorded a failure sets a timer for the
 *   row's next attempt.
 * - Everything else due (rows of a dispatcher that died, a notification
 *   missed while the LISTEN connection was down, a restart) is found by
 *   sweep(): at start, whenever LISTEN reconnects, and on the Agenda job
 *   webhook-sweep (src/jobs/webhook-sweep.ts).
 *
 * Slots are shared: at most destinationConcurrency requests per destination
 * and ownerConcurrency per owning key (the key owning the channel, or the
 * actor of a mention push), and owners take turns, fewest in flight first
 * (docs/decisions.md#webhook-isolation).
 *
 * Claims lease rows (store/webhook-claim.ts), so several dispatchers never send
 * the same attempt; a sender that dies mid-request leaves its row to be
 * retried when the lease ends. Delivery is therefore at least once:
 * receivers de-duplicate on X-Service-Delivery.
 *
 * Retries follow the schedule (default 5 s, 30 s, 2 min, 10 min, 30 min,
 * 1 h, 3 h, 6 h, 12 h: ten attempts over about 23 hours), each delay with
 * ±20 % jitter. 2xx is delivered; 410 Gone ends the delivery at once (the
 * receiver's way to say "stop"); anything else, or no answer within the
 * timeout, is retried.
 */
import type { Clock, Micros, Timer } from "../model/time.js";
import { defaultWebhookOwnerConcurrency } from "../platform/config.js";
import { LogLimiter } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import { failureClass, type FailureClass, type OutboundClient } from "../outbound/guarded-fetch.js";
import type { AttemptRecord, ClaimedDelivery, OwnerLoad } from "../model/webhooks.js";
import type { WebhookStore } from "../ports/webhooks.js";
import { bodyTrace, messageBody, pushHeaders, webhookHeaders } from "./payload.js";
import { taskPushBody } from "../protocol/a2a-tasks.js";
import { withStoredTrace } from "../platform/tracing.js";

export const NOTIFY_CHANNEL = "agentbus_webhooks";

/** Delays between attempts (ms): attempt n+1 follows attempt n after schedule[n-1]. */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 21_600_000, 43_200_000,
];

/** Response bytes read (and discarded) per attempt; a longer answer closes the connection. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** The longest a dispatcher sleeps without looking at the outbox. */
const MAX_IDLE_MS = 60_000;
/** When rows are due but were not claimable (another dispatcher held them), look again after this. */
const RECHECK_MS = 250;
/** After the database failed a claim. */
const ERROR_RETRY_MS = 2_000;
/**
 * How long an owner with nothing in flight is remembered as served: within
 * it, owners served longer ago go first. An owner forgotten after it counts
 * as never served, which sorts the same way, so this only bounds the list
 * each claim carries.
 */
const OWNER_MEMORY_MS = 60_000;

const LISTEN_LOST = "webhook LISTEN connection failed or lost; reconnecting";
const SWEEP_FAILED = "webhook sweep failed";
const DISPATCH_FAILED = "webhook dispatch failed; retrying shortly";

/** A LISTEN on NOTIFY_CHANNEL, on a connection of its own outside the pool. */
export interface OutboxWakeups {
  /** Settles once the first connection listens. */
  readonly ready: Promise<void>;
  close(): Promise<void>;
}

export interface OutboxWakeupEvents {
  /** A commit queued deliveries. */
  onNotification(): void;
  onError(err: Error): void;
  /** Listening again after the connection was lost: whatever was committed meanwhile was not announced. */
  onReconnected(): void;
}

export interface WebhookDispatcherOptions {
  store: WebhookStore;
  /** Opens the LISTEN on NOTIFY_CHANNEL; without it, waking is left to kick() and sweep() (tests). */
  listen?: (events: OutboxWakeupEvents) => OutboxWakeups;
  clock: Clock;
  logger: Logger;
  /** Where failures that repeat during a database outage go; default: one of its own. */
  outageLog?: LogLimiter;
  http: OutboundClient;
  /** Per attempt; default 10 s. */
  timeoutMs?: number;
  /** Delays between attempts; its length + 1 is the number of attempts. */
  retryScheduleMs?: readonly number[];
  /** Requests in flight at once in this process; default 16. */
  concurrency?: number;
  /** Of those, to one destination (host[:port]); default 2. */
  destinationConcurrency?: number;
  /** Of those, for one owning key, whichever its destinations; default a quarter of concurrency, at least 1. */
  ownerConcurrency?: number;
  /** Consecutive attempts without an answer that open a destination's breaker; 0 = no breaker. Default 3. */
  breakerThreshold?: number;
  /** First pause of an open breaker (doubles per trip); default 30 s. */
  breakerOpenMs?: number;
  /** Longest pause; default 30 min. */
  breakerMaxOpenMs?: number;
  /** How long a claimed row stays with its sender; default timeout + 30 s. */
  leaseMs?: number;
  /** A second header name the X-Service-Signature value is also sent under (the reference's, for its receivers). */
  legacySignatureHeader?: string | undefined;
  /** Jitter source in [0, 1); default Math.random. */
  random?: () => number;
  /** Called once stop() has finished (e.g. to close the HTTP client). */
  onStopped?: () => void;
}

export class WebhookDispatcher {
  private readonly store: WebhookStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly outageLog: LogLimiter;
  private readonly http: OutboundClient;
  private readonly timeoutMs: number;
  private readonly schedule: readonly number[];
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly random: () => number;

  private readonly destinationConcurrency: number;
  private readonly ownerConcurrency: number;
  private readonly breaker: { threshold: number; openMs: number; maxOpenMs: number };
  private readonly inFlight = new Set<Promise<void>>();
  /** Requests in flight per destination (only destinations with some). */
  private readonly perDestination = new Map<string, number>();
  /** Per owning key: requests in flight and when one last started (owners served within OWNER_MEMORY_MS, or with some in flight). */
  private readonly perOwner = new Map<string, OwnerLoad>();
  private readonly shutdown = new AbortController();
  private draining: Promise<void> | undefined;
  private wanted = false;
  /** The last claim filled every free slot: more may be due. */
  private backlog = false;
  private timer: Timer | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private listener: OutboxWakeups | undefined;
  private stopped = false;
  private stopping: Promise<void> | undefined;

  constructor(private readonly options: WebhookDispatcherOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.logger = options.logger.child({ component: "webhooks" });
    this.outageLog = (options.outageLog ?? new LogLimiter(options.logger, { intervalMs: 30_000 })).child({ component: "webhooks" });
    this.http = options.http;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.schedule = options.retryScheduleMs ?? DEFAULT_RETRY_SCHEDULE_MS;
    this.concurrency = options.concurrency ?? 16;
    this.leaseMs = options.leaseMs ?? this.timeoutMs + 30_000;
    this.random = options.random ?? Math.random;
    this.destinationConcurrency = Math.min(options.destinationConcurrency ?? 2, this.concurrency);
    this.ownerConcurrency = Math.min(options.ownerConcurrency ?? defaultWebhookOwnerConcurrency(this.concurrency), this.concurrency);
    this.breaker = { threshold: options.breakerThreshold ?? 3, openMs: options.breakerOpenMs ?? 30_000, maxOpenMs: options.breakerMaxOpenMs ?? 1_800_000 };
  }

  /** Starts listening and sends whatever is already due. */
  async start(): Promise<void> {
    if (this.options.listen) {
      this.listener = this.options.listen({
        onNotification: () => this.kick(),
        onError: (err) => this.outageLog.warn(LISTEN_LOST, err),
        // Whatever was committed while nobody listened is found by the sweep.
        onReconnected: () => {
          this.outageLog.recovered(LISTEN_LOST, "webhook LISTEN connection restored");
          void this.sweep().catch((err: unknown) => this.outageLog.warn(SWEEP_FAILED, err));
        },
      });
      await this.listener.ready;
    }
    await this.sweep();
  }

  /** Looks for due rows now and re-arms the timer for the earliest pending one. */
  async sweep(): Promise<void> {
    if (this.stopped) return;
    this.kick();
    const due = await this.store.nextDue();
    if (due !== null) this.wakeAt(due);
  }

  /** Claims and sends what is due, unless a pass is running (it then runs once more). */
  kick(): void {
    if (this.stopped) return;
    this.wanted = true;
    if (this.draining) return;
    this.draining = this.drain()
      .then(() => this.outageLog.recovered(DISPATCH_FAILED, "webhook dispatch works again"))
      .catch((err: unknown) => {
        this.outageLog.error(DISPATCH_FAILED, err);
        this.wakeAt(this.clock.now() + ERROR_RETRY_MS * 1000);
      })
      .finally(() => {
        this.draining = undefined;
        if (this.wanted) this.kick();
      });
  }

  /** Stops claiming; waits (bounded) for requests in flight, then aborts the rest. Idempotent. */
  stop(graceMs = 5_000): Promise<void> {
    this.stopping ??= this.halt(graceMs).finally(() => this.options.onStopped?.());
    return this.stopping;
  }

  private async halt(graceMs: number): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.listener?.close();
    await this.draining;
    const settled = Promise.allSettled([...this.inFlight]);
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      settled.then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs))),
    ]);
    clearTimeout(timer);
    if (late) {
      // Aborted attempts are recorded as failed and due again at once, for
      // whichever dispatcher runs next.
      this.shutdown.abort();
      await settled;
    }
  }

  private async drain(): Promise<void> {
    while (this.wanted && !this.stopped) {
      this.wanted = false;
      const free = this.concurrency - this.inFlight.size;
      if (free <= 0) {
        // A finishing send kicks again.
        this.backlog = true;
        return;
      }
      const now = this.clock.now();
      const busy = new Map([...this.perDestination].map(([dest, n]) => [dest, Math.max(this.destinationConcurrency - n, 0)]));
      this.forgetOwnersServedBefore(now - OWNER_MEMORY_MS * 1000);
      const claimed = await this.store.claimDue(now, free, now + this.leaseMs * 1000, {
        busy,
        perDestination: this.destinationConcurrency,
        owners: this.perOwner,
        perOwner: this.ownerConcurrency,
      });
      this.backlog = claimed.length === free;
      if (this.backlog) this.wanted = true;
      for (const delivery of claimed) {
        // Only a request holds a slot: a deferred or dropped delivery counts against neither limit.
        const destination = delivery.openUntil === null ? delivery.destination : null;
        const owner = destination === null ? null : delivery.ownerKeyId;
        if (destination !== null) this.perDestination.set(destination, (this.perDestination.get(destination) ?? 0) + 1);
        if (owner !== null) this.perOwner.set(owner, { inFlight: (this.perOwner.get(owner)?.inFlight ?? 0) + 1, servedAt: now });
        const sending: Promise<void> = this.send(delivery)
          .catch((err: unknown) => {
            // The outcome could not be recorded (database trouble): the lease
            // makes the row due again; look then.
            this.logger.error({ err, delivery_id: delivery.id }, "webhook attempt could not be recorded");
            this.wakeAt(this.clock.now() + this.leaseMs * 1000);
          })
          .finally(() => {
            this.inFlight.delete(sending);
            if (destination !== null && owner !== null) {
              const left = (this.perDestination.get(destination) ?? 1) - 1;
              if (left > 0) this.perDestination.set(destination, left);
              else this.perDestination.delete(destination);
              // Kept with its servedAt for the turn order; forgotten later.
              const load = this.perOwner.get(owner);
              if (load) load.inFlight = Math.max(load.inFlight - 1, 0);
              // Rows of this destination or owner may have been passed over for their caps.
              this.wanted = true;
              this.kick();
            }
            if (this.backlog) this.kick();
          });
        this.inFlight.add(sending);
      }
    }
  }

  /** Drops owners with nothing in flight that were last served before `before` (they then count as never served). */
  private forgetOwnersServedBefore(before: Micros): void {
    for (const [owner, load] of this.perOwner) {
      if (load.inFlight === 0 && load.servedAt < before) this.perOwner.delete(owner);
    }
  }

  private async send(d: ClaimedDelivery): Promise<void> {
    if (d.url === null) {
      // The channel's or actor's webhook was removed: nothing to send to.
      await this.store.dropDelivery(d.id, d.attempt);
      this.logger.info({ delivery_id: d.id, event: d.event }, "webhook removed; pending delivery dropped");
      return;
    }
    const attemptedAt = this.clock.now();
    if (d.openUntil !== null) {
      // The destination's breaker is open: no request; the delivery waits.
      await this.store.deferDelivery({ deliveryId: d.id, channelId: d.channelId, actorId: d.actorId, event: d.event, messageId: d.messageId, attempt: d.attempt }, attemptedAt, d.openUntil);
      this.wakeAt(d.openUntil);
      return;
    }
    let body = d.body;
    if (body === null) {
      const rendered = await this.render(d, attemptedAt);
      if ("gone" in rendered) {
        await this.record(d, { status: "failed", responseStatus: null, error: rendered.gone, durationMs: 0, attemptedAt, next: null, body: null });
        return;
      }
      body = rendered.body;
    }

    const started = performance.now();
    let responseStatus: number | null = null;
    // The log shows a failure class only (docs/decisions.md#failure-classes): never a resolved address or raw error text.
    let error: FailureClass | "http_status" | null = null;
    try {
      const sent = body;
      const url = d.url;
      // With spans on, the request's span is a child of the message's trace (docs/decisions.md#spans).
      const trace = bodyTrace(sent);
      const res = await withStoredTrace(trace, () =>
        this.http.request(url, {
          method: "POST",
          headers: { ...webhookHeaders(d.event, d.id, sent, d.secret, attemptedAt, this.options.legacySignatureHeader, trace), ...pushHeaders(d) },
          body: sent,
          timeoutMs: this.timeoutMs,
          maxResponseBytes: MAX_RESPONSE_BYTES,
          signal: this.shutdown.signal,
        }),
      );
      responseStatus = res.status;
      if (res.status < 200 || res.status > 299) error = "http_status";
    } catch (err) {
      error = failureClass(err);
      this.logger.info({ err, delivery_id: d.id, destination: d.destination, failure: error }, "webhook attempt failed");
    }
    const durationMs = Math.round(performance.now() - started);
    const delivered = error === null;
    const now = this.clock.now();
    let next: Micros | null = null;
    if (!delivered) {
      if (this.shutdown.signal.aborted) next = now;
      // 410 Gone: the receiver's "stop" (the log shows http_status 410 and no next attempt).
      else if (responseStatus !== 410) next = this.nextAttempt(d.attempt, now);
    }
    // The breaker is about receivers that hold slots: only a timeout counts
    // against a destination (a refused connection costs nothing); any answer
    // clears it.
    if (d.destination !== null && this.breaker.threshold > 0 && (responseStatus !== null || error === "timeout")) {
      await this.store.recordDestinationOutcome(d.destination, responseStatus !== null, now, this.breaker);
    }
    await this.record(d, { status: delivered ? "delivered" : "failed", responseStatus, error, durationMs, attemptedAt, next, body });
    if (next !== null) this.wakeAt(next);
    else if (!delivered) this.logger.warn({ delivery_id: d.id, event: d.event, attempts: d.attempt, error }, "webhook delivery given up");
  }

  /** The body of a message event, or why there is none to send. */
  private async render(d: ClaimedDelivery, now: Micros): Promise<{ body: string } | { gone: string }> {
    if (d.event === "a2a.task") return this.renderTask(d, now);
    const mentioned = d.event === "mention" ? d.actorId : null;
    if (d.message) return { body: messageBody(d.message, now, mentioned) };
    if (d.messageId === null) return { gone: "nothing to send" };
    // No longer live. Expired before its first attempt (a receiver that was
    // down for longer than the channel's ttl): still delivered, as it was
    // archived, so the receiver misses nothing. Retracted: the author took it
    // back, so it is not pushed. Dropped by the ring buffer or purged from
    // history: nothing is left to send.
    const archived = await this.store.findArchivedMessage(d.messageId);
    if (!archived) return { gone: "message_gone: dropped by the ring buffer or purged before the first attempt" };
    if (archived.reason === "retracted") return { gone: "message_retracted: retracted before the first attempt" };
    return { body: messageBody(archived.message, now, mentioned) };
  }

  /** An A2A push notification: the task as it stands now, live or archived (its final state). */
  private async renderTask(d: ClaimedDelivery, now: Micros): Promise<{ body: string } | { gone: string }> {
    if (d.message) return { body: taskPushBody(d.message, now, null) };
    if (d.messageId === null) return { gone: "nothing to send" };
    const archived = await this.store.findArchivedMessage(d.messageId);
    if (!archived) return { gone: "message_gone: purged before the first attempt" };
    return { body: taskPushBody(archived.message, now, archived.reason) };
  }

  private record(
    d: ClaimedDelivery,
    o: Pick<AttemptRecord, "status" | "responseStatus" | "error" | "durationMs" | "attemptedAt" | "body"> & { next: Micros | null },
  ): Promise<void> {
    return this.store.recordAttempt({
      deliveryId: d.id,
      channelId: d.channelId,
      actorId: d.actorId,
      event: d.event,
      messageId: d.messageId,
      attempt: d.attempt,
      status: o.status,
      responseStatus: o.responseStatus,
      error: o.error,
      durationMs: o.durationMs,
      attemptedAt: o.attemptedAt,
      nextAttemptAt: o.next,
      body: o.body,
    });
  }

  /** When attempt n+1 is due after attempt n failed at `now`; null after the last. */
  private nextAttempt(attempt: number, now: Micros): Micros | null {
    const delay = this.schedule[attempt - 1];
    if (delay === undefined) return null;
    const jittered = delay * (0.8 + 0.4 * this.random());
    return now + Math.round(jittered * 1000);
  }

  /** Arms the timer for `at` unless it is already set to fire sooner. */
  private wakeAt(at: Micros): void {
    if (this.stopped || at >= this.timerAt) return;
    this.timer?.cancel();
    const now = this.clock.now();
    const delayMs = at <= now ? RECHECK_MS : Math.min(Math.ceil((at - now) / 1000), MAX_IDLE_MS);
    this.timerAt = now + delayMs * 1000;
    this.timer = this.clock.setTimer(
      delayMs,
      () => {
        this.timer = undefined;
        this.timerAt = Number.POSITIVE_INFINITY;
        void this.sweep().catch((err: unknown) => this.outageLog.warn(SWEEP_FAILED, err));
      },
      { unref: true },
    );
  }
}

