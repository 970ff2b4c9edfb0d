/**
 * The channel views the message hot paths look up on every request (post,
 * list, receive, watch), remembered for a moment (docs/decisions.md#channel-view-cache).
 *
 * Looking the channel up is a round trip of its own before the statement
 * that does the work; measured with `npm run bench` on the 2-core machine,
 * dropping it took posts from 2,030 to 4,000 a second (more of them share a
 * commit) and pages from 1,127 to 1,517. Only found channels are kept (an unknown or ambiguous
 * identifier is asked again next time), for at most TTL_MS. Every change to a
 * channel or its members made through this process clears the whole cache, at
 * once and again when its transaction commits; a change made through another
 * process is seen here within TTL_MS, as a revoked key is within the key
 * cache's lifetime. The statements themselves still check what they must
 * (pause, write limits, mode, access for claims and receives) on the rows.
 */
import { type ChannelLookup, type ChannelView } from "../model/channels.js";
import type { Clock } from "../model/time.js";

export const TTL_MS = 1_000;
/** Beyond this many entries the cache starts over: a bound on memory, not an eviction policy. */
export const MAX_ENTRIES = 10_000;

export class ChannelViewCache {
  private readonly entries = new Map<string, { view: ChannelView; until: number }>();
  /** Bumped by every clear: a lookup that started before one is not kept. */
  private generation = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs = TTL_MS,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  /** The view `identifier` names for the key: remembered, or looked up with `load` (and remembered when found). */
  async find(identifier: string, keyId: string, load: () => Promise<ChannelLookup<ChannelView>>): Promise<ChannelLookup<ChannelView>> {
    const key = `${keyId}\u0000${identifier}`;
    const now = this.clock.monotonicMs();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) return hit.view;
    const generation = this.generation;
    const found = await load();
    // A change that cleared the cache while this lookup ran may not be in what it read.
    if (found === undefined || generation !== this.generation) return found;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, { view: found, until: now + this.ttlMs });
    return found;
  }

  /** A channel or its membership changed: nothing remembered may be used again. */
  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
