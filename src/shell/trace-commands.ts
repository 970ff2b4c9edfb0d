/**
 * `agentbus trace <trace id | message id>` (docs/decisions.md#trace-context):
 * the messages of a trace you may read, oldest first: a hand-off chain.
 */
import type { Command } from "commander";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../model/json.js";
import { isUuid } from "../model/ids.js";
import type { AgentbusApi } from "../server/mcp/api.js";

interface Io {
  out(line: string): void;
}

export function addTraceCommands(program: Command, io: Io, api: () => Promise<AgentbusApi>): void {
  program
    .command("trace <id>")
    .description("list the messages of a trace you may read, oldest first (id: a trace id, or a message id whose trace to list): id, channel, state, content")
    .option("--json", "one JSON object per line")
    .action(async (id: string, opts: { json?: boolean }) => {
      const client = await api();
      let traceId = id;
      if (isUuid(id)) {
        const message = await client.call(MessageService.method.getMessage, { message_id: id });
        traceId = String((message.trace as JsonObject | null | undefined)?.traceparent ?? "").slice(3, 35);
      }
      const page = await client.call(MessageService.method.listTraceMessages, { trace_id: traceId });
      for (const m of (page.data ?? []) as JsonObject[]) {
        const content = String(m.content ?? "");
        io.out(opts.json ? JSON.stringify(m) : `${String(m.id)}  ${String(m.channel_id)}  ${String(m.state)}  ${content.length > 60 ? `${content.slice(0, 60)}…` : content}`);
      }
    });
}
