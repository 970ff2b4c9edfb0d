/**
 * A receive whose caller has gone leases nothing (issue 26, F7): when the
 * client drops a waiting receive, the wait ends at once and work posted
 * afterwards goes to the next receiver, not to a lease nobody holds. Over
 * REST and gRPC, against the real server (the MCP tool is covered in mcp-hardening.test.ts).
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { eventually } from "../support/eventually.js";
import { createChannel, postMessage, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, untilParked, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let key: string;
beforeAll(async () => {
  key = await mintKey(url(), "gone-worker");
});

/** The next receive finds the message as fresh work: delivered once, to it. */
async function deliveredOnlyToTheNextReceiver(ch: string): Promise<void> {
  const m = await postMessage(url(), key, ch, { content: "after the caller left" });
  const got = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
  expect(got.body.data.map((r) => [r.message.id, r.message.delivery_count])).toEqual([[m.id, 1]]);
}

describe("a waiting receive whose client goes away", () => {
  it("over REST stops waiting at once and leases nothing", async () => {
    const ch = await createChannel(url(), key);
    const client = new AbortController();
    const waiting = fetch(`${url()}/v1/channels/${ch}/messages:receive`, {
      method: "POST",
      headers: { "X-API-Key": key, "Content-Type": "application/json" },
      body: JSON.stringify({ wait: 20 }),
      signal: client.signal,
    }).catch(() => undefined);
    await untilParked(server, 1);
    client.abort();
    await waiting;
    await eventually(async () => server.app.bus.subscriptions === 0);
    await deliveredOnlyToTheNextReceiver(ch);
  });

  it("over gRPC stops waiting at once when the call is cancelled and leases nothing", async () => {
    const ch = await createChannel(url(), key);
    const messages = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const client = new AbortController();
    const waiting = messages.receiveMessages({ identifier: ch, wait: 20 }, { headers: { "x-api-key": key }, signal: client.signal }).catch(() => undefined);
    await untilParked(server, 1);
    client.abort();
    await waiting;
    await eventually(async () => server.app.bus.subscriptions === 0);
    await deliveredOnlyToTheNextReceiver(ch);
  });
});
