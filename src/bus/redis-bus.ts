/**
 * Wake-ups over Redis pub/sub (REDIS_URL). One subscriber connection per
 * process on one topic; the payload is the channel id. ioredis reconnects on
 * its own; while Redis is away, publishes fail fast instead of queueing.
 *
 * Redis going away must not leave waiters asleep until their deadline, so:
 * - Publishing: while the publisher connection is not ready (or a publish
 *   fails), the wake-up goes out over the fallback (PostgreSQL NOTIFY, which
 *   every process in Redis mode also listens to) instead.
 * - Receiving: while the subscriber connection is down, every local waiter
 *   re-reads every few seconds (a wake-up from another process could be lost
 *   if only this process lost Redis), and once it is subscribed again every
 *   local waiter re-reads once, for what was published in the gap.
 * A wake-up carries no data, so an extra one costs a read, never a wrong answer.
 */
import { Redis } from "ioredis";
import { LocalFanout } from "./wake-bus.js";
import type { WakeBus, WakeListener } from "../ports/wake-bus.js";

const TOPIC = "agentbus:wake";

/** How long after a refused SUBSCRIBE it is tried again. */
const SUBSCRIBE_RETRY_MS = 5_000;

/** While the subscriber is down, local waiters re-read this often. */
export const REDIS_DOWN_RECHECK_MS = 2_000;

/**
 * A Redis that accepts connections but stops answering keeps both
 * connections "ready" while nothing arrives and publishes pile up (issue 26,
 * F13): each connection is asked PING this often, and one that does not
 * answer within PROBE_TIMEOUT_MS is dropped. Until a new one is ready (which
 * needs Redis to answer) wake-ups go over the fallback, and `connected`
 * (what /health reports) is false.
 */
const PROBE_MS = 2_000;
const PROBE_TIMEOUT_MS = 1_000;

/** Where wake-ups go while Redis cannot take them (PgNotifyBus.notify). */
export interface WakeFallback {
  /** Tells the other processes; the caller has already delivered locally. */
  notify(channelId: string): void;
  close(): Promise<void>;
}

export interface RedisBusOptions {
  /** The local fanout; pass the one the fallback delivers to, so both wake the same waiters. */
  fanout?: LocalFanout;
  fallback?: WakeFallback;
  /** Re-read interval while the subscriber is down; default REDIS_DOWN_RECHECK_MS. */
  recheckMs?: number;
  /** Subscribed again after a lost connection (the outage that onError reported is over). */
  onResubscribed?: () => void;
}

export class RedisBus implements WakeBus {
  private readonly fanout: LocalFanout;
  private readonly fallback: WakeFallback | undefined;
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly ready: Promise<void>;
  private readonly recheckMs: number;
  private subscribed = false;
  private everSubscribed = false;
  private closed = false;
  private recheck: NodeJS.Timeout | undefined;
  private readonly probe: NodeJS.Timeout;

  constructor(url: string, private readonly onError: (err: Error) => void, options: RedisBusOptions = {}) {
    this.fanout = options.fanout ?? new LocalFanout();
    this.fallback = options.fallback;
    this.recheckMs = options.recheckMs ?? REDIS_DOWN_RECHECK_MS;
    const publisher = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
    // SUBSCRIBE is (re)issued by us on every 'ready', so we know when it holds.
    const subscriber = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null, autoResubscribe: false });
    for (const client of [publisher, subscriber]) client.on("error", (err: Error) => onError(err));
    subscriber.on("message", (topic: string, channelId: string) => {
      if (topic === TOPIC) this.fanout.deliver(channelId);
    });
    let firstSubscribed!: () => void;
    const subscribedOnce = new Promise<void>((resolve) => (firstSubscribed = resolve));
    const trySubscribe = (): void => {
      subscriber.subscribe(TOPIC).then(
        () => {
          if (this.closed) return;
          this.subscribed = true;
          this.stopRecheck();
          // Anything published while we were not subscribed was lost to us.
          if (this.everSubscribed) {
            this.fanout.deliverAll();
            options.onResubscribed?.();
          }
          this.everSubscribed = true;
          firstSubscribed();
        },
        (err: Error) => {
          // Refused while connected (e.g. an ACL without the channel): waiters
          // fall back to re-reading, and we try again; a lost connection
          // retries by itself on its next 'ready'.
          onError(err);
          this.lost();
          const retry = setTimeout(() => {
            if (!this.closed && !this.subscribed && subscriber.status === "ready") trySubscribe();
          }, SUBSCRIBE_RETRY_MS);
          retry.unref();
        },
      );
    };
    subscriber.on("ready", trySubscribe);
    subscriber.on("close", () => this.lost());
    this.publisher = publisher;
    this.subscriber = subscriber;
    this.ready = (async () => {
      await Promise.all([publisher.connect(), subscriber.connect()]);
      await subscribedOnce;
    })();
    this.ready.catch((err: Error) => this.onError(err));
    this.probe = setInterval(() => void this.probeConnections(), PROBE_MS);
    this.probe.unref();
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  /**
   * Whether wake-ups travel over Redis both ways: ours go out on it (the
   * publisher is ready) and the other processes' arrive on it (subscribed).
   * After an outage the two connections come back at their own pace; until
   * both have, some wake-ups still take the fallback.
   */
  get connected(): boolean {
    return this.subscribed && this.publisher.status === "ready";
  }

  get subscriptions(): number {
    return this.fanout.subscriptions;
  }

  publish(channelId: string): void {
    this.fanout.deliver(channelId);
    if (this.publisher.status !== "ready") {
      this.fallback?.notify(channelId);
      return;
    }
    this.publisher.publish(TOPIC, channelId).catch((err: Error) => {
      this.onError(err);
      this.fallback?.notify(channelId);
    });
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    return this.fanout.subscribe(channelId, listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    this.stopRecheck();
    this.publisher.disconnect();
    this.subscriber.disconnect();
    await this.fallback?.close();
  }

  /** Drops each ready connection that does not answer PING in time (see PROBE_MS). */
  private async probeConnections(): Promise<void> {
    await Promise.all(
      [this.publisher, this.subscriber].map(async (client) => {
        if (client.status !== "ready") return;
        let timer: NodeJS.Timeout | undefined;
        const answered = await Promise.race([
          client.ping().then(
            () => true,
            () => true,
          ),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PROBE_TIMEOUT_MS))),
        ]);
        clearTimeout(timer);
        if (!answered && !this.closed && client.status === "ready") {
          this.onError(new Error("Redis did not answer PING in time; reconnecting"));
          client.disconnect(true);
        }
      }),
    );
  }

  private lost(): void {
    this.subscribed = false;
    if (this.closed || this.recheck !== undefined) return;
    this.recheck = setInterval(() => this.fanout.deliverAll(), this.recheckMs);
    this.recheck.unref();
  }

  private stopRecheck(): void {
    clearInterval(this.recheck);
    this.recheck = undefined;
  }
}
