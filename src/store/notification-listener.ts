/**
 * One LISTEN connection that stays up: a pg client of its own (LISTEN holds
 * its connection, so it cannot come from the pool), reconnected with
 * backoff whenever it fails. NOTIFYs sent while it was down are lost, so
 * `onReconnected` tells the owner to catch up (re-read, sweep).
 */
import pg from "pg";

export interface NotificationListenerOptions {
  /** Undefined: pg's PG* environment variables. */
  connectionString: string | undefined;
  /** The LISTEN channel: a fixed identifier of ours, never user input. */
  channel: string;
  /** Shown in pg_stat_activity. */
  applicationName: string;
  onNotification: (payload: string) => void;
  /** A connection failed or was lost; a new one is on its way. */
  onError: (err: Error) => void;
  /** Listening again after a lost connection (not after the first connect). */
  onReconnected?: () => void;
}

const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 5_000;

export class NotificationListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retryMs = FIRST_RETRY_MS;
  /** Resolves once the first LISTEN is in place (or the listener is closed). */
  readonly ready: Promise<void>;

  constructor(private readonly options: NotificationListenerOptions) {
    this.ready = this.connect();
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = undefined;
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
        application_name: this.options.applicationName,
      });
      try {
        client.on("error", (err) => this.lost(client, err));
        await client.connect();
        client.on("notification", (n) => {
          if (n.channel === this.options.channel && n.payload !== undefined) this.options.onNotification(n.payload);
        });
        await client.query(`LISTEN ${this.options.channel}`);
        if (this.closed) {
          await client.end();
          return;
        }
        this.client = client;
        this.retryMs = FIRST_RETRY_MS;
        return;
      } catch (err) {
        this.options.onError(err as Error);
        await client.end().catch(() => {});
        await new Promise((r) => setTimeout(r, this.retryMs));
        this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
      }
    }
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.closed || this.client !== client) return;
    this.options.onError(err);
    this.client = undefined;
    void client.end().catch(() => {});
    void this.connect().then(() => {
      if (!this.closed) this.options.onReconnected?.();
    });
  }
}
