/** Actor webhook use cases (src/domain/actor-webhooks.ts) over an in-memory WebhookStore. */
import { describe, expect, it } from "vitest";
import { ActorWebhooks } from "../../src/domain/actor-webhooks.js";
import { ManualClock } from "../support/clock.js";
import { caller } from "../support/domain.js";
import { refusalCode as code } from "../support/errors.js";
import { FakeWebhookStore } from "../support/fakes/webhooks.js";

const owner = caller("owner");
const stranger = caller("stranger");
const ACTOR = "0b7c6a1e-5f4d-4c3b-9a2e-1d0f9e8c7b6a";

function setup() {
  const store = new FakeWebhookStore();
  store.actors.set(ACTOR, { id: ACTOR, createdByKeyId: owner.keyId });
  return { store, webhooks: new ActorWebhooks(store, new ManualClock()) };
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

  it("refuses a loopback url unless private targets are allowed, as mention pushes are delivered", async () => {
    const { store } = setup();
    expect(await code(new ActorWebhooks(store, new ManualClock()).set(owner, ACTOR, "http://127.0.0.1:9/hook", undefined))).toBe("invalid_webhook_url");
    const allowed = new ActorWebhooks(store, new ManualClock(), { allowPrivateTargets: true });
    expect(await allowed.set(owner, ACTOR, "http://127.0.0.1:9/hook", undefined)).toMatchObject({ url: "http://127.0.0.1:9/hook" });
  });

  it("requires a url before looking at the actor", async () => {
    const { webhooks } = setup();
    expect(await code(webhooks.set(stranger, ACTOR, undefined, undefined))).toBe("missing_field");
  });
});
