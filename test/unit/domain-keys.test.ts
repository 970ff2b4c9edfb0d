/** Keys use cases against an in-memory store. */
import { beforeEach, describe, expect, it } from "vitest";
import type { Keys } from "../../src/domain/keys.js";
import { fakeDomain } from "../support/domain.js";
import { refusalCode as refusal } from "../support/errors.js";
import type { FakeAuditLog } from "../support/fakes/audit.js";
import type { FakeKeyStore } from "../support/fakes/keys.js";
import { parseScopes } from "../../src/domain/keys.js";

let store: FakeKeyStore;
let keys: Keys;
let auditLog: FakeAuditLog;

beforeEach(() => {
  ({ keyStore: store, keys, auditLog } = fakeDomain());
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

describe("Key scopes", () => {
  it("keeps the scopes a key was minted with, in catalogue order", async () => {
    const issued = await keys.issue("fleet-1", { via: "admin", scopes: ["messages:claim", "messages:read", "messages:read"] });
    expect(issued.scopes).toEqual(["messages:read", "messages:claim"]);
    expect((await keys.authenticate(issued.key)).scopes).toEqual(["messages:read", "messages:claim"]);
  });

  it("gives a key minted with no scopes every scope (null)", async () => {
    expect((await keys.issue("plain", { via: "admin", scopes: [] })).scopes).toBeNull();
  });

  it("refuses an unknown scope name with invalid_scopes", () => {
    expect(() => parseScopes(["messages:read", "admin"])).toThrow(expect.objectContaining({ code: "invalid_scopes" }));
  });

  it("narrows an unrestricted key to a chosen set, and the cached lookup sees it at once", async () => {
    const issued = await keys.issue("builder");
    const caller = await keys.authenticate(issued.key);
    const record = await keys.narrowScopes(caller, ["channels:read"]);
    expect(record.scopes).toEqual(["channels:read"]);
    expect((await keys.authenticate(issued.key)).scopes).toEqual(["channels:read"]);
  });

  it("refuses to add a scope the key does not hold (scope_widening)", async () => {
    const issued = await keys.issue("reader", { via: "admin", scopes: ["messages:read"] });
    const caller = await keys.authenticate(issued.key);
    expect(await refusal(keys.narrowScopes(caller, ["messages:read", "messages:write"]))).toBe("scope_widening");
  });

  it("refuses an empty set: revoking is the way to give up everything", async () => {
    const caller = await keys.authenticate((await keys.issue("empty")).key);
    expect(await refusal(keys.narrowScopes(caller, []))).toBe("missing_field");
  });

  it("records issue, narrowing and revocation in the audit, and nothing for a refused change", async () => {
    const issued = await keys.issue("audited");
    const caller = await keys.authenticate(issued.key);
    await keys.narrowScopes(caller, ["channels:read"]);
    await refusal(keys.narrowScopes(caller, ["channels:write"]));
    await refusal(keys.issue("audited"));
    await keys.revoke(caller);
    await keys.revoke(caller);
    expect(auditLog.events.map((e) => e.kind)).toEqual(["key.issued", "key.scopes_changed", "key.revoked"]);
  });
});
