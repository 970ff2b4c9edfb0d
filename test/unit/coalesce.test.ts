import { describe, expect, it } from "vitest";
import { Coalescer, takeDistinct, takeUpTo } from "../../src/store/coalesce.js";

/** A statement that records each batch and answers when released. */
function recorder() {
  const batches: string[][] = [];
  const gates: Array<() => void> = [];
  const run = (_key: string, inputs: readonly string[]) => {
    batches.push([...inputs]);
    return new Promise<string[]>((resolve) => gates.push(() => resolve(inputs.map((i) => `done ${i}`))));
  };
  const releaseNext = async () => {
    await new Promise((r) => setImmediate(r));
    gates.shift()?.();
    await new Promise((r) => setImmediate(r));
  };
  return { batches, run, releaseNext };
}

describe("Coalescer", () => {
  it("sends a lone request at once and batches the ones that arrive while it is in flight", async () => {
    const r = recorder();
    const c = new Coalescer<string, string>({ take: takeUpTo(10), run: r.run, retryAlone: () => false });
    const answers = ["a", "b", "c"].map((x) => c.submit("k", x));
    expect(r.batches).toEqual([["a"]]);
    await r.releaseNext();
    expect(r.batches).toEqual([["a"], ["b", "c"]]);
    await r.releaseNext();
    expect(await Promise.all(answers)).toEqual(["done a", "done b", "done c"]);
  });

  it("keeps a queue per key", () => {
    const r = recorder();
    const c = new Coalescer<string, string>({ take: takeUpTo(10), run: r.run, retryAlone: () => false });
    void c.submit("one", "a");
    void c.submit("two", "b");
    expect(r.batches).toEqual([["a"], ["b"]]);
  });

  it("takes at most the batch limit", async () => {
    const r = recorder();
    const c = new Coalescer<string, string>({ take: takeUpTo(2), run: r.run, retryAlone: () => false });
    for (const x of ["a", "b", "c", "d"]) void c.submit("k", x);
    await r.releaseNext();
    await r.releaseNext();
    expect(r.batches).toEqual([["a"], ["b", "c"], ["d"]]);
  });

  it("puts an item whose identity is already in the batch into a later one", async () => {
    const r = recorder();
    const c = new Coalescer<string, string>({ take: takeDistinct(10, (x) => x.split(":")[0]!), run: r.run, retryAlone: () => false });
    for (const x of ["a:1", "b:1", "a:2", "c:1", "a:3"]) void c.submit("k", x);
    await r.releaseNext();
    await r.releaseNext();
    await r.releaseNext();
    expect(r.batches).toEqual([["a:1"], ["b:1", "a:2", "c:1"], ["a:3"]]);
  });

  it("runs a refused batch again item by item, failing only the items refused alone", async () => {
    const c = new Coalescer<string, string>({
      take: takeUpTo(10),
      run: async (_k, inputs) => {
        if (inputs.includes("bad")) throw new Error("refused");
        return inputs.map((i) => `done ${i}`);
      },
      retryAlone: () => true,
    });
    const first = c.submit("k", "first");
    const rest = ["x", "bad", "y"].map((x) => c.submit("k", x).catch((e: Error) => e.message));
    expect(await first).toBe("done first");
    expect(await Promise.all(rest)).toEqual(["done x", "refused", "done y"]);
  });

  it("fails the whole batch when the failure may have committed part of it", async () => {
    const c = new Coalescer<string, string>({
      take: takeUpTo(10),
      run: async (_k, inputs) => {
        if (inputs.length > 1) throw new Error("connection lost");
        return inputs.map((i) => `done ${i}`);
      },
      retryAlone: () => false,
    });
    void c.submit("k", "first");
    const rest = ["x", "y"].map((x) => c.submit("k", x).catch((e: Error) => e.message));
    expect(await Promise.all(rest)).toEqual(["connection lost", "connection lost"]);
  });
});
