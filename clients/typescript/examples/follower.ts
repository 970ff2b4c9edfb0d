/**
 * A broadcast follower: reads every message of a channel in order with
 * followChannel, which reconnects after a dropped stream and resumes from the
 * last cursor. Posts a few announcements itself so there is something to read.
 *
 *   AGENTBUS_URL=http://127.0.0.1:8080 npx tsx clients/typescript/examples/follower.ts
 */
import { pathToFileURL } from "node:url";
import { ChannelMode, createClient, followChannel } from "../src/index.js";

export async function main(baseUrl: string, options: { count?: number } = {}): Promise<{ received: string[]; lastCursor: string | undefined }> {
  const count = options.count ?? 3;
  const { key } = await createClient({ baseUrl }).keys.createKey({ agentLabel: `follower-${Date.now().toString(36)}` });
  const bus = createClient({ baseUrl, apiKey: key });
  const channel = await bus.channels.createChannel({ name: "announcements", mode: ChannelMode.BROADCAST });
  // Posted before following: "0" reads everything still live, so nothing is missed.
  for (let i = 1; i <= count; i++) await bus.messages.createMessage({ identifier: channel.id, content: `announcement ${i}` });

  const received: string[] = [];
  let lastCursor: string | undefined;
  for await (const { message, cursor } of followChannel({ client: bus, channel: channel.id, since: "0" })) {
    received.push(message.content);
    // Persist `cursor` to resume a later run exactly here.
    lastCursor = cursor;
    console.log(`${cursor}  ${message.content}`);
    if (received.length === count) break;
  }
  return { received, lastCursor };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.env.AGENTBUS_URL ?? "http://127.0.0.1:8080");
}
