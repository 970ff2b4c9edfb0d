/**
 * Work shared by many keys, handed out fairly (docs/decisions.md#schemas-off-thread):
 * one FIFO lane per key, at most one item of a key out at a time, and the
 * next item always comes from the waiting key served least recently (a key
 * never served since it last went idle first). A key with a backlog thus
 * delays another key by at most one of its items, never by the backlog; and
 * a key may hold at most `maxPerKey` items, waiting or out, so a flood is
 * refused rather than queued without end.
 */

interface Lane<T> {
  items: T[];
  /** An item of this key has been taken and is not done yet. */
  out: boolean;
  /** Served at least once since the lane was opened: it queues behind keys that were not. */
  served: boolean;
}

export class FairQueue<T> {
  private readonly lanes = new Map<string, Lane<T>>();
  // Keys with an item waiting and none out, in the order they are served:
  // first the ones not served yet, then the others by when they were last
  // served (a Set keeps insertion order; re-adding moves a key to the end).
  private readonly unserved = new Set<string>();
  private readonly byLastServed = new Set<string>();

  constructor(readonly maxPerKey: number) {}

  /** Queues the item; false (and nothing queued) when the key already holds maxPerKey items. */
  push(key: string, item: T): boolean {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { items: [], out: false, served: false };
      this.lanes.set(key, lane);
    }
    if (lane.items.length + (lane.out ? 1 : 0) >= this.maxPerKey) return false;
    lane.items.push(item);
    if (!lane.out && lane.items.length === 1) (lane.served ? this.byLastServed : this.unserved).add(key);
    return true;
  }

  /** The next item to run, or undefined when every waiting key already has one out (or nothing waits). */
  take(): { key: string; item: T } | undefined {
    const key = first(this.unserved) ?? first(this.byLastServed);
    if (key === undefined) return undefined;
    this.unserved.delete(key);
    this.byLastServed.delete(key);
    const lane = this.lanes.get(key)!;
    lane.out = true;
    lane.served = true;
    return { key, item: lane.items.shift()! };
  }

  /** The key's item that was out has finished: its next one (if any) waits behind the keys served since. */
  done(key: string): void {
    const lane = this.lanes.get(key);
    if (lane === undefined || !lane.out) return;
    lane.out = false;
    if (lane.items.length > 0) this.byLastServed.add(key);
    else this.lanes.delete(key);
  }

  /** Items the key holds, waiting or out. */
  held(key: string): number {
    const lane = this.lanes.get(key);
    return lane === undefined ? 0 : lane.items.length + (lane.out ? 1 : 0);
  }
}

function first(keys: Set<string>): string | undefined {
  for (const key of keys) return key;
  return undefined;
}
