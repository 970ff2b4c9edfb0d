/** Keys use cases against an in-memory store. */
import { beforeEach, describe, expect, it } from "vitest";
import { Keys } from "../../src/domain/keys.js";
import { ApiError } from "../../src/model/errors.js";
import { AdjustableClock } from "../support/clock.js";
import { FakeKeyStore } from "../support/fakes/keys.js";

const refusal = async (promise: Promise<unknown>): Promise<string> => {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  return (err as ApiError).code;
};

let store: FakeKeyStore;
let keys: Keys;

beforeEach(() => {
  store = new FakeKeyStore();
  keys = new Keys(store, { clock: new AdjustableClock(), cacheTtlMs: 5_000 });
});

describe("Keys", () => {
  it("authenticates a minted key as its label", async () => {
    const issued = await keys.issue("  builder  ");
    expect(await keys.authenticate(issued.key)).toEqual({ keyId: issued.keyId, agentLabel: "builder", ownerId: "builder" });
  });

  it("refuses a key with the right id and a wrong secret", async () => {
    const issued = await keys.issue("builder");
    expect(await refusal(keys.authenticate(`${issued.keyId}.${"x".repeat(32)}`))).toBe("unauthorized");
  });

  it("refuses a label that only differs from an active key's in case with label_in_use", async () => {
    await keys.issue("Builder");
    expect(await refusal(keys.issue("builder"))).toBe("label_in_use");
  });

  it("refuses a revoked key at once on this process", async () => {
    const issued = await keys.issue("builder");
    const caller = await keys.authenticate(issued.key);
    await keys.revoke(caller);
    expect(await refusal(keys.authenticate(issued.key))).toBe("unauthorized");
  });

  it("answers a repeated authentication from its cache", async () => {
    const issued = await keys.issue("builder");
    await keys.authenticate(issued.key);
    const reads = store.reads;
    await keys.authenticate(issued.key);
    expect(store.reads).toBe(reads);
  });
});
