/**
 * Wake-ups: "channel X has something new". Long-polls and watch streams wait
 * on them instead of polling the database. A wake-up carries no data: a woken
 * waiter re-reads from its cursor, so a lost or duplicated wake-up can delay
 * an answer but never change it.
 */

/**
 * Called with the number of the delivery that woke it: listeners woken by
 * the same delivery see the same number, so they may share one re-read.
 */
export type WakeListener = (delivery: number) => void;

export interface WakeBus {
  /** Announces new data on a channel, to this process at once and to the others via the transport. */
  publish(channelId: string): void;
  /** Calls listener on every wake-up of the channel until the returned function is called. */
  subscribe(channelId: string, listener: WakeListener): () => void;
  /** Number of local subscriptions (for limits and metrics). */
  readonly subscriptions: number;
  close(): Promise<void>;
}
