/**
 * `agentbus schedule …` (docs/decisions.md#schedules): a message posted to a
 * channel at each tick of a cron expression, as the key that created it.
 */
import { Option, type Command } from "commander";
import { ScheduleService } from "../../gen/agentbus/v1/schedule_service_pb.js";
import type { JsonObject } from "../model/json.js";
import type { AgentbusApi } from "../server/mcp/api.js";
import { EXIT, Exit } from "./exit.js";

interface Io {
  out(line: string): void;
}

/** A schedule's line: id, cron and zone, when it ticks next (or paused), its runs and last error. */
function scheduleLine(s: JsonObject): string {
  const when = s.paused === true ? "paused" : `next ${String(s.next_run_at ?? "never")}`;
  const error = typeof s.last_error === "string" ? `  last error ${s.last_error}` : "";
  return `${String(s.id)}  ${String(s.cron)} (${String(s.timezone)})  ${when}  runs ${String(s.runs ?? 0)}${error}`;
}

function metadataOf(json: string | undefined): JsonObject | undefined {
  if (json === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new Exit(EXIT.usage, "--metadata must be a JSON object");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new Exit(EXIT.usage, "--metadata must be a JSON object");
  return parsed as JsonObject;
}

export function addScheduleCommands(program: Command, io: Io, api: () => Promise<AgentbusApi>): void {
  const schedule = program
    .command("schedule")
    .description("schedules: a message posted to a channel at each tick of a cron expression, once per tick however many service processes run");
  schedule
    .command("create <channel> <cron> <content>")
    .description("post CONTENT to CHANNEL at each tick of CRON: five fields (minute hour day month weekday, e.g. '0 9 * * 1-5') or six with seconds first")
    .option("--timezone <zone>", "the IANA time zone CRON is read in, e.g. Europe/Berlin (default UTC)")
    .option("--metadata <json>", "the message's metadata, a JSON object")
    .option("--group <key>", "the message's group")
    .addOption(new Option("--priority <1-5>", "the message's priority").choices(["1", "2", "3", "4", "5"]))
    .option("--paused", "create it paused: no tick runs until `agentbus schedule resume`")
    .option("--json", "print the schedule as JSON")
    .action(async (channel: string, cron: string, content: string, opts: { timezone?: string; metadata?: string; group?: string; priority?: string; paused?: boolean; json?: boolean }) => {
      const metadata = metadataOf(opts.metadata);
      const created = await (await api()).call(ScheduleService.method.createSchedule, {
        channel,
        cron,
        ...(opts.timezone === undefined ? {} : { timezone: opts.timezone }),
        message: {
          content,
          ...(metadata === undefined ? {} : { metadata }),
          ...(opts.group === undefined ? {} : { group_key: opts.group }),
          ...(opts.priority === undefined ? {} : { priority: Number(opts.priority) }),
        },
        ...(opts.paused ? { paused: true } : {}),
      });
      io.out(opts.json ? JSON.stringify(created) : scheduleLine(created));
    });
  schedule
    .command("list")
    .description("list a channel's schedules (--channel) or the ones your key created")
    .option("--channel <channel>", "a channel you may use")
    .option("--json", "one JSON object per line")
    .action(async (opts: { channel?: string; json?: boolean }) => {
      const page = await (await api()).call(ScheduleService.method.listSchedules, opts.channel === undefined ? {} : { channel: opts.channel });
      for (const s of (page.data ?? []) as JsonObject[]) io.out(opts.json ? JSON.stringify(s) : scheduleLine(s));
    });
  schedule
    .command("get <id>")
    .description("show a schedule as JSON")
    .action(async (id: string) => {
      io.out(JSON.stringify(await (await api()).call(ScheduleService.method.getSchedule, { id }), null, 2));
    });
  for (const [verb, paused, what] of [
    ["pause", true, "stop a schedule's ticks until it is resumed"],
    ["resume", false, "start a paused schedule again; its next tick is taken from now"],
  ] as const) {
    schedule
      .command(`${verb} <id>`)
      .description(what)
      .action(async (id: string) => {
        io.out(scheduleLine(await (await api()).call(ScheduleService.method.updateSchedule, { id, update: { paused } })));
      });
  }
  schedule
    .command("delete <id>")
    .description("delete a schedule (the messages it posted stay)")
    .action(async (id: string) => {
      await (await api()).call(ScheduleService.method.deleteSchedule, { id });
      io.out(`${id}  deleted`);
    });
}
