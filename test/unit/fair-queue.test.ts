/**
 * The order the schema thread serves keys in (src/domain/fair-queue.ts,
 * docs/decisions.md#schemas-off-thread): one key's backlog must not stand
 * between another key and the thread. No threads here: the order is the
 * queue's alone.
 */
import { describe, expect, it } from "vitest";
import { FairQueue } from "../../src/domain/fair-queue.js";

/** Takes and finishes items one at a time, as a window of one does, and answers them in order. */
function drain(queue: FairQueue<string>): string[] {
  const order: string[] = [];
  for (let next = queue.take(); next !== undefined; next = queue.take()) {
    order.push(next.item);
    queue.done(next.key);
  }
  return order;
}

describe("the fair queue of the schema thread", () => {
  it("serves keys round-robin, so a key that arrives behind another's backlog goes next", () => {
    const queue = new FairQueue<string>(10);
    for (let i = 1; i <= 4; i++) queue.push("a", `a${i}`);
    queue.push("b", "b1");
    queue.push("b", "b2");
    queue.push("c", "c1");
    expect(drain(queue)).toEqual(["a1", "b1", "c1", "a2", "b2", "a3", "a4"]);
  });

  it("keeps each key's own items in the order they came (FIFO within a key)", () => {
    const queue = new FairQueue<string>(10);
    for (const item of ["x1", "x2", "x3"]) queue.push("x", item);
    queue.push("y", "y1");
    expect(drain(queue).filter((item) => item.startsWith("x"))).toEqual(["x1", "x2", "x3"]);
  });

  it("serves a key that was not served yet before the keys served already (least recently served first)", () => {
    const queue = new FairQueue<string>(10);
    queue.push("a", "a1");
    queue.push("a", "a2");
    const first = queue.take()!;
    expect(first.item).toBe("a1");
    // b arrives while a1 is on the thread: it goes before a2, which waits behind it.
    queue.push("b", "b1");
    queue.done(first.key);
    expect(drain(queue)).toEqual(["b1", "a2"]);
  });

  it("never hands out a second item of a key while its first is out", () => {
    const queue = new FairQueue<string>(10);
    queue.push("a", "a1");
    queue.push("a", "a2");
    queue.push("b", "b1");
    const taken = [queue.take()!, queue.take()!];
    expect(taken.map((t) => t.item)).toEqual(["a1", "b1"]);
    // a2 waits: a's first item is still out, and b has no more.
    expect(queue.take()).toBeUndefined();
    queue.done("a");
    expect(queue.take()?.item).toBe("a2");
  });

  it("refuses a key's item beyond its bound, counting the one out, and leaves other keys alone", () => {
    const queue = new FairQueue<string>(3);
    expect(["a1", "a2", "a3"].map((item) => queue.push("a", item))).toEqual([true, true, true]);
    expect(queue.push("a", "a4")).toBe(false);
    expect(queue.push("b", "b1")).toBe(true);
    const out = queue.take()!;
    expect(out.item).toBe("a1");
    // a1 is out but not done: a still holds three.
    expect(queue.push("a", "a4")).toBe(false);
    queue.done(out.key);
    expect(queue.push("a", "a4")).toBe(true);
    expect(drain(queue)).toEqual(["b1", "a2", "a3", "a4"]);
  });

  it("forgets a key once it has nothing waiting or out", () => {
    const queue = new FairQueue<string>(2);
    queue.push("a", "a1");
    queue.done(queue.take()!.key);
    expect(queue.held("a")).toBe(0);
    // A key that comes back is new again: it goes before keys already served.
    queue.push("b", "b1");
    queue.push("b", "b2");
    queue.done(queue.take()!.key);
    queue.push("a", "a2");
    expect(drain(queue)).toEqual(["a2", "b2"]);
  });
});
