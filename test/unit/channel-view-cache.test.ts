/** The channel-view cache of the message hot paths (docs/decisions.md#channel-view-cache): what it keeps, for how long, and what clears it. */
import { describe, expect, it } from "vitest";
import { ChannelViewCache, TTL_MS } from "../../src/domain/channel-view-cache.js";
import type { ChannelLookup, ChannelView } from "../../src/model/channels.js";
import { ManualClock } from "../support/clock.js";

const view = (id: string) => ({ id, name: id, callerIsMember: true }) as unknown as ChannelView;

/** A lookup that counts its calls and answers what `answer` says at the time. */
function lookup(answer: () => ChannelLookup<ChannelView>) {
  const calls = { n: 0 };
  return { calls, load: async () => (calls.n++, answer()) };
}

describe("ChannelViewCache", () => {
  it("answers a found channel from memory until TTL_MS have passed", async () => {
    const clock = new ManualClock();
    const cache = new ChannelViewCache(clock);
    const { calls, load } = lookup(() => view("c1"));
    await cache.find("c1", "k1", load);
    await cache.find("c1", "k1", load);
    expect(calls.n).toBe(1);
    await clock.advance(TTL_MS);
    await cache.find("c1", "k1", load);
    expect(calls.n).toBe(2);
  });

  it("keeps each key's view apart: standing differs by caller", async () => {
    const cache = new ChannelViewCache(new ManualClock());
    const { calls, load } = lookup(() => view("c1"));
    await cache.find("c1", "k1", load);
    await cache.find("c1", "k2", load);
    expect(calls.n).toBe(2);
  });

  it("never remembers an unknown identifier", async () => {
    const cache = new ChannelViewCache(new ManualClock());
    let answer: ChannelLookup<ChannelView> = undefined;
    const { calls, load } = lookup(() => answer);
    expect(await cache.find("later", "k1", load)).toBeUndefined();
    answer = view("later");
    expect(await cache.find("later", "k1", load)).toEqual(view("later"));
    expect(calls.n).toBe(2);
  });

  it("forgets everything when cleared", async () => {
    const cache = new ChannelViewCache(new ManualClock());
    const { calls, load } = lookup(() => view("c1"));
    await cache.find("c1", "k1", load);
    cache.clear();
    await cache.find("c1", "k1", load);
    expect(calls.n).toBe(2);
  });

  it("does not keep what a lookup read while a change cleared the cache", async () => {
    const cache = new ChannelViewCache(new ManualClock());
    let n = 0;
    const load = async () => {
      n++;
      // The change lands while this lookup's read is in flight.
      if (n === 1) cache.clear();
      return view("c1");
    };
    await cache.find("c1", "k1", load);
    await cache.find("c1", "k1", load);
    expect(n).toBe(2);
  });

  it("starts over instead of growing past its bound", async () => {
    const cache = new ChannelViewCache(new ManualClock(), TTL_MS, 3);
    for (const id of ["a", "b", "c", "d"]) await cache.find(id, "k1", async () => view(id));
    expect(cache.size).toBe(1);
  });
});
