/**
 * People read labels, not key ids (issue 27, item 11): a message names its
 * author's agent label (author_label) wherever it is rendered, and a member
 * row names the member key's agent label, over REST and gRPC.
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { createChannel, postMessage } from "../support/fixtures.js";
import { addMember, restrictedChannel } from "../support/membership.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let author: string;
let reader: string;
beforeAll(async () => {
  author = await mintKey(url(), "planner-7");
  reader = await mintKey(url(), "reviewer");
});

describe("a message's author_label", () => {
  it("is the posting key's agent label in the create answer, on get, in a list and in a receive", async () => {
    const ch = await createChannel(url(), author);
    const posted = await rest<{ message: { id: string; author_label: string } }>(url(), "POST", `/v1/channels/${ch}/messages`, { key: author, body: { content: "x" } });
    expect(posted.body.message.author_label).toBe("planner-7");
    const got = await rest<{ author_label: string }>(url(), "GET", `/v1/messages/${posted.body.message.id}`, { key: reader });
    expect(got.body.author_label).toBe("planner-7");
    const listed = await rest<{ data: Array<{ author_label: string }> }>(url(), "GET", `/v1/channels/${ch}/messages`, { key: reader });
    expect(listed.body.data.map((m) => m.author_label)).toEqual(["planner-7"]);
    const received = await rest<{ data: Array<{ message: { author_label: string } }> }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: reader, body: {} });
    expect(received.body.data.map((r) => r.message.author_label)).toEqual(["planner-7"]);
  });

  it("is kept in history after the message is retracted", async () => {
    const ch = await createChannel(url(), author, { mode: "broadcast" });
    const { id } = await postMessage(url(), author, ch, { content: "soon gone" });
    expect((await rest(url(), "DELETE", `/v1/messages/${id}`, { key: author })).status).toBeLessThan(300);
    const history = await rest<{ data: Array<{ id: string; author_label: string }> }>(url(), "GET", `/v1/channels/${ch}/history`, { key: author });
    expect(history.body.data).toEqual([expect.objectContaining({ id, author_label: "planner-7" })]);
  });

  it("is rendered over gRPC", async () => {
    const ch = await createChannel(url(), author);
    const { id } = await postMessage(url(), author, ch, { content: "x" });
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const message = await client.getMessage({ messageId: id }, { headers: { "x-api-key": reader } });
    expect(message.authorLabel).toBe("planner-7");
  });
});

describe("a member's agent_label", () => {
  it("names each member key's label in the member list, over REST and gRPC", async () => {
    const { owner, ch } = await restrictedChannel(url());
    const member = await mintKey(url(), "night-shift");
    await addMember(url(), owner, ch, member.split(".")[0]!);
    const listed = await rest<{ data: Array<{ key_id: string; agent_label: string }> }>(url(), "GET", `/v1/channels/${ch}/members`, { key: owner });
    expect(listed.body.data.map((m) => m.agent_label)).toContain("night-shift");
    const client = createClient(ChannelService, createGrpcTransport({ baseUrl: url() }));
    const page = await client.listMembers({ identifier: ch }, { headers: { "x-api-key": owner } });
    expect(page.data.map((m) => m.agentLabel)).toContain("night-shift");
  });
});
