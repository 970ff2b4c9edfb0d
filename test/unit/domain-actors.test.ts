/** Actors use cases against an in-memory store. */
import { beforeEach, describe, expect, it } from "vitest";
import { Actors } from "../../src/domain/actors.js";
import type { Caller } from "../../src/model/caller.js";
import type { ChannelView } from "../../src/model/channels.js";
import { alice, bob, fakeDomain } from "../support/domain.js";
import { refusalCode as refusal } from "../support/errors.js";
import type { FakeActorStore } from "../support/fakes/actors.js";

let store: FakeActorStore;
let actors: Actors;

beforeEach(() => {
  ({ actorStore: store, actors } = fakeDomain());
});

const newActor = (owner: Caller, name: string) => actors.create(owner, { name, description: undefined, metadata: undefined });

describe("Actors", () => {
  it("creates a key's default actor once, named after its agent label", async () => {
    const first = await actors.defaultActor(alice);
    const again = await new Actors(store, (fn) => fn()).defaultActor(alice);
    expect(first).toEqual({ id: again.id, name: "alice" });
    expect([...store.actors.values()].filter((a) => a.isDefault)).toHaveLength(1);
  });

  it("creates an actor for a new name given to a claim, and finds the same one next time", async () => {
    const created = await actors.resolveForClaim(alice, "reviewer");
    expect(await actors.resolveForClaim(alice, "reviewer")).toEqual(created);
    expect(store.actors.size).toBe(1);
  });

  it("refuses to post as another key's actor with actor_forbidden", async () => {
    const bobs = await newActor(bob, "bobs-bot");
    expect(await refusal(actors.resolveOwn(alice, bobs.id))).toBe("actor_forbidden");
  });

  it("refuses an alias another actor holds with alias_conflict", async () => {
    const first = await newActor(alice, "one");
    const second = await newActor(alice, "two");
    await actors.addAlias(alice, first.id, "helper");
    expect(await refusal(actors.addAlias(alice, second.id, "helper"))).toBe("alias_conflict");
  });

  it("drops mentions of actors whose keys cannot read a restricted channel", async () => {
    const mine = await newActor(alice, "mine");
    const theirs = await newActor(bob, "theirs");
    const channel = { id: "c1", access: "restricted", createdByKeyId: alice.keyId } as ChannelView;
    expect(await actors.resolveMentions([mine.id, theirs.id], channel)).toEqual([{ id: mine.id, name: "mine" }]);
  });
});
