/**
 * Actors (issue 3, item 2): the default actor of every key, POST/GET
 * /v1/actors and aliases over REST, and the Actors resolvers the message
 * engine uses, against a real database.
 */
import { randomBytes } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { Actors } from "../../src/domain/actors.js";
import type { ActorRef } from "../../src/model/actors.js";
import type { Caller } from "../../src/model/caller.js";
import type { ChannelView } from "../../src/model/channels.js";
import { Channels, type CreateChannelInput } from "../../src/domain/channels.js";
import { ApiError } from "../../src/model/errors.js";
import { PgActorStore } from "../../src/store/actors.js";
import { findChannelView, PgChannelStore } from "../../src/store/channels.js";
import { Db } from "../../src/store/db.js";
import { PgKeyStore } from "../../src/store/keys.js";
import { useTestDatabase } from "../support/database.js";
import { rejectionOf } from "../support/errors.js";
import { mintKey, rest, useSqlClient, useTestServer } from "../support/server.js";

const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
const keyIdOf = (key: string) => key.split(".")[0] as string;

interface Actor {
  id: string;
  name: string;
  description: string;
  owner_id: string;
  created_by_key_id: string;
  metadata: Record<string, unknown>;
  aliases: string[];
  created_at: string;
  updated_at: string;
}

describe("actors over REST", () => {
  const server = useTestServer();
  const sql = useSqlClient(server);
  let key: string;
  let other: string;

  beforeAll(async () => {
    key = await mintKey(server.url, "actor-owner");
    other = await mintKey(server.url, "actor-other");
  });

  const createActor = async (body: Record<string, unknown>, as = key) => {
    const res = await rest<Actor>(server.url, "POST", "/v1/actors", { key: as, body });
    if (res.status !== 201) throw new Error(`create actor failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const addAlias = (actorId: string, alias: unknown, as = key) =>
    rest<Actor>(server.url, "POST", `/v1/actors/${encodeURIComponent(actorId)}/aliases`, { key: as, body: { alias } });

  it("gives every new key a default actor named after its agent_label", async () => {
    const fresh = await mintKey(server.url, "default-haver");
    const { rows } = await sql.query<{ id: string }>(
      "SELECT id::text FROM actors WHERE created_by_key_id = $1 AND is_default",
      [keyIdOf(fresh)],
    );
    expect(rows).toHaveLength(1);
    const res = await rest<Actor>(server.url, "GET", `/v1/actors/${rows[0]!.id}`, { key: other });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "default-haver", owner_id: "default-haver", created_by_key_id: keyIdOf(fresh), aliases: [] });
  });

  it("creates no actor when minting fails on a taken label", async () => {
    const before = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM actors");
    expect((await rest(server.url, "POST", "/v1/keys", { body: { agent_label: "actor-owner" } })).status).toBe(409);
    const after = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM actors");
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
  });

  it("creates an actor owned by the caller, answering 201 with every field", async () => {
    const res = await rest<Actor>(server.url, "POST", "/v1/actors", {
      key,
      body: { name: "reviewer", description: "reviews PRs", metadata: { team: "core", level: 2 } },
    });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual([
      "id", "name", "description", "owner_id", "created_by_key_id", "metadata", "aliases", "created_at", "updated_at",
    ]);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID),
      name: "reviewer",
      description: "reviews PRs",
      owner_id: "actor-owner",
      created_by_key_id: keyIdOf(key),
      metadata: { team: "core", level: 2 },
      aliases: [],
      created_at: expect.stringMatching(TIMESTAMP_6),
      updated_at: expect.stringMatching(TIMESTAMP_6),
    });
  });

  it("defaults description to \"\" and metadata to {}", async () => {
    const actor = await createActor({ name: "bare" });
    expect(actor).toMatchObject({ description: "", metadata: {} });
  });

  const invalid: Array<[string, Record<string, unknown>, string]> = [
    ["no name", {}, "missing_field"],
    ["a blank name", { name: "  " }, "missing_field"],
    ["a name with a control character", { name: "a\u0000b" }, "invalid_string"],
    ["a non-string name", { name: 3 }, "invalid_string"],
    ["non-object metadata", { name: "x", metadata: [1] }, "invalid_object"],
    ["a description with U+0000", { name: "x", description: "\u0000" }, "invalid_string"],
    ["metadata with U+0000", { name: "x", metadata: { k: "\u0000" } }, "invalid_object"],
    ["metadata over 16 KiB", { name: "x", metadata: { blob: "x".repeat(17 * 1024) } }, "metadata_too_large"],
  ];
  for (const [what, body, code] of invalid) {
    it(`answers 422 ${code} with a suggestion for ${what}`, async () => {
      const res = await rest(server.url, "POST", "/v1/actors", { key, body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: code });
      expect(res.body.suggestion).toEqual(expect.any(String));
    });
  }

  it("lets any key get an actor by id or by alias", async () => {
    const actor = await createActor({ name: "lookup" });
    const alias = unique("lookup");
    expect((await addAlias(actor.id, alias)).status).toBe(201);
    const byId = await rest<Actor>(server.url, "GET", `/v1/actors/${actor.id}`, { key: other });
    const byAlias = await rest<Actor>(server.url, "GET", `/v1/actors/${alias}`, { key: other });
    expect(byId.status).toBe(200);
    expect(byAlias.body).toEqual(byId.body);
    expect(byId.body.aliases).toEqual([alias]);
  });

  it("answers 404 actor_not_found for an unknown id or alias", async () => {
    for (const identifier of ["6f1c0d1e-0000-4000-8000-000000000000", "nobody"]) {
      const res = await rest(server.url, "GET", `/v1/actors/${identifier}`, { key });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: "actor_not_found" });
    }
  });

  it("answers 422 invalid_string for an id with U+0000 (refused at decode, issue 11)", async () => {
    const res = await rest(server.url, "GET", "/v1/actors/nul%00byte", { key });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_string" });
  });

  it("adds aliases, answering 201 with them sorted and updated_at moved", async () => {
    const actor = await createActor({ name: "multi" });
    const [z, a] = [unique("z"), unique("a")];
    await addAlias(actor.id, z);
    const res = await addAlias(actor.id, a);
    expect(res.status).toBe(201);
    expect(res.body.aliases).toEqual([a, z]);
    expect(res.body.updated_at > actor.updated_at).toBe(true);
  });

  it("answers 201 again for an alias the actor already has", async () => {
    const actor = await createActor({ name: "repeat" });
    const alias = unique("repeat");
    await addAlias(actor.id, alias);
    const again = await addAlias(alias, alias);
    expect(again.status).toBe(201);
    expect(again.body.aliases).toEqual([alias]);
  });

  it("answers 409 alias_conflict when another actor has the alias", async () => {
    const alias = unique("contested");
    const first = await createActor({ name: "first" });
    const second = await createActor({ name: "second" });
    await addAlias(first.id, alias);
    const res = await addAlias(second.id, alias);
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "alias_conflict" });
  });

  it("answers 409 alias_conflict for a look-alike of another actor's alias (case, spacing, full-width)", async () => {
    const alias = unique("lookalike");
    const first = await createActor({ name: "first" });
    const second = await createActor({ name: "second" });
    expect((await addAlias(first.id, alias)).status).toBe(201);
    const fullWidth = alias.replace(/[!-~]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0));
    for (const lookAlike of [alias.toUpperCase(), ` ${alias}`, fullWidth]) {
      const res = await addAlias(second.id, lookAlike);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ error: "alias_conflict" });
    }
  });

  it("keeps actor aliases separate from channel aliases", async () => {
    const alias = unique("shared-name");
    const channel = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: "c", mode: "broadcast" } });
    expect((await rest(server.url, "POST", `/v1/channels/${channel.body.id}/aliases`, { key, body: { alias } })).status).toBe(201);
    const actor = await createActor({ name: "a" });
    expect((await addAlias(actor.id, alias)).status).toBe(201);
  });

  it("answers 403 actor_forbidden when another key adds an alias", async () => {
    const actor = await createActor({ name: "guarded" });
    const res = await addAlias(actor.id, unique("hijack"), other);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "actor_forbidden" });
  });

  it("answers 422 for a blank or UUID-shaped alias", async () => {
    const actor = await createActor({ name: "picky" });
    expect((await addAlias(actor.id, " ")).body).toMatchObject({ error: "missing_field" });
    expect((await addAlias(actor.id, "6f1c0d1e-0000-4000-8000-000000000000")).body).toMatchObject({ error: "invalid_string" });
  });

  it("answers 404 actor_not_found when adding an alias to an unknown actor", async () => {
    const res = await addAlias("ghost", unique("ghost"));
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "actor_not_found" });
  });
});

describe("Actors resolvers", () => {
  const database = useTestDatabase();
  let db: Db;
  let actors: Actors;
  let channels: Channels;
  let alice: Caller;
  let bob: Caller;
  let carol: Caller;

  const newKey = async (label: string): Promise<Caller> => {
    const keyId = `ak_${randomBytes(12).toString("base64url")}`;
    const outcome = await new PgKeyStore(db).insert({ keyId, secretHash: randomBytes(32), agentLabel: label, ownerId: label, labelKey: label, scopes: null });
    expect(outcome).toBe("inserted");
    return { keyId, agentLabel: label, ownerId: label };
  };
  const createActor = (caller: Caller, name: string) => actors.create(caller, { name, description: undefined, metadata: undefined });
  const createChannel = async (caller: Caller, access: "open" | "restricted"): Promise<ChannelView> => {
    const input: CreateChannelInput = {
      name: unique("ch"), mode: "broadcast", access, discoverable: undefined, description: undefined, metadataSchema: undefined,
      pinnedMessage: undefined, webhookUrl: undefined, webhookSecret: undefined, relatedChannels: [], ttlSeconds: undefined,
      retentionDays: undefined, maxMessages: undefined, maxWritesPerMinute: undefined, maxDeliveries: undefined, deadLetterChannel: undefined,
    };
    const created = await channels.create(caller, input);
    return (await findChannelView(db, created.id, caller.keyId)) as ChannelView;
  };
  const rejection = (promise: Promise<unknown>) => rejectionOf(ApiError, promise);
  const countActors = async (keyId: string, name: string) =>
    (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM actors WHERE created_by_key_id = $1 AND name = $2", [keyId, name])).rows[0]!.n;

  beforeAll(async () => {
    db = new Db(database.pool);
    actors = new Actors(new PgActorStore(db), (fn) => db.afterCommit(fn));
    channels = new Channels(new PgChannelStore(db), { defaultDiscoverable: true });
    alice = await newKey("alice");
    bob = await newKey("bob");
    carol = await newKey("carol");
  });

  describe("defaultActor", () => {
    it("returns the actor created with the key, named after its label", async () => {
      const actor = await actors.defaultActor(alice);
      expect(actor).toEqual({ id: expect.stringMatching(UUID), name: "alice" });
      expect(await actors.defaultActor(alice)).toEqual(actor);
    });

    it("creates the default actor of a key that has none", async () => {
      const keyId = `ak_${randomBytes(12).toString("base64url")}`;
      await db.query("INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id) VALUES ($1, $2, 'orphan', 'orphan')", [
        keyId,
        randomBytes(32),
      ]);
      const caller = { keyId, agentLabel: "orphan", ownerId: "orphan" };
      const actor = await actors.defaultActor(caller);
      expect(actor.name).toBe("orphan");
      expect(await new Actors(new PgActorStore(db), (fn) => db.afterCommit(fn)).defaultActor(caller)).toEqual(actor);
    });
  });

  describe("resolveOwn", () => {
    it("finds the caller's actor by id and by alias", async () => {
      const actor = await createActor(alice, "poster");
      const alias = unique("poster");
      await actors.addAlias(alice, actor.id, alias);
      expect(await actors.resolveOwn(alice, actor.id)).toEqual({ id: actor.id, name: "poster" });
      expect(await actors.resolveOwn(alice, alias)).toEqual({ id: actor.id, name: "poster" });
    });

    it("answers 404 actor_not_found for an unknown id or alias, and never matches by name", async () => {
      await createActor(alice, "named-only");
      expect((await rejection(actors.resolveOwn(alice, "named-only"))).code).toBe("actor_not_found");
      expect((await rejection(actors.resolveOwn(alice, "6f1c0d1e-0000-4000-8000-000000000000"))).code).toBe("actor_not_found");
    });

    it("answers 403 actor_forbidden for another key's actor", async () => {
      const actor = await createActor(bob, "bobs");
      expect((await rejection(actors.resolveOwn(alice, actor.id))).code).toBe("actor_forbidden");
    });

    it("answers 422 invalid_string for a blank reference", async () => {
      expect((await rejection(actors.resolveOwn(alice, " "))).code).toBe("invalid_string");
    });
  });

  describe("resolveForClaim", () => {
    it("uses the default actor when no actor is given", async () => {
      expect(await actors.resolveForClaim(alice, undefined)).toEqual(await actors.defaultActor(alice));
    });

    it("finds the caller's actor by id, alias or name", async () => {
      const actor = await createActor(alice, "worker");
      const alias = unique("worker");
      await actors.addAlias(alice, actor.id, alias);
      const ref: ActorRef = { id: actor.id, name: "worker" };
      expect(await actors.resolveForClaim(alice, actor.id)).toEqual(ref);
      expect(await actors.resolveForClaim(alice, alias)).toEqual(ref);
      expect(await actors.resolveForClaim(alice, "worker")).toEqual(ref);
    });

    it("prefers the default actor when the name is the key's label", async () => {
      expect(await actors.resolveForClaim(alice, "alice")).toEqual(await actors.defaultActor(alice));
    });

    it("creates an actor for the caller on an unknown name, once", async () => {
      const name = unique("new-worker");
      const first = await actors.resolveForClaim(alice, name);
      expect(first.name).toBe(name);
      expect(await actors.resolveForClaim(alice, name)).toEqual(first);
      const stored = await actors.get(first.id);
      expect(stored).toMatchObject({ createdByKeyId: alice.keyId, ownerId: "alice", isDefault: false });
    });

    it("creates one actor when many claims name the same new actor at once", async () => {
      const name = unique("racer");
      const refs = await Promise.all(Array.from({ length: 8 }, () => actors.resolveForClaim(bob, name)));
      expect(new Set(refs.map((r) => r.id)).size).toBe(1);
      expect(await countActors(bob.keyId, name)).toBe(1);
    });

    it("answers 403 actor_forbidden for another key's actor id or alias", async () => {
      const actor = await createActor(bob, "bob-worker");
      const alias = unique("bob-worker");
      await actors.addAlias(bob, actor.id, alias);
      expect((await rejection(actors.resolveForClaim(alice, actor.id))).code).toBe("actor_forbidden");
      expect((await rejection(actors.resolveForClaim(alice, alias))).code).toBe("actor_forbidden");
    });

    it("matches its own actor's name before another key's alias", async () => {
      const name = unique("contested");
      const mine = await createActor(alice, name);
      const theirs = await createActor(bob, "squatter");
      await actors.addAlias(bob, theirs.id, name);
      expect(await actors.resolveForClaim(alice, name)).toEqual({ id: mine.id, name });
    });

    it("creates per key: another key's actor name is not shared", async () => {
      const name = unique("same-name");
      const bobs = await actors.resolveForClaim(bob, name);
      const alices = await actors.resolveForClaim(alice, name);
      expect(alices.id).not.toBe(bobs.id);
    });

    it("answers 404 actor_not_found for an unknown UUID instead of creating an actor named after it", async () => {
      expect((await rejection(actors.resolveForClaim(alice, "6f1c0d1e-0000-4000-8000-000000000001"))).code).toBe("actor_not_found");
    });

    it("answers 422 for a blank, NUL or invisible-character name", async () => {
      expect((await rejection(actors.resolveForClaim(alice, ""))).code).toBe("invalid_string");
      expect((await rejection(actors.resolveForClaim(alice, "a\u0000b"))).code).toBe("invalid_string");
      expect((await rejection(actors.resolveForClaim(alice, "a\u202Eb"))).code).toBe("invalid_string");
    });
  });

  describe("resolveMentions", () => {
    it("keeps every known actor on an open channel, in order, de-duplicated, dropping unknown ones", async () => {
      const channel = await createChannel(alice, "open");
      const a = await createActor(bob, "mention-a");
      const b = await createActor(carol, "mention-b");
      const alias = unique("mention-a");
      await actors.addAlias(bob, a.id, alias);
      const mentioned = await actors.resolveMentions([b.id, "nobody", alias, a.id, b.id, "6f1c0d1e-0000-4000-8000-000000000002"], channel);
      expect(mentioned).toEqual([
        { id: b.id, name: "mention-b" },
        { id: a.id, name: "mention-a" },
      ]);
    });

    it("keeps only actors whose key is the owner or a member on a restricted channel", async () => {
      const channel = await createChannel(alice, "restricted");
      await db.query("INSERT INTO channel_members (channel_id, key_id) VALUES ($1, $2)", [channel.id, bob.keyId]);
      const owners = await createActor(alice, "owner-actor");
      const members = await createActor(bob, "member-actor");
      const outsiders = await createActor(carol, "outsider-actor");
      const mentioned = await actors.resolveMentions([outsiders.id, members.id, owners.id], channel);
      expect(mentioned.map((m) => m.id)).toEqual([members.id, owners.id]);
    });

    it("drops a mention containing U+0000 like any unknown one", async () => {
      const channel = await createChannel(alice, "open");
      const actor = await createActor(alice, "nul-neighbour");
      expect(await actors.resolveMentions(["a\u0000b", actor.id], channel)).toEqual([{ id: actor.id, name: "nul-neighbour" }]);
    });

    it("returns [] for no mentions", async () => {
      const channel = await createChannel(alice, "open");
      expect(await actors.resolveMentions([], channel)).toEqual([]);
    });

    it("answers 422 invalid_mentions for a blank entry", async () => {
      const channel = await createChannel(alice, "open");
      const err = await rejection(actors.resolveMentions(["ok", "  "], channel));
      expect(err.code).toBe("invalid_mentions");
      expect(err.message).toContain("mentions[1]");
    });

    it("answers 422 invalid_mentions for more than 100 entries", async () => {
      const channel = await createChannel(alice, "open");
      const refs = Array.from({ length: 101 }, (_, i) => `m${i}`);
      expect((await rejection(actors.resolveMentions(refs, channel))).code).toBe("invalid_mentions");
    });
  });
});
