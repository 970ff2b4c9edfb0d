/**
 * Wake-ups: "channel X has something new". Long-polls and watch streams wait
 * on them instead of polling the database. One subscription per process
 * (Redis pub/sub, or PostgreSQL LISTEN/NOTIFY) fans out to the local waiters,
 * so many waiters on one channel cost one message each way, and replicas
 * wake each other's waiters.
 *
 * A wake-up carries no data: a woken waiter re-reads from its cursor, so a
 * lost or duplicated wake-up can delay an answer but never change it.
 */
import type { WakeListener } from "../ports/wake-bus.js";

/** The local half every transport shares: listeners per channel. */
export class LocalFanout {
  private readonly listeners = new Map<string, Set<WakeListener>>();
  private count = 0;
  private deliveries = 0;

  get subscriptions(): number {
    return this.count;
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    let set = this.listeners.get(channelId);
    if (!set) {
      set = new Set();
      this.listeners.set(channelId, set);
    }
    set.add(listener);
    this.count++;
    let active = true;
    return () => {
      if (!active) return;
      active = false;
      this.count--;
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(channelId) === set) this.listeners.delete(channelId);
    };
  }

  /**
   * Wakes every local listener of every channel once, so each re-reads from
   * its cursor: after a transport gap in which wake-ups may have been lost.
   */
  deliverAll(): void {
    for (const channelId of [...this.listeners.keys()]) this.deliver(channelId);
  }

  deliver(channelId: string): void {
    const set = this.listeners.get(channelId);
    if (!set) return;
    const delivery = ++this.deliveries;
    // Copy: a listener typically unsubscribes itself while we iterate.
    for (const listener of [...set]) listener(delivery);
  }
}
