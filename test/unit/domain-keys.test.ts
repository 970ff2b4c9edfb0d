/** Keys use cases against an in-memory store. */
import { beforeEach, describe, expect, it } from "vitest";
import type { Keys } from "../../src/domain/keys.js";
import { fakeDomain } from "../support/domain.js";
import { refusalCode as refusal } from "../support/errors.js";
import type { FakeKeyStore } from "../support/fakes/keys.js";

let store: FakeKeyStore;
let keys: Keys;

beforeEach(() => {
  ({ keyStore: store, keys } = fakeDomain());
});

describe("Keys", () => {
  it("authenticates a minted key as its label", async () => {
    const issued = await keys.issue("  builder  ");
    expect(await keys.authenticate(issued.key)).toEqual({ keyId: issued.keyId, agentLabel: "builder", ownerId: "builder", scopes: null });
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
