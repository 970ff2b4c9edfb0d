/**
 * Channels by name (docs/decisions.md#channel-names): wherever a path says
 * `{identifier}`, a name of a channel the caller's key created resolves too,
 * after the id and the aliases; over REST and gRPC alike.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, listMessages, postMessage } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const ADMIN_TOKEN = "channel-names-admin-token";
const server = useTestServer({ AGENTBUS_ADMIN_TOKEN: ADMIN_TOKEN });

/** A name no other test uses, so names never collide across tests by accident. */
const uniqueName = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
const path = (identifier: string, rest = "") => `/v1/channels/${encodeURIComponent(identifier)}${rest}`;

interface ChannelJson {
  id: string;
  name: string;
  description: string;
  aliases: string[];
}

interface ErrorJson {
  error: string;
  message: string;
  suggestion?: string;
  channel_ids?: string[];
}

async function getChannel(key: string, identifier: string) {
  return rest<ChannelJson & ErrorJson>(server.url, "GET", path(identifier), { key });
}

describe("a name of the caller's own channel resolves over REST", () => {
  it("posts to and lists the messages of a channel by its name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("work");
    const id = await createChannel(server.url, key, { name });
    const posted = await postMessage(server.url, key, encodeURIComponent(name), { content: "by name" });
    expect(posted.channel_id).toBe(id);
    const page = await listMessages(server.url, key, encodeURIComponent(name), "?since=0");
    expect(page.data.map((m) => m.id)).toEqual([posted.id]);
  });

  it("gets and updates the channel by its name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("settings");
    const id = await createChannel(server.url, key, { name });
    const got = await getChannel(key, name);
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(id);
    const updated = await rest<ChannelJson>(server.url, "PATCH", path(name), { key, body: { description: "renamed by name" } });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ id, description: "renamed by name" });
  });

  it("lists members, reads history and adds an alias by the channel's name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("admin");
    const id = await createChannel(server.url, key, { name });
    const members = await rest<{ data: Array<{ key_id: string }> }>(server.url, "GET", path(name, "/members"), { key });
    expect(members.status).toBe(200);
    expect(members.body.data).toHaveLength(1);
    const history = await rest<{ data: unknown[] }>(server.url, "GET", path(name, "/history"), { key });
    expect(history.status).toBe(200);
    expect(history.body.data).toEqual([]);
    const alias = uniqueName("alias");
    const aliased = await rest<ChannelJson>(server.url, "POST", path(name, "/aliases"), { key, body: { alias } });
    expect(aliased.status).toBe(201);
    expect(aliased.body).toMatchObject({ id, aliases: [alias] });
  });

  it("deletes the channel by its name, after which the name names nothing", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("doomed");
    await createChannel(server.url, key, { name });
    const deleted = await rest(server.url, "DELETE", path(name), { key });
    expect(deleted.status).toBe(204);
    expect((await getChannel(key, name)).status).toBe(404);
  });

  it("follows a rename: the new name resolves and the old one no longer does", async () => {
    const key = await mintKey(server.url);
    const before = uniqueName("before");
    const after = uniqueName("after");
    const id = await createChannel(server.url, key, { name: before });
    expect((await rest(server.url, "PATCH", path(before), { key, body: { name: after } })).status).toBe(200);
    expect((await getChannel(key, after)).body.id).toBe(id);
    expect((await getChannel(key, before)).status).toBe(404);
  });

  it("resolves a name with spaces and non-ASCII characters", async () => {
    const key = await mintKey(server.url);
    const name = `Équipe ${uniqueName("nuit")} / 夜`;
    const id = await createChannel(server.url, key, { name });
    expect((await getChannel(key, name)).body.id).toBe(id);
  });
});

describe("precedence: id, then alias, then name", () => {
  it("an alias wins over the caller's channel of the same name", async () => {
    const key = await mintKey(server.url);
    const shared = uniqueName("shared");
    const aliased = await createChannel(server.url, key, { name: uniqueName("aliased") });
    expect((await rest(server.url, "POST", path(aliased, "/aliases"), { key, body: { alias: shared } })).status).toBe(201);
    const named = await createChannel(server.url, key, { name: shared });
    expect((await getChannel(key, shared)).body.id).toBe(aliased);
    expect(named).not.toBe(aliased);
  });

  it("another key's alias wins over the caller's channel of the same name", async () => {
    const owner = await mintKey(server.url);
    const caller = await mintKey(server.url);
    const shared = uniqueName("taken");
    const aliased = await createChannel(server.url, owner, { name: uniqueName("theirs") });
    expect((await rest(server.url, "POST", path(aliased, "/aliases"), { key: owner, body: { alias: shared } })).status).toBe(201);
    await createChannel(server.url, caller, { name: shared });
    expect((await getChannel(caller, shared)).body.id).toBe(aliased);
  });

  it("an id wins over the caller's channel named like that id", async () => {
    const key = await mintKey(server.url);
    const target = await createChannel(server.url, key, { name: uniqueName("target") });
    const impostor = await createChannel(server.url, key, { name: target });
    expect((await getChannel(key, target)).body.id).toBe(target);
    expect(impostor).not.toBe(target);
  });

  it("a UUID-shaped name that is no channel's id resolves as a name", async () => {
    const key = await mintKey(server.url);
    const name = "00000000-0000-4000-8000-000000000000";
    const id = await createChannel(server.url, key, { name });
    expect((await getChannel(key, name)).body.id).toBe(id);
  });
});

describe("names of other keys' channels do not resolve", () => {
  it("answers another key's open channel name with the 404 of an unknown name", async () => {
    const owner = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    const name = uniqueName("private-name");
    await createChannel(server.url, owner, { name, access: "open" });
    const theirs = await getChannel(stranger, name);
    const unknown = await getChannel(stranger, `${name}-unknown`);
    expect(theirs.status).toBe(404);
    expect(theirs.body.error).toBe("channel_not_found");
    expect(Object.keys(theirs.body).sort()).toEqual(Object.keys(unknown.body).sort());
    expect(theirs.body.message).toBe(unknown.body.message.replace(`${name}-unknown`, name));
  });

  it("answers another key's restricted channel name with 404, not 403", async () => {
    const owner = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    const name = uniqueName("restricted");
    await createChannel(server.url, owner, { name, access: "restricted" });
    const res = await rest<ErrorJson>(server.url, "POST", path(name, "/messages"), { key: stranger, body: { content: "hi" } });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });

  it("resolves to the caller's own channel when another key has a channel of that name too", async () => {
    const other = await mintKey(server.url);
    const key = await mintKey(server.url);
    const name = uniqueName("common");
    await createChannel(server.url, other, { name });
    const mine = await createChannel(server.url, key, { name });
    expect((await getChannel(key, name)).body.id).toBe(mine);
  });

  it("does not resolve names for an operator, who has no key: pause by name is 404", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("operated");
    await createChannel(server.url, key, { name });
    const res = await rest<ErrorJson>(server.url, "POST", `/v1/admin/channels/${encodeURIComponent(name)}/pause`, {
      headers: { "X-Admin-Token": ADMIN_TOKEN },
    });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });
});

describe("several of the caller's channels with one name", () => {
  it("resolve to the newest of them on every route that takes a name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("twice");
    await createChannel(server.url, key, { name });
    const newest = await createChannel(server.url, key, { name });
    for (const [method, suffix, body] of [
      ["GET", "", undefined],
      ["PATCH", "", { description: "the newest" }],
      ["POST", "/messages", { content: "to the newest" }],
      ["GET", "/messages", undefined],
      ["GET", "/members", undefined],
      ["GET", "/stats", undefined],
    ] as const) {
      const res = await rest<{ id?: string; message?: { channel_id: string }; data?: Array<{ channel_id: string }> }>(server.url, method, path(name, suffix), { key, body });
      expect(res.status, `${method} ${suffix}`).toBeLessThan(300);
      if (method === "POST") expect(res.body.message?.channel_id).toBe(newest);
    }
    expect((await getChannel(key, name)).body).toMatchObject({ id: newest, description: "the newest" });
    expect((await rest(server.url, "DELETE", path(name), { key })).status).toBe(204);
    expect((await rest(server.url, "GET", path(newest), { key })).status).toBe(404);
  });

  it("move to the next newest when the newest is deleted or renamed", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("again");
    const first = await createChannel(server.url, key, { name });
    const second = await createChannel(server.url, key, { name });
    const third = await createChannel(server.url, key, { name });
    expect((await getChannel(key, name)).body.id).toBe(third);
    expect((await rest(server.url, "DELETE", path(third), { key })).status).toBe(204);
    expect((await getChannel(key, name)).body.id).toBe(second);
    expect((await rest(server.url, "PATCH", path(second), { key, body: { name: uniqueName("renamed") } })).status).toBe(200);
    expect((await getChannel(key, name)).body.id).toBe(first);
  });

  it("leave the older ones reachable by id and by alias, which win over the name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("older");
    const first = await createChannel(server.url, key, { name });
    await createChannel(server.url, key, { name });
    expect((await getChannel(key, first)).body.id).toBe(first);
    expect((await rest(server.url, "POST", path(first, "/aliases"), { key, body: { alias: name } })).status).toBe(201);
    expect((await getChannel(key, name)).body.id).toBe(first);
  });
});

describe("odd identifiers are a clean 4xx, never a 5xx", () => {
  it("refuses a NUL character in the identifier with 422 invalid_string, before any look-up", async () => {
    const key = await mintKey(server.url);
    const res = await rest<ErrorJson>(server.url, "GET", path("bad\u0000name"), { key });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_string");
  });

  it.each([
    ["a 10,000-character name", "n".repeat(10_000)],
    ["quotes and SQL", "x' OR '1'='1"],
    ["a percent sign", "100%"],
    ["an escaped slash", "a/b"],
  ])("answers %s that names nothing with 404 channel_not_found", async (_label, identifier) => {
    const key = await mintKey(server.url);
    const res = await rest<ErrorJson>(server.url, "GET", path(identifier), { key });
    expect(res.status).toBe(404);
    expect(res.body.error).toBe("channel_not_found");
  });

  it("answers a lone surrogate escaped in the path with a 4xx", async () => {
    const key = await mintKey(server.url);
    const res = await rest<ErrorJson>(server.url, "GET", "/v1/channels/%ED%A0%80", { key });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });
});

describe("channels by name over gRPC", () => {
  const transport = () => createGrpcTransport({ baseUrl: server.url });
  const detail = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0];

  it("gets a channel and posts to it by name", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("grpc");
    const id = await createChannel(server.url, key, { name });
    const headers = { "x-api-key": key };
    const channel = await createClient(ChannelService, transport()).getChannel({ identifier: name }, { headers });
    expect(channel.id).toBe(id);
    const created = await createClient(MessageService, transport()).createMessage({ identifier: name, content: "grpc by name" }, { headers });
    expect(created.message?.channelId).toBe(id);
  });

  it("resolves a name two of the caller's channels share to the newest", async () => {
    const key = await mintKey(server.url);
    const name = uniqueName("grpc-twice");
    await createChannel(server.url, key, { name });
    const second = await createChannel(server.url, key, { name });
    const channel = await createClient(ChannelService, transport()).getChannel({ identifier: name }, { headers: { "x-api-key": key } });
    expect(channel.id).toBe(second);
  });

  it("reports another key's channel name as NotFound", async () => {
    const owner = await mintKey(server.url);
    const stranger = await mintKey(server.url);
    const name = uniqueName("grpc-theirs");
    await createChannel(server.url, owner, { name });
    const err = await createClient(ChannelService, transport())
      .getChannel({ identifier: name }, { headers: { "x-api-key": stranger } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.NotFound);
    expect(detail(err)?.error).toBe("channel_not_found");
  });

  it("refuses a NUL in the identifier with InvalidArgument, not Internal", async () => {
    const key = await mintKey(server.url);
    const err = await createClient(ChannelService, transport())
      .getChannel({ identifier: "nul\u0000name" }, { headers: { "x-api-key": key } })
      .catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.InvalidArgument);
    expect(detail(err)?.error).toBe("invalid_string");
  });
});
