/**
 * Wake-ups over PostgreSQL LISTEN/NOTIFY: no extra infrastructure, and it
 * still reaches every replica on the same database. One dedicated connection
 * listens; it reconnects with backoff if the database goes away.
 */
import pg from "pg";
import { LocalFanout, type WakeBus, type WakeListener } from "./wake-bus.js";

const TOPIC = "agentbus_wake";

export interface PgNotifyBusOptions {
  connectionString: string;
  onError: (err: Error) => void;
}

export class PgNotifyBus implements WakeBus {
  private readonly fanout = new LocalFanout();
  private listener: pg.Client | undefined;
  private closed = false;
  private reconnectDelay = 100;
  private readonly ready: Promise<void>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly options: PgNotifyBusOptions,
  ) {
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
    // Other processes learn through NOTIFY; our own echo is delivered again, harmlessly.
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
      const client = new pg.Client({ connectionString: this.options.connectionString });
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
    // Waiters that missed a wake-up meanwhile still end at their deadline and re-read.
    void this.connect();
  }
}
