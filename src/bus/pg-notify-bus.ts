/**
 * Wake-ups over PostgreSQL LISTEN/NOTIFY: no extra infrastructure, and it
 * still reaches every replica on the same database. One dedicated connection
 * listens; it reconnects with backoff if the database goes away, then wakes
 * every local waiter once to cover the NOTIFYs it missed.
 */
import type pg from "pg";
import { NotificationListener } from "../store/notification-listener.js";
import { LocalFanout } from "./wake-bus.js";
import type { WakeBus, WakeListener } from "../ports/wake-bus.js";

const TOPIC = "agentbus_wake";

export interface PgNotifyBusOptions {
  connectionString: string;
  onError: (err: Error) => void;
  /** Listening again after a lost connection (the outage that onError reported is over). */
  onReconnected?: () => void;
  /**
   * The local fanout to deliver to; shared when this bus is the fallback of
   * the Redis one, so both transports wake the same waiters with one
   * sequence of delivery numbers.
   */
  fanout?: LocalFanout;
}

export class PgNotifyBus implements WakeBus {
  private readonly fanout: LocalFanout;
  private readonly listener: NotificationListener;
  /** Channels announced since the last flush. */
  private readonly pending = new Set<string>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: PgNotifyBusOptions,
  ) {
    const fanout = (this.fanout = options.fanout ?? new LocalFanout());
    this.listener = new NotificationListener({
      connectionString: options.connectionString,
      channel: TOPIC,
      applicationName: "agentbus-wake",
      onNotification: (channelId) => {
        if (channelId !== "") fanout.deliver(channelId);
      },
      onError: options.onError,
      // NOTIFYs sent while nobody listened are lost: every local waiter
      // re-reads once, so nothing committed meanwhile waits for its deadline.
      onReconnected: () => {
        fanout.deliverAll();
        options.onReconnected?.();
      },
    });
  }

  /** Resolves once the LISTEN is in place (tests wait for it; production does not need to). */
  whenReady(): Promise<void> {
    return this.listener.ready;
  }

  get subscriptions(): number {
    return this.fanout.subscriptions;
  }

  publish(channelId: string): void {
    this.fanout.deliver(channelId);
    this.notify(channelId);
  }

  /**
   * Tells the other processes only (the caller delivered locally). The
   * channels announced within one turn of the event loop go out together,
   * each once, in one statement: under load most writes would otherwise cost
   * a round trip of their own for their NOTIFY.
   */
  notify(channelId: string): void {
    if (this.pending.size === 0) setImmediate(() => this.flush());
    this.pending.add(channelId);
  }

  private flush(): void {
    const channels = [...this.pending];
    this.pending.clear();
    // Our own echo is delivered again, harmlessly.
    this.pool.query("SELECT pg_notify($1, c) FROM unnest($2::text[]) c", [TOPIC, channels]).catch((err: Error) => this.options.onError(err));
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    return this.fanout.subscribe(channelId, listener);
  }

  close(): Promise<void> {
    return this.listener.close();
  }
}
