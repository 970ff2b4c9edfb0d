/**
 * Wake-ups over PostgreSQL LISTEN/NOTIFY: no extra infrastructure, and it
 * still reaches every replica on the same database. One dedicated connection
 * listens; it reconnects with backoff if the database goes away, then wakes
 * every local waiter once to cover the NOTIFYs it missed.
 */
import pg from "pg";
import { LocalFanout, type WakeBus, type WakeListener } from "./wake-bus.js";

const TOPIC = "agentbus_wake";

export interface PgNotifyBusOptions {
  connectionString: string;
  onError: (err: Error) => void;
  /**
   * The local fanout to deliver to; shared when this bus is the fallback of
   * the Redis one, so both transports wake the same waiters with one
   * sequence of delivery numbers.
   */
  fanout?: LocalFanout;
}

export class PgNotifyBus implements WakeBus {
  private readonly fanout: LocalFanout;
  private listener: pg.Client | undefined;
  private closed = false;
  private reconnectDelay = 100;
  private readonly ready: Promise<void>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: PgNotifyBusOptions,
  ) {
    this.fanout = options.fanout ?? new LocalFanout();
    this.ready = this.connect();
  }

  /** Resolves once the LISTEN is in place (tests wait for it; production does not need to). */
  whenReady(): Promise<void> {
    return this.ready;
  }

  get subscriptions(): number {
    return this.fanout.subscriptions;
  }

  publish(channelId: string): void {
    this.fanout.deliver(channelId);
    this.notify(channelId);
  }

  /** Tells the other processes only (the caller delivered locally). */
  notify(channelId: string): void {
    // Our own echo is delivered again, harmlessly.
    this.pool.query("SELECT pg_notify($1, $2)", [TOPIC, channelId]).catch((err: Error) => this.options.onError(err));
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    return this.fanout.subscribe(channelId, listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.listener;
    this.listener = undefined;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    while (!this.closed) {
      // TCP keep-alive probes after 10 s idle: a connection silently dropped
      // by the network (no FIN) is noticed within about a minute and
      // replaced, instead of listening to nothing for the OS default of ~2 h.
      // The connect timeout keeps a black-holed host from stalling each retry.
      const client = new pg.Client({
        connectionString: this.options.connectionString,
        keepAlive: true,
        keepAliveInitialDelayMillis: 10_000,
        connectionTimeoutMillis: 10_000,
        application_name: "agentbus-wake",
      });
      try {
        client.on("error", (err) => this.onLost(client, err));
        await client.connect();
        client.on("notification", (n) => {
          if (n.channel === TOPIC && n.payload) this.fanout.deliver(n.payload);
        });
        await client.query(`LISTEN ${TOPIC}`);
        if (this.closed) {
          await client.end();
          return;
        }
        this.listener = client;
        this.reconnectDelay = 100;
        return;
      } catch (err) {
        this.options.onError(err as Error);
        await client.end().catch(() => {});
        await new Promise((r) => setTimeout(r, this.reconnectDelay));
        this.reconnectDelay = Math.min(this.reconnectDelay * 2, 5_000);
      }
    }
  }

  private onLost(client: pg.Client, err: Error): void {
    if (this.closed || this.listener !== client) return;
    this.options.onError(err);
    this.listener = undefined;
    void client.end().catch(() => {});
    // NOTIFYs sent while nobody listened are lost: once listening again,
    // every local waiter re-reads once, so nothing committed meanwhile waits
    // for its deadline.
    void this.connect().then(() => {
      if (!this.closed) this.fanout.deliverAll();
    });
  }
}
