/** Actor webhook use cases (src/domain/actor-webhooks.ts) over an in-memory WebhookStore. */
import { describe, expect, it } from "vitest";
import { ActorWebhooks } from "../../src/domain/actor-webhooks.js";
import type { Caller } from "../../src/model/caller.js";
import { ApiError } from "../../src/model/errors.js";
import { AdjustableClock } from "../support/clock.js";
import { FakeWebhookStore } from "../support/fakes/webhooks.js";

const caller = (keyId: string): Caller => ({ keyId, agentLabel: keyId, ownerId: keyId });
const owner = caller("key-owner");
const stranger = caller("key-stranger");
const ACTOR = "0b7c6a1e-5f4d-4c3b-9a2e-1d0f9e8c7b6a";

function setup() {
  const store = new FakeWebhookStore();
  store.actors.set(ACTOR, { id: ACTOR, createdByKeyId: owner.keyId });
  return { store, webhooks: new ActorWebhooks(store, new AdjustableClock()) };
}

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return (err as ApiError).code;
}

describe("ActorWebhooks", () => {
  it("registers, shows (without the secret) and removes the webhook of the owner's actor", async () => {
    const { webhooks } = setup();
    const set = await webhooks.set(owner, ACTOR, "https://example.com/hook", "s3cret-s3cret-s3cret");
    expect(set).toMatchObject({ actorId: ACTOR, url: "https://example.com/hook", hasSecret: true });
    expect(await webhooks.get(owner, ACTOR)).toEqual(set);
    await webhooks.delete(owner, ACTOR);
    expect(await code(webhooks.get(owner, ACTOR))).toBe("webhook_not_found");
    expect(await code(webhooks.delete(owner, ACTOR))).toBe("webhook_not_found");
  });

  it("refuses another key with actor_forbidden", async () => {
    const { webhooks } = setup();
    expect(await code(webhooks.set(stranger, ACTOR, "https://example.com/hook", undefined))).toBe("actor_forbidden");
  });

  it("answers actor_not_found for an unknown id and for anything that is not a UUID", async () => {
    const { webhooks } = setup();
    expect(await code(webhooks.get(owner, "9b7c6a1e-5f4d-4c3b-9a2e-1d0f9e8c7b6a"))).toBe("actor_not_found");
    expect(await code(webhooks.get(owner, "some-alias"))).toBe("actor_not_found");
  });

  it("requires a url before looking at the actor", async () => {
    const { webhooks } = setup();
    expect(await code(webhooks.set(stranger, ACTOR, undefined, undefined))).toBe("missing_field");
  });
});
