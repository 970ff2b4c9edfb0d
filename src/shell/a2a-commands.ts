/**
 * `agentbus channel publish …` (docs/decisions.md#a2a): a claimable channel
 * you own as an A2A agent, whose card other agents read and whose tasks your
 * workers receive like any others.
 */
import type { Command } from "commander";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import type { JsonObject } from "../model/json.js";
import type { AgentbusApi } from "../server/mcp/api.js";
import { EXIT, Exit } from "./exit.js";

interface Io {
  out(line: string): void;
}

interface PublishFlags {
  name?: string;
  description?: string;
  skill?: string[];
  off?: boolean;
  json?: boolean;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `id=Name` or `id=Name: what it does`. */
export function parseSkill(text: string): JsonObject {
  const match = /^([^=\s]+)=([^:]+)(?::\s*(.*))?$/s.exec(text);
  if (match === null) throw new Exit(EXIT.usage, `--skill takes id=Name or id=Name: description, not ${JSON.stringify(text)}`);
  const [, id, name, description] = match;
  return { id: id!, name: name!.trim(), ...(description === undefined || description === "" ? {} : { description }) };
}

export function addA2aCommands(channel: Command, io: Io, api: () => Promise<AgentbusApi>): void {
  channel
    .command("publish <channel>")
    .description(
      "publish a claimable channel you own as an A2A agent: its card is served at /a2a/<id>/.well-known/agent-card.json and A2A clients " +
        "send it tasks at /a2a/<id> with their own API key; your workers receive them as any task. --off stops answering (the settings stay)",
    )
    .option("--name <text>", "the agent's name on its card (default: the channel's)")
    .option("--description <text>", "what the agent does (default: the channel's description)")
    .option("--skill <id=Name: description>", "a skill the card lists; repeat for several (replaces the list)", collect)
    .option("--off", "unpublish: the card and the endpoint answer 404")
    .option("--json", "print the channel as JSON")
    .action(async (identifier: string, opts: PublishFlags) => {
      const client = await api();
      const current = await client.call(ChannelService.method.getChannel, { identifier });
      const was = (current.a2a ?? {}) as JsonObject;
      const a2a: JsonObject = {
        enabled: opts.off !== true,
        ...(opts.name !== undefined ? { name: opts.name } : typeof was.name === "string" ? { name: was.name } : {}),
        ...(opts.description !== undefined ? { description: opts.description } : typeof was.description === "string" ? { description: was.description } : {}),
        skills: opts.skill !== undefined ? opts.skill.map(parseSkill) : ((was.skills ?? []) as JsonObject[]),
      };
      const updated = await client.call(ChannelService.method.updateChannel, { identifier: String(current.id), channel: { a2a } });
      if (opts.json) {
        io.out(JSON.stringify(updated));
        return;
      }
      const card = new URL(`/a2a/${String(updated.id)}/.well-known/agent-card.json`, client.url).href;
      io.out(opts.off === true ? `${String(updated.id)}  ${String(updated.name)}  unpublished` : `${String(updated.id)}  ${String(updated.name)}  published  card ${card}`);
    });
  channel
    .command("forward <channel> [url]")
    .description(
      "forward the work of a claimable channel you own to a remote A2A agent (its card URL or base URL): each message is sent to the agent " +
        "and acknowledged with its answer, or released to be retried; --off stops",
    )
    .option("--header <name: value>", "a header sent with every request to the agent (its value is never shown again)")
    .option("--off", "stop forwarding")
    .option("--json", "print the channel as JSON")
    .action(async (identifier: string, url: string | undefined, opts: { header?: string; off?: boolean; json?: boolean }) => {
      if (opts.off !== true && url === undefined) throw new Exit(EXIT.usage, "channel forward needs the agent's URL (or --off)");
      let authHeader: JsonObject | undefined;
      if (opts.header !== undefined) {
        const colon = opts.header.indexOf(":");
        if (colon <= 0) throw new Exit(EXIT.usage, "--header takes 'Name: value'");
        authHeader = { name: opts.header.slice(0, colon).trim(), value: opts.header.slice(colon + 1).trim() };
      }
      const client = await api();
      const forward = opts.off === true ? null : { url: url!, ...(authHeader === undefined ? {} : { auth_header: authHeader }) };
      const updated = await client.call(ChannelService.method.updateChannel, { identifier, channel: { a2a_forward: forward } });
      if (opts.json) {
        io.out(JSON.stringify(updated));
        return;
      }
      io.out(opts.off === true ? `${String(updated.id)}  ${String(updated.name)}  not forwarded` : `${String(updated.id)}  ${String(updated.name)}  forwarded to ${url!}`);
    });
}
