/** WakeBus within one process: publish delivers to the channel's listeners at once. */
import type { WakeBus, WakeListener } from "../../../src/ports/wake-bus.js";

export class FakeWakeBus implements WakeBus {
  private readonly listeners = new Map<string, Set<WakeListener>>();
  private deliveries = 0;
  readonly published: string[] = [];

  get subscriptions(): number {
    let count = 0;
    for (const set of this.listeners.values()) count += set.size;
    return count;
  }

  publish(channelId: string): void {
    this.published.push(channelId);
    const delivery = ++this.deliveries;
    for (const listener of [...(this.listeners.get(channelId) ?? [])]) listener(delivery);
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    const set = this.listeners.get(channelId) ?? new Set<WakeListener>();
    this.listeners.set(channelId, set);
    set.add(listener);
    return () => set.delete(listener);
  }

  async close(): Promise<void> {}
}
