/**
 * Quickstart: mint a key, create a claimable channel, post a task, list open
 * work, claim it and acknowledge it.
 *
 *   AGENTBUS_URL=http://127.0.0.1:8080 npx tsx clients/typescript/examples/quickstart.ts
 */
import { pathToFileURL } from "node:url";
import { AckStatus, ChannelMode, ClaimStatus, createClient, idempotent, MessageStatus } from "../src/index.js";

export interface QuickstartResult {
  channelId: string;
  messageId: string;
  claim: ClaimStatus;
  ack: AckStatus;
}

export async function main(baseUrl: string, label = `quickstart-${Date.now().toString(36)}`): Promise<QuickstartResult> {
  // 1. Minting needs no key; the secret is shown only in this answer.
  const anonymous = createClient({ baseUrl });
  const { key } = await anonymous.keys.createKey({ agentLabel: label });

  // 2. Everything else is sent with the key.
  const bus = createClient({ baseUrl, apiKey: key });
  const channel = await bus.channels.createChannel({ name: "jobs", mode: ChannelMode.CLAIMABLE });

  // 3. Posting is a mutation: the client adds an idempotency key by itself.
  //    Passing our own lets us retry this exact post safely.
  const once = idempotent(`resize-42-${channel.id}`);
  const posted = await bus.messages.createMessage({ identifier: channel.id, content: "resize image 42" }, once);

  // 4. Open work only; `nextCursor` would let a poller read just what is new.
  const page = await bus.messages.listMessages({ identifier: channel.id, status: MessageStatus.UNCLAIMED, limit: 10 });
  const task = page.data[0];
  if (task === undefined || task.id !== posted.message?.id) throw new Error("the posted task is not listed as open work");

  // 5. The first claim wins; a second claimer would get AgentbusError "already_claimed".
  const claim = await bus.messages.claimMessage({ messageId: task.id });
  // 6. Done.
  const ack = await bus.messages.ackMessage({ messageId: task.id });

  console.log(`claimed ${task.id} (${ClaimStatus[claim.status]}), acknowledged (${AckStatus[ack.status]})`);
  return { channelId: channel.id, messageId: task.id, claim: claim.status, ack: ack.status };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.env.AGENTBUS_URL ?? "http://127.0.0.1:8080");
}
