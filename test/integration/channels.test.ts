/**
 * Channels over REST (and the key paths over gRPC): create, get, discovery,
 * update, delete and aliases (issue 3, item 1).
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { ChannelAccess, ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { Channels, type CreateChannelInput } from "../../src/domain/channels.js";
import { PgChannelStore } from "../../src/store/channels.js";
import { Db } from "../../src/store/db.js";
import { PgKeyStore } from "../../src/store/keys.js";
import { createTestDatabase } from "../support/database.js";
import { mintKey, rest, startTestServer, useSqlClient, useTestServer } from "../support/server.js";
import { untilWaitingForLock } from "../support/locks.js";

const TIMESTAMP_6 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Channel {
  id: string;
  name: string;
  mode: string;
  access: string;
  discoverable: boolean;
  description: string;
  owner_id: string;
  created_by_key_id: string;
  metadata_schema: Record<string, unknown>;
  pinned_message: string | null;
  ttl_seconds: number;
  retention_days: number;
  max_messages: number | null;
  max_writes_per_minute: number | null;
  paused: boolean;
  aliases: string[];
  related_channels: Array<{ id: string; name: string; mode: string }>;
  created_at: string;
  updated_at: string;
}

interface Summary {
  id: string;
  name: string;
  mode: string;
  access: string;
  description: string;
  created_at: string;
  is_member: boolean;
}

interface Page {
  data: Summary[];
  limit: number;
  next_cursor: string | null;
}

const server = useTestServer();
const sql = useSqlClient(server);
let owner: string;
let stranger: string;

beforeAll(async () => {
  owner = await mintKey(server.url, "owner");
  stranger = await mintKey(server.url, "stranger");
});

const keyIdOf = (key: string) => key.split(".")[0] as string;
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

async function createChannel(body: Record<string, unknown>, key = owner): Promise<Channel> {
  const res = await rest<Channel>(server.url, "POST", "/v1/channels", { key, body: { mode: "broadcast", ...body } });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const patch = (identifier: string, body: unknown, key = owner) =>
  rest<Channel & { error?: string; fields?: string[] }>(server.url, "PATCH", `/v1/channels/${encodeURIComponent(identifier)}`, { key, body });

const grpc = () => createClient(ChannelService, createGrpcTransport({ baseUrl: server.url }));
const asConnectError = (e: unknown) => ConnectError.from(e);

describe("POST /v1/channels", () => {
  it("creates a channel with every default, every field present (json-all-fields), webhook_url null", async () => {
    const res = await rest<Channel>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "defaults", mode: "claimable" } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body)).toEqual([
      "id", "name", "mode", "access", "discoverable", "description", "owner_id", "created_by_key_id", "metadata_schema",
      "pinned_message", "ttl_seconds", "retention_days", "max_messages", "max_writes_per_minute", "paused", "aliases",
      "related_channels", "created_at", "updated_at", "max_deliveries", "dead_letter_channel_id", "webhook_url",
      "group_concurrency", "dispatch", "priority_aging_seconds", "limits", "a2a", "a2a_forward",
    ]);
    expect(res.body).toEqual({
      id: expect.stringMatching(UUID),
      name: "defaults",
      mode: "claimable",
      access: "open",
      discoverable: true,
      description: "",
      owner_id: "owner",
      created_by_key_id: keyIdOf(owner),
      metadata_schema: {},
      pinned_message: null,
      ttl_seconds: 86400,
      retention_days: 7,
      max_messages: null,
      max_writes_per_minute: null,
      paused: false,
      aliases: [],
      related_channels: [],
      created_at: expect.stringMatching(TIMESTAMP_6),
      updated_at: expect.stringMatching(TIMESTAMP_6),
      max_deliveries: null,
      dead_letter_channel_id: null,
      webhook_url: null,
      group_concurrency: null,
      dispatch: "fifo",
      priority_aging_seconds: null,
      limits: [],
      a2a: null,
      a2a_forward: null,
    });
    expect(res.body.updated_at).toBe(res.body.created_at);
  });

  it("stores every given field and renders them back", async () => {
    const schema = { type: "object", properties: { priority: { type: "integer" } } };
    const given = {
      name: "  full  ",
      mode: "broadcast",
      access: "restricted",
      discoverable: true,
      description: "all fields",
      metadata_schema: schema,
      pinned_message: "read me",
      ttl_seconds: 300,
      retention_days: 365,
      max_messages: 10,
      max_writes_per_minute: 1000000,
    };
    const res = await rest<Channel>(server.url, "POST", "/v1/channels", { key: owner, body: given });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject(given);
  });

  it("makes a restricted channel not discoverable by default", async () => {
    const channel = await createChannel({ name: "private", access: "restricted" });
    expect(channel.discoverable).toBe(false);
  });

  it("stores webhook_url and webhook_secret, shows the URL to the owner only and never the secret", async () => {
    const res = await rest<Channel>(server.url, "POST", "/v1/channels", {
      key: owner,
      body: { name: "hooked", mode: "broadcast", webhook_url: "https://example.com/hook", webhook_secret: "s3cret-value" },
    });
    expect(res.status).toBe(201);
    expect(JSON.stringify(res.body)).not.toContain("s3cret-value");
    expect(res.body).toHaveProperty("webhook_url", "https://example.com/hook");
    const stranger = await mintKey(server.url);
    const seen = await rest<Channel>(server.url, "GET", `/v1/channels/${res.body.id}`, { key: stranger });
    expect(seen.body).toHaveProperty("webhook_url", null);
    const { rows } = await sql.query("SELECT webhook_url, webhook_secret FROM channels WHERE id = $1", [res.body.id]);
    expect(rows[0]).toEqual({ webhook_url: "https://example.com/hook", webhook_secret: "s3cret-value" });
  });

  it("makes the creating key the owner and first member", async () => {
    const channel = await createChannel({ name: "membership" });
    const { rows } = await sql.query("SELECT key_id FROM channel_members WHERE channel_id = $1", [channel.id]);
    expect(rows).toEqual([{ key_id: keyIdOf(owner) }]);
  });

  it("ignores unknown body fields on create (json-bodies)", async () => {
    const res = await rest(server.url, "POST", "/v1/channels", { key: owner, body: { name: "lenient", mode: "broadcast", colour: "blue" } });
    expect(res.status).toBe(201);
  });

  it("links related channels given by id or alias, sorted by name, duplicates collapsed", async () => {
    const zeta = await createChannel({ name: "zeta" });
    const alpha = await createChannel({ name: "alpha", mode: "claimable" });
    const alias = unique("alpha");
    expect((await rest(server.url, "POST", `/v1/channels/${alpha.id}/aliases`, { key: owner, body: { alias } })).status).toBe(201);
    const channel = await createChannel({ name: "hub", related_channels: [zeta.id, alias, alpha.id] });
    expect(channel.related_channels).toEqual([
      { id: alpha.id, name: "alpha", mode: "claimable" },
      { id: zeta.id, name: "zeta", mode: "broadcast" },
    ]);
  });

  it("answers 404 channel_not_found for an unknown related channel", async () => {
    const res = await rest(server.url, "POST", "/v1/channels", {
      key: owner,
      body: { name: "dangling", mode: "broadcast", related_channels: ["no-such-channel"] },
    });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "channel_not_found" });
    expect(String(res.body.message)).toContain("no-such-channel");
  });

  const invalid: Array<[string, Record<string, unknown>, string]> = [
    ["no name", { mode: "broadcast" }, "missing_field"],
    ["a blank name", { name: "   ", mode: "broadcast" }, "missing_field"],
    ["a name over 200 characters", { name: "n".repeat(201), mode: "broadcast" }, "invalid_channel_name"],
    ["a name with a zero-width character", { name: "a\u200Bb", mode: "broadcast" }, "invalid_channel_name"],
    ["a non-string name", { name: 7, mode: "broadcast" }, "invalid_string"],
    ["no mode", { name: "x" }, "missing_field"],
    ["an unknown mode", { name: "x", mode: "fanout" }, "invalid_mode"],
    ["an unknown access", { name: "x", mode: "broadcast", access: "secret" }, "invalid_access"],
    ["a non-boolean discoverable", { name: "x", mode: "broadcast", discoverable: "yes" }, "invalid_discoverable"],
    ["a non-string description", { name: "x", mode: "broadcast", description: 1 }, "invalid_string"],
    ["a non-object metadata_schema", { name: "x", mode: "broadcast", metadata_schema: [] }, "invalid_object"],
    ["an invalid JSON Schema", { name: "x", mode: "broadcast", metadata_schema: { type: "object", properties: { a: { type: 5 } } } }, "invalid_object"],
    ["a relative webhook_url", { name: "x", mode: "broadcast", webhook_url: "/hook" }, "invalid_webhook_url"],
    ["a non-http webhook_url", { name: "x", mode: "broadcast", webhook_url: "file:///etc/passwd" }, "invalid_webhook_url"],
    ["an empty webhook_secret", { name: "x", mode: "broadcast", webhook_secret: "" }, "invalid_string"],
    ["a non-array related_channels", { name: "x", mode: "broadcast", related_channels: "a" }, "invalid_related_channels"],
    ["a blank related channel", { name: "x", mode: "broadcast", related_channels: [""] }, "invalid_related_channels"],
    ["ttl_seconds 299", { name: "x", mode: "broadcast", ttl_seconds: 299 }, "invalid_ttl_seconds"],
    ["ttl_seconds 2592001", { name: "x", mode: "broadcast", ttl_seconds: 2592001 }, "invalid_ttl_seconds"],
    ["a string ttl_seconds", { name: "x", mode: "broadcast", ttl_seconds: "300" }, "invalid_ttl_seconds"],
    ["retention_days 0", { name: "x", mode: "broadcast", retention_days: 0 }, "invalid_retention_days"],
    ["a boolean retention_days", { name: "x", mode: "broadcast", retention_days: true }, "invalid_retention_days"],
    ["max_messages 0", { name: "x", mode: "broadcast", max_messages: 0 }, "invalid_max_messages"],
    ["max_messages 1000001", { name: "x", mode: "broadcast", max_messages: 1000001 }, "invalid_max_messages"],
    ["a description with U+0000", { name: "x", mode: "broadcast", description: "a\u0000b" }, "invalid_string"],
    ["a pinned_message with U+0000", { name: "x", mode: "broadcast", pinned_message: "\u0000" }, "invalid_string"],
    ["a metadata_schema with U+0000", { name: "x", mode: "broadcast", metadata_schema: { title: "\u0000" } }, "invalid_object"],
    ["a related channel with U+0000", { name: "x", mode: "broadcast", related_channels: ["a\u0000"] }, "invalid_related_channels"],
    ["max_writes_per_minute 0", { name: "x", mode: "broadcast", max_writes_per_minute: 0 }, "invalid_max_writes_per_minute"],
    ["a fractional max_writes_per_minute", { name: "x", mode: "broadcast", max_writes_per_minute: 1.5 }, "invalid_max_writes_per_minute"],
  ];
  for (const [name, body, code] of invalid) {
    it(`answers 422 ${code} with a suggestion for ${name}`, async () => {
      const res = await rest(server.url, "POST", "/v1/channels", { key: owner, body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: code });
      expect(res.body.suggestion).toEqual(expect.any(String));
    });
  }

  it("gives every one of 30 concurrent creates a distinct created_at", async () => {
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => createChannel({ name: `burst-${i}` })));
    expect(new Set(results.map((c) => c.created_at)).size).toBe(30);
  });
});

describe("AGENTBUS_DEFAULT_DISCOVERABLE=false", () => {
  it("makes new open channels not discoverable unless asked", async () => {
    const other = await startTestServer({ AGENTBUS_DEFAULT_DISCOVERABLE: "false" });
    try {
      const key = await mintKey(other.url);
      const res = await rest<Channel>(other.url, "POST", "/v1/channels", { key, body: { name: "quiet", mode: "broadcast" } });
      expect(res.body.discoverable).toBe(false);
    } finally {
      await other.close();
    }
  });
});

describe("GET /v1/channels/{identifier}", () => {
  it("finds a channel by id and by alias", async () => {
    const channel = await createChannel({ name: "findable" });
    const alias = unique("findable");
    await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: owner, body: { alias } });
    const byId = await rest<Channel>(server.url, "GET", `/v1/channels/${channel.id}`, { key: stranger });
    const byAlias = await rest<Channel>(server.url, "GET", `/v1/channels/${alias}`, { key: stranger });
    expect(byId.status).toBe(200);
    expect(byAlias.status).toBe(200);
    expect(byAlias.body).toEqual(byId.body);
    expect(byId.body.aliases).toEqual([alias]);
  });

  it("answers 404 channel_not_found for an unknown id or alias", async () => {
    for (const identifier of ["8a0f3a51-2b6c-4d1e-9f00-000000000000", "nobody-home"]) {
      const res = await rest(server.url, "GET", `/v1/channels/${identifier}`, { key: owner });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: "channel_not_found" });
    }
  });

  it("answers 422 invalid_string, not 500, for an identifier with U+0000 (it is refused at decode, issue 11)", async () => {
    const res = await rest(server.url, "GET", "/v1/channels/a%00b", { key: owner });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_string", field: "identifier" });
  });

  it("answers 403 channel_access_denied to a stranger on a restricted channel", async () => {
    const channel = await createChannel({ name: "vault", access: "restricted" });
    const res = await rest(server.url, "GET", `/v1/channels/${channel.id}`, { key: stranger });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "channel_access_denied" });
  });

  it("lets a member read a restricted channel", async () => {
    const channel = await createChannel({ name: "club", access: "restricted" });
    const member = await mintKey(server.url);
    await sql.query("INSERT INTO channel_members (channel_id, key_id) VALUES ($1, $2)", [channel.id, keyIdOf(member)]);
    expect((await rest(server.url, "GET", `/v1/channels/${channel.id}`, { key: member })).status).toBe(200);
  });
});

describe("GET /v1/channels (discovery)", () => {
  const discover = (query: string, key = stranger) => rest<Page>(server.url, "GET", `/v1/channels${query}`, { key });

  it("lists discoverable channels of any access, newest first, never undiscoverable ones", async () => {
    const open = await createChannel({ name: "listed-open" });
    const restricted = await createChannel({ name: "listed-restricted", access: "restricted", discoverable: true });
    const hidden = await createChannel({ name: "hidden", discoverable: false });
    const res = await discover("?limit=100");
    expect(res.status).toBe(200);
    const ids = res.body.data.map((c) => c.id);
    expect(ids.slice(0, 2)).toEqual([restricted.id, open.id]);
    expect(ids).not.toContain(hidden.id);
    expect(res.body.data[0]).toEqual({
      id: restricted.id,
      name: "listed-restricted",
      mode: "broadcast",
      access: "restricted",
      description: "",
      created_at: restricted.created_at,
      is_member: false,
      owner_id: "owner",
      live_messages: 0,
      open_messages: 0,
    });
  });

  it("reports is_member for the owner and members only", async () => {
    const channel = await createChannel({ name: "membership-flag" });
    const member = await mintKey(server.url);
    await sql.query("INSERT INTO channel_members (channel_id, key_id) VALUES ($1, $2)", [channel.id, keyIdOf(member)]);
    const flag = async (key: string) => (await discover("?limit=100", key)).body.data.find((c) => c.id === channel.id)?.is_member;
    expect(await flag(owner)).toBe(true);
    expect(await flag(member)).toBe(true);
    expect(await flag(stranger)).toBe(false);
  });

  it("defaults the page size to 50", async () => {
    await Promise.all(Array.from({ length: 51 }, (_, i) => createChannel({ name: `filler-${i}` })));
    const res = await discover("");
    expect(res.body.limit).toBe(50);
    expect(res.body.data).toHaveLength(50);
  });

  it("clamps an out-of-range limit into 1..100 (list-pages)", async () => {
    const big = await discover("?limit=1000");
    expect(big.status).toBe(200);
    expect(big.body.limit).toBe(100);
    const zero = await discover("?limit=0");
    expect(zero.status).toBe(200);
    expect(zero.body.limit).toBe(1);
    expect(zero.body.data).toHaveLength(1);
  });

  it("answers 422 invalid_limit for a non-integer limit", async () => {
    const res = await discover("?limit=ten");
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_limit" });
  });

  it("answers 422 invalid_cursor with a suggestion for a malformed cursor", async () => {
    const res = await discover("?cursor=yesterday");
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_cursor" });
    expect((res.body as unknown as { suggestion: string }).suggestion).toContain("next_cursor");
  });

  it("sets next_cursor to the last created_at of a full page, and null on a short one", async () => {
    const full = await discover("?limit=2");
    expect(full.body.next_cursor).toBe(full.body.data[1]?.created_at);
    const newest = full.body.data[0]?.created_at as string;
    // Only channels older than the newest one exist below it; ask for more than there can be on a fresh cursor.
    const short = await discover(`?limit=100&cursor=${encodeURIComponent(newest)}`);
    const { rows } = await sql.query<{ n: number }>("SELECT count(*)::int AS n FROM channels WHERE discoverable");
    if (rows[0]!.n - 1 < 100) expect(short.body.next_cursor).toBeNull();
  });

  it("pages through every channel once, newest first, while channels are created concurrently", async () => {
    await Promise.all(Array.from({ length: 15 }, (_, i) => createChannel({ name: `before-walk-${i}` })));
    const { rows } = await sql.query<{ id: string }>("SELECT id::text FROM channels WHERE discoverable");
    const existing = rows.map((r) => r.id);

    let creating = true;
    const writer = (async () => {
      let n = 0;
      while (creating && n < 60) {
        await Promise.all([createChannel({ name: `during-walk-${n++}` }), createChannel({ name: `during-walk-${n++}` })]);
      }
    })();
    const seen: Summary[] = [];
    let cursor: string | null = null;
    do {
      const query: string = `?limit=7${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page: Page = (await discover(query)).body;
      seen.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor !== null);
    creating = false;
    await writer;

    const ids = seen.map((c) => c.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of existing) expect(ids).toContain(id);
    const stamps = seen.map((c) => c.created_at);
    expect([...stamps].sort().reverse()).toEqual(stamps);
  });
});

describe("GET /v1/keys/me/channels (my channels)", () => {
  const mine = (query: string, key: string) => rest<Page>(server.url, "GET", `/v1/keys/me/channels${query}`, { key });

  it("lists the channels the key created and those it is a member of, newest first, and no one else's", async () => {
    const me = await mintKey(server.url);
    const created = await createChannel({ name: unique("mine"), discoverable: false }, me);
    const joined = await createChannel({ name: unique("joined"), access: "restricted" });
    await sql.query("INSERT INTO channel_members (channel_id, key_id) VALUES ($1, $2)", [joined.id, keyIdOf(me)]);
    const foreign = await createChannel({ name: unique("foreign") });
    const res = await mine("", me);
    expect(res.status).toBe(200);
    expect(res.body.data.map((c) => c.id)).toEqual([joined.id, created.id]);
    expect(res.body.data.every((c) => c.is_member)).toBe(true);
    expect(res.body.data.map((c) => c.id)).not.toContain(foreign.id);
    expect((await mine("", stranger)).body.data.map((c) => c.id)).not.toContain(created.id);
  });

  it("pages with limit and next_cursor", async () => {
    const me = await mintKey(server.url);
    const made = [];
    for (let i = 0; i < 3; i++) made.push(await createChannel({ name: unique(`page-${i}`) }, me));
    const first = await mine("?limit=2", me);
    expect(first.body.data.map((c) => c.id)).toEqual([made[2]!.id, made[1]!.id]);
    const second = await mine(`?limit=2&cursor=${encodeURIComponent(first.body.next_cursor!)}`, me);
    expect(second.body.data.map((c) => c.id)).toEqual([made[0]!.id]);
    expect(second.body.next_cursor).toBeNull();
  });

  it("answers over gRPC as over REST", async () => {
    const me = await mintKey(server.url);
    const created = await createChannel({ name: unique("grpc-mine") }, me);
    const res = await grpc().listMyChannels({}, { headers: { "x-api-key": me } });
    expect(res.data.map((c) => c.id)).toEqual([created.id]);
  });
});

describe("PATCH /v1/channels/{identifier}", () => {
  it("changes each updatable field and leaves the others alone", async () => {
    const related = await createChannel({ name: "patch-related" });
    const channel = await createChannel({ name: "patch-me", pinned_message: "old" });
    const changes: Array<[Record<string, unknown>, Partial<Channel>]> = [
      [{ name: "patched" }, { name: "patched" }],
      [{ mode: "claimable" }, { mode: "claimable" }],
      [{ access: "restricted" }, { access: "restricted" }],
      [{ discoverable: false }, { discoverable: false }],
      [{ description: "now described" }, { description: "now described" }],
      [{ metadata_schema: { type: "object", required: ["x"] } }, { metadata_schema: { type: "object", required: ["x"] } }],
      [{ pinned_message: "new pin" }, { pinned_message: "new pin" }],
      [{ related_channels: [related.id] }, { related_channels: [{ id: related.id, name: "patch-related", mode: "broadcast" }] }],
      [{ retention_days: 30 }, { retention_days: 30 }],
      [{ max_messages: 5 }, { max_messages: 5 }],
      [{ max_writes_per_minute: 60 }, { max_writes_per_minute: 60 }],
      [{ paused: true }, { paused: true }],
    ];
    let expected: Channel = channel;
    for (const [body, effect] of changes) {
      const res = await patch(channel.id, body);
      expect(res.status, JSON.stringify(body)).toBe(200);
      expected = { ...expected, ...effect, updated_at: res.body.updated_at };
      expect(res.body).toEqual(expected);
    }
  });

  it("clears nullable fields with null, and resets description, metadata_schema and related_channels", async () => {
    const related = await createChannel({ name: "to-unlink" });
    const channel = await createChannel({
      name: "clearable",
      description: "text",
      pinned_message: "pin",
      max_messages: 3,
      max_writes_per_minute: 3,
      metadata_schema: { type: "object" },
      related_channels: [related.id],
      webhook_url: "https://example.com/h",
      webhook_secret: "secret",
    });
    const res = await patch(channel.id, {
      pinned_message: null,
      max_messages: null,
      max_writes_per_minute: null,
      webhook_url: null,
      webhook_secret: null,
      description: null,
      metadata_schema: null,
      related_channels: null,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      pinned_message: null,
      max_messages: null,
      max_writes_per_minute: null,
      description: "",
      metadata_schema: {},
      related_channels: [],
    });
    const { rows } = await sql.query("SELECT webhook_url, webhook_secret FROM channels WHERE id = $1", [channel.id]);
    expect(rows[0]).toEqual({ webhook_url: null, webhook_secret: null });
  });

  it("sets webhook_url and webhook_secret without rendering them", async () => {
    const channel = await createChannel({ name: "late-hook" });
    const res = await patch(channel.id, { webhook_url: "https://example.com/late-hook", webhook_secret: "shh" });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain("shh");
    const { rows } = await sql.query("SELECT webhook_url, webhook_secret FROM channels WHERE id = $1", [channel.id]);
    expect(rows[0]).toEqual({ webhook_url: "https://example.com/late-hook", webhook_secret: "shh" });
  });

  it("drops the channel itself from related_channels", async () => {
    const channel = await createChannel({ name: "narcissus" });
    const res = await patch(channel.id, { related_channels: [channel.id] });
    expect(res.status).toBe(200);
    expect(res.body.related_channels).toEqual([]);
  });

  it("moves updated_at forward only when something changed", async () => {
    const channel = await createChannel({ name: "stable", paused: false });
    const same = await patch(channel.id, { name: "stable", paused: false, max_messages: null });
    expect(same.body.updated_at).toBe(channel.updated_at);
    const empty = await patch(channel.id, {});
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual(channel);
    const changed = await patch(channel.id, { paused: true });
    expect(changed.body.updated_at > channel.updated_at).toBe(true);
    expect(changed.body.created_at).toBe(channel.created_at);
  });

  it("answers 422 invalid_fields listing unknown keys, including ttl_seconds", async () => {
    const channel = await createChannel({ name: "strict" });
    const res = await patch(channel.id, { ttl_seconds: 600, colour: "red", name: "ok" });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_fields", fields: ["ttl_seconds", "colour"] });
    expect((await rest<Channel>(server.url, "GET", `/v1/channels/${channel.id}`, { key: owner })).body.name).toBe("strict");
  });

  it("answers 422 invalid_update_mask for an update_mask naming other fields", async () => {
    const channel = await createChannel({ name: "masked" });
    const res = await rest(server.url, "PATCH", `/v1/channels/${channel.id}?update_mask=name,owner_id`, { key: owner, body: { name: "x" } });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_update_mask", fields: ["owner_id"] });
  });

  const invalid: Array<[Record<string, unknown>, string]> = [
    [{ name: "" }, "missing_field"],
    [{ name: null }, "missing_field"],
    [{ name: "x".repeat(201) }, "invalid_channel_name"],
    [{ mode: null }, "invalid_mode"],
    [{ mode: "loud" }, "invalid_mode"],
    [{ access: "closed" }, "invalid_access"],
    [{ discoverable: null }, "invalid_discoverable"],
    [{ paused: "yes" }, "invalid_paused"],
    [{ paused: null }, "invalid_paused"],
    [{ retention_days: 400 }, "invalid_retention_days"],
    [{ max_messages: 0 }, "invalid_max_messages"],
    [{ max_writes_per_minute: -1 }, "invalid_max_writes_per_minute"],
    [{ metadata_schema: { type: "integer" } }, "invalid_object"],
    [{ webhook_url: "example.com" }, "invalid_webhook_url"],
    [{ related_channels: [" "] }, "invalid_related_channels"],
  ];
  for (const [body, code] of invalid) {
    it(`answers 422 ${code} for ${JSON.stringify(body).slice(0, 60)}`, async () => {
      const channel = await createChannel({ name: "validated" });
      const res = await patch(channel.id, body);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: code });
      expect((res.body as unknown as { suggestion: string }).suggestion).toEqual(expect.any(String));
    });
  }

  it("answers 404 channel_not_found for an unknown related channel", async () => {
    const channel = await createChannel({ name: "unrelated" });
    const res = await patch(channel.id, { related_channels: ["ghost-channel"] });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: "channel_not_found" });
  });

  it("is owner only: another key gets 403 forbidden on an open channel (owner-only)", async () => {
    const channel = await createChannel({ name: "mine" });
    const res = await patch(channel.id, { paused: true }, stranger);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "forbidden" });
  });

  it("answers 403 channel_access_denied to a stranger on a restricted channel", async () => {
    const channel = await createChannel({ name: "secret", access: "restricted" });
    const res = await patch(channel.id, { paused: true }, stranger);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "channel_access_denied" });
  });

  it("answers 404 channel_not_found for an unknown channel", async () => {
    const res = await patch("no-such-alias", { paused: true });
    expect(res.status).toBe(404);
  });
});

describe("DELETE /v1/channels/{identifier}", () => {
  it("answers 204 with an empty body and the channel is gone", async () => {
    const channel = await createChannel({ name: "doomed" });
    const res = await fetch(`${server.url}/v1/channels/${channel.id}`, { method: "DELETE", headers: { "X-API-Key": owner } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe("");
    expect((await rest(server.url, "GET", `/v1/channels/${channel.id}`, { key: owner })).status).toBe(404);
  });

  it("frees the channel's aliases for reuse", async () => {
    const alias = unique("recycled");
    const first = await createChannel({ name: "first" });
    await rest(server.url, "POST", `/v1/channels/${first.id}/aliases`, { key: owner, body: { alias } });
    expect((await rest(server.url, "DELETE", `/v1/channels/${alias}`, { key: owner })).status).toBe(204);
    const second = await createChannel({ name: "second" });
    const res = await rest<Channel>(server.url, "POST", `/v1/channels/${second.id}/aliases`, { key: owner, body: { alias } });
    expect(res.status).toBe(201);
  });

  it("deletes the channel's messages, members and links", async () => {
    const target = await createChannel({ name: "target" });
    const channel = await createChannel({ name: "full-of-stuff", related_channels: [target.id] });
    await sql.query(
      `INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at)
       VALUES ($1, $2, 'hello', clock_timestamp(), clock_timestamp() + interval '1 hour')`,
      [channel.id, keyIdOf(owner)],
    );
    expect((await rest(server.url, "DELETE", `/v1/channels/${channel.id}`, { key: owner })).status).toBe(204);
    const count = async (table: string) =>
      (await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE channel_id = $1`, [channel.id])).rows[0]!.n;
    expect(await count("messages")).toBe(0);
    expect(await count("channel_members")).toBe(0);
    expect(await count("channel_links")).toBe(0);
    // A channel that linked to the deleted one loses the link, not itself.
    const linker = await createChannel({ name: "linker", related_channels: [target.id] });
    await rest(server.url, "DELETE", `/v1/channels/${target.id}`, { key: owner });
    expect((await rest<Channel>(server.url, "GET", `/v1/channels/${linker.id}`, { key: owner })).body.related_channels).toEqual([]);
  });

  it("is owner only: another key gets 403 forbidden", async () => {
    const channel = await createChannel({ name: "keep-out" });
    const res = await rest(server.url, "DELETE", `/v1/channels/${channel.id}`, { key: stranger });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "forbidden" });
  });
});

describe("POST /v1/channels/{identifier}/aliases", () => {
  it("answers 201 with the channel, its aliases sorted", async () => {
    const channel = await createChannel({ name: "aliased" });
    const [b, a] = [unique("b-alias"), unique("a-alias")];
    await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: owner, body: { alias: b } });
    const res = await rest<Channel>(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: owner, body: { alias: a } });
    expect(res.status).toBe(201);
    expect(res.body.aliases).toEqual([a, b]);
    expect(res.body.updated_at > channel.updated_at).toBe(true);
  });

  it("answers 201 again for an alias the channel already has", async () => {
    const channel = await createChannel({ name: "twice" });
    const alias = unique("twice");
    await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: owner, body: { alias } });
    const again = await rest<Channel>(server.url, "POST", `/v1/channels/${alias}/aliases`, { key: owner, body: { alias } });
    expect(again.status).toBe(201);
    expect(again.body.aliases).toEqual([alias]);
  });

  it("answers 409 alias_conflict with a suggestion when another channel has the alias", async () => {
    const alias = unique("taken");
    const first = await createChannel({ name: "holder" });
    const second = await createChannel({ name: "wants-it" });
    await rest(server.url, "POST", `/v1/channels/${first.id}/aliases`, { key: owner, body: { alias } });
    const res = await rest(server.url, "POST", `/v1/channels/${second.id}/aliases`, { key: owner, body: { alias } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "alias_conflict" });
    expect(res.body.suggestion).toEqual(expect.any(String));
  });

  it.each([
    ["another case", (a: string) => a.toUpperCase()],
    ["surrounding spaces", (a: string) => ` ${a} `],
    ["full-width letters", (a: string) => a.replace(/[!-~]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0))],
  ])("answers 409 alias_conflict for a look-alike of a taken alias (%s)", async (_, lookAlike) => {
    const alias = unique("lookalike");
    const first = await createChannel({ name: "holder" });
    const second = await createChannel({ name: "spoofer" });
    expect((await rest(server.url, "POST", `/v1/channels/${first.id}/aliases`, { key: owner, body: { alias } })).status).toBe(201);
    const res = await rest(server.url, "POST", `/v1/channels/${second.id}/aliases`, { key: owner, body: { alias: lookAlike(alias) } });
    expect(res.status).toBe(409);
    expect(res.body).toMatchObject({ error: "alias_conflict" });
    expect((await rest<Channel>(server.url, "GET", `/v1/channels/${second.id}`, { key: owner })).body.aliases).toEqual([]);
  });

  it("answers 422 missing_field for a missing or blank alias", async () => {
    const channel = await createChannel({ name: "no-alias" });
    for (const body of [{}, { alias: " " }]) {
      const res = await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: owner, body });
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ error: "missing_field" });
    }
  });

  it("answers 422 invalid_string for a UUID-shaped alias", async () => {
    const channel = await createChannel({ name: "uuid-alias" });
    const res = await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, {
      key: owner,
      body: { alias: "0b9c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d" },
    });
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ error: "invalid_string" });
  });

  it("is owner only: another key gets 403 forbidden (owner-only)", async () => {
    const channel = await createChannel({ name: "not-yours" });
    const res = await rest(server.url, "POST", `/v1/channels/${channel.id}/aliases`, { key: stranger, body: { alias: unique("steal") } });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: "forbidden" });
  });
});

describe("ChannelService over gRPC", () => {
  it("creates a channel and returns the proto Channel", async () => {
    const channel = await grpc().createChannel(
      { name: "over-grpc", mode: ChannelMode.CLAIMABLE, access: ChannelAccess.RESTRICTED },
      { headers: { "x-api-key": owner } },
    );
    expect(channel).toMatchObject({
      name: "over-grpc",
      mode: ChannelMode.CLAIMABLE,
      access: ChannelAccess.RESTRICTED,
      discoverable: false,
      ttlSeconds: 86400,
      retentionDays: 7,
      ownerId: "owner",
      createdByKeyId: keyIdOf(owner),
      metadataSchema: {},
    });
    expect(channel.pinnedMessage).toBeUndefined();
    expect(channel.maxMessages).toBeUndefined();
  });

  it("answers InvalidArgument with error=missing_field when mode is unset", async () => {
    const err = await grpc().createChannel({ name: "modeless" }, { headers: { "x-api-key": owner } }).catch(asConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).findDetails(ErrorDetailSchema)[0]?.error).toBe("missing_field");
  });

  it("answers NotFound with ErrorDetail error=channel_not_found for an unknown channel", async () => {
    const err = await grpc().getChannel({ identifier: "missing-channel" }, { headers: { "x-api-key": owner } }).catch(asConnectError);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.NotFound);
    const [detail] = (err as ConnectError).findDetails(ErrorDetailSchema);
    expect(detail?.error).toBe("channel_not_found");
    expect(detail?.suggestion).toEqual(expect.any(String));
  });

  it("answers PermissionDenied with error=forbidden to a non-owner's update", async () => {
    const channel = await createChannel({ name: "grpc-owned" });
    const err = await grpc()
      .updateChannel({ identifier: channel.id, channel: { paused: true } }, { headers: { "x-api-key": stranger } })
      .catch(asConnectError);
    expect((err as ConnectError).code).toBe(Code.PermissionDenied);
    expect((err as ConnectError).findDetails(ErrorDetailSchema)[0]?.error).toBe("forbidden");
  });

  it("applies the fields that are set when the update has no mask", async () => {
    const channel = await createChannel({ name: "grpc-unmasked", pinned_message: "keep" });
    const updated = await grpc().updateChannel(
      { identifier: channel.id, channel: { paused: true, mode: ChannelMode.CLAIMABLE } },
      { headers: { "x-api-key": owner } },
    );
    expect(updated).toMatchObject({ paused: true, mode: ChannelMode.CLAIMABLE, pinnedMessage: "keep", name: "grpc-unmasked" });
  });

  it("clears a masked field that is unset", async () => {
    const channel = await createChannel({ name: "grpc-masked", pinned_message: "drop", max_messages: 9 });
    const updated = await grpc().updateChannel(
      { identifier: channel.id, channel: { name: "ignored" }, updateMask: { paths: ["pinned_message", "max_messages"] } },
      { headers: { "x-api-key": owner } },
    );
    expect(updated.pinnedMessage).toBeUndefined();
    expect(updated.maxMessages).toBeUndefined();
    expect(updated.name).toBe("grpc-masked");
  });

  it("answers InvalidArgument with error=invalid_update_mask for a mask naming other fields", async () => {
    const channel = await createChannel({ name: "grpc-bad-mask" });
    const err = await grpc()
      .updateChannel({ identifier: channel.id, channel: {}, updateMask: { paths: ["ttl_seconds"] } }, { headers: { "x-api-key": owner } })
      .catch(asConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).findDetails(ErrorDetailSchema)[0]?.error).toBe("invalid_update_mask");
  });
});

describe("created_at of concurrent creates", () => {
  it("follows commit order: a create waits for an uncommitted one and is stamped after it", async () => {
    const database = await createTestDatabase();
    try {
      const db = new Db(database.pool);
      const channels = new Channels(new PgChannelStore(db), { defaultDiscoverable: true });
      const caller = { keyId: "ak_AAAAAAAAAAAAAAAA", agentLabel: "serial", ownerId: "serial" };
      await new PgKeyStore(db).insert({ keyId: caller.keyId, secretHash: Buffer.alloc(32), agentLabel: "serial", ownerId: "serial", labelKey: "serial", scopes: null });
      const input = (name: string): CreateChannelInput => ({
        name, mode: "broadcast", access: undefined, discoverable: undefined, description: undefined, metadataSchema: undefined,
        pinnedMessage: undefined, webhookUrl: undefined, webhookSecret: undefined, relatedChannels: [], ttlSeconds: undefined,
        retentionDays: undefined, maxMessages: undefined, maxWritesPerMinute: undefined, maxDeliveries: undefined, deadLetterChannel: undefined,
      });

      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let inserted!: () => void;
      const firstInserted = new Promise<void>((resolve) => (inserted = resolve));
      // The first create stays uncommitted (as under the idempotency layer's transaction) until released.
      const first = db.transaction(async () => {
        const channel = await channels.create(caller, input("first"));
        inserted();
        await gate;
        return channel;
      });
      await firstInserted;
      let secondDone = false;
      const second = channels.create(caller, input("second")).then((c) => ((secondDone = true), c));
      await Promise.race([untilWaitingForLock(database.pool), second]);
      const finishedWhileFirstOpen = secondDone;
      release();
      const [a, b] = await Promise.all([first, second]);
      expect(finishedWhileFirstOpen).toBe(false);
      expect(b.createdAt).toBeGreaterThan(a.createdAt);
    } finally {
      await database.drop();
    }
  });
});
