/**
 * The shell commands of `agentbus` (beside serve, worker, migrate and mcp):
 * login, key, channel, limit, send, tail, work, result, pdf, parse, transcript.
 * Arguments are parsed by commander. Each command talks to a running service
 * over its REST API (the same client the MCP tools use).
 *
 * Exit codes (./exit.ts): 0 done; 1 the service refused (its error code and
 * suggestion go to stderr) or something else went wrong; 2 bad usage or a
 * local file that cannot be read or written; 3 the service could not be
 * reached; 4 a wait ran out before the awaited thing happened (result, job);
 * `work` adds 126, 127 and 130.
 *
 * Everything printed goes through one writer that escapes what would act on
 * a terminal (./terminal.ts); `--raw` turns that off.
 */
import { createInterface } from "node:readline";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../model/json.js";
import { AgentbusApi, ApiCallError, notSpinning, pause } from "../server/mcp/api.js";
import { traceFrom, traceHeaders } from "../model/trace.js";
import { MCP_SERVICES } from "../server/mcp/services.js";
import { EXIT, Exit } from "./exit.js";
import { readAll, readInput, writeOutput } from "./files.js";
import { resolveProfile, writeProfile, type Profile } from "./profile.js";
import { onTerminal, type Io as TerminalIo } from "./terminal.js";
import { addScheduleCommands } from "./schedule-commands.js";
import { addA2aCommands } from "./a2a-commands.js";
import { addTraceCommands } from "./trace-commands.js";
import { addWaitpointCommands } from "./waitpoint-commands.js";
import { work } from "./work.js";

export { EXIT } from "./exit.js";

export interface Io extends TerminalIo {
  /** Stops `tail` as Ctrl-C does, and `work` as a first Ctrl-C does, for a caller that runs them in its own process. */
  stop?: AbortSignal;
}

interface GlobalFlags {
  url?: string;
  key?: string;
  raw?: boolean;
}

interface ChannelCreateFlags {
  mode: string;
  access: string;
  description?: string;
  groupConcurrency?: number;
  dispatch?: string;
  priorityAging?: number;
  limit?: string[];
  new?: boolean;
  json?: boolean;
}

interface SendFlags {
  group?: string;
  priority?: string;
  ttl?: number;
  limit?: string[];
  dependsOn?: string[];
  json?: boolean;
}

/** How long a result or job wait may be asked for, per request (the service caps long-polls lower). */
const WAIT_SLICE = 20;
/** How often a job's state is asked for: GET /v1/jobs/{id} does not long-poll. */
const JOB_POLL_MS = 500;

const oneLine = (text: string) => text.replace(/\s*\n\s*/g, " ⏎ ");

/** Ctrl-C, SIGTERM or `io.stop`: ends a loop that runs until interrupted. */
function interruption(io: Io): { signal: AbortSignal; dispose(): void } {
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  io.stop?.addEventListener("abort", onSignal, { once: true });
  if (io.stop?.aborted === true) stop.abort();
  return {
    signal: stop.signal,
    dispose: () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      io.stop?.removeEventListener("abort", onSignal);
    },
  };
}

/**
 * The environment of `work`'s command: the worker's own, without the API key
 * unless the user passes it on (--pass-key). Any variable holding the key is
 * dropped, whatever its name, as the key may have been copied under another
 * (docs/decisions.md#shell-work).
 */
function commandEnvironment(env: NodeJS.ProcessEnv, key: string | undefined, passKey: boolean): NodeJS.ProcessEnv {
  const child: NodeJS.ProcessEnv = { ...env };
  delete child.AGENTBUS_API_KEY;
  if (key !== undefined) for (const [name, value] of Object.entries(child)) if (value?.trim() === key) delete child[name];
  if (passKey && key !== undefined) child.AGENTBUS_API_KEY = key;
  return child;
}

/**
 * Who wrote a message, as a person knows them: the actor it names, else the
 * posting key's agent label, else the key's id (a service that does not send
 * author_label yet, or a key since deleted).
 */
function authorOf(m: JsonObject): string {
  const actor = m.actor as { name?: unknown } | null | undefined;
  for (const name of [actor?.name, m.actor_label, m.author_label]) if (typeof name === "string" && name !== "") return name;
  return String(m.author_key_id ?? "");
}

/** States in which a task will never get a result. */
const ENDED_STATES = new Set(["dead_lettered", "expired", "cancelled"]);

const messageLine = (m: JsonObject) => `${String(m.created_at)}  ${authorOf(m)}  ${oneLine(String(m.content ?? ""))}`;
const channelLine = (c: JsonObject) => `${String(c.id)}  ${String(c.name)}  ${String(c.mode)}`;

/** Channel lists count each channel's messages only this far (the service stops there): the number means "at least". */
const COUNT_CAP = 1000;
const countOf = (n: unknown) => {
  const count = typeof n === "number" ? n : 0;
  return count >= COUNT_CAP ? `${COUNT_CAP}+` : String(count);
};

/** A listed channel: its line, its owner's label, its live messages and, on a work queue, its open work (broadcast channels have none to count). */
const summaryLine = (c: JsonObject) =>
  `${channelLine(c)}  owner ${String(c.owner_id ?? "")}  live ${countOf(c.live_messages)}${c.mode === "claimable" ? `  open ${countOf(c.open_messages)}` : ""}`;

/** A flag's whole-number value; anything else is bad usage (exit 2), before anything is sent. */
const wholeNumber = (value: string): number => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isInteger(n)) throw new InvalidArgumentError("Not a whole number.");
  return n;
};

/** A repeatable flag's values, in the order given. */
const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

/** `--rate 100/60`: at most 100 deliveries in any 60 seconds (a trailing "s" is allowed). */
const rateOf = (value: string): { count: number; per_seconds: number } => {
  const match = /^\s*(\d+)\s*\/\s*(\d+)\s*s?\s*$/.exec(value);
  if (match === null) throw new InvalidArgumentError("Give it as COUNT/SECONDS, e.g. 100/60 for 100 deliveries a minute.");
  return { count: Number(match[1]), per_seconds: Number(match[2]) };
};

/** A limit's line: its name, what is in flight of its bound, and what its rate window used. */
function limitLine(l: JsonObject): string {
  const max = typeof l.max_in_flight === "number" ? ` of ${l.max_in_flight}` : " (no bound)";
  const rate = l.rate as { count?: number; per_seconds?: number } | null | undefined;
  const window = rate ? `used ${String(l.used_in_window ?? 0)} of ${String(rate.count)} per ${String(rate.per_seconds)} s` : "no rate";
  return `${String(l.name)}  in flight ${String(l.in_flight ?? 0)}${max}  ${window}`;
}

/** stdin is a terminal: a person can answer a question there. */
const stdinIsTTY = (io: Io) => (io.stdin as { isTTY?: boolean }).isTTY === true;

/** Asks on stderr and reads one line of stdin; only "y" or "yes" is a yes. */
async function confirm(io: Io, question: string): Promise<boolean> {
  io.err(`${question} [y/N]`);
  const lines = createInterface({ input: io.stdin, terminal: false });
  try {
    for await (const line of lines) return /^\s*y(es)?\s*$/i.test(line);
    return false;
  } finally {
    lines.close();
  }
}

/** `send`'s content from stdin: what `echo` and an editor add, one trailing newline, is not part of the message. */
const withoutTrailingNewline = (text: string) => text.replace(/\r?\n$/, "");

/** A failure to reach the service: fetch's own errors (they carry a cause), or a call's time limit. */
function unreachable(err: unknown): err is Error {
  return err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError" || (err instanceof TypeError && err.cause !== undefined));
}

function unreachableReason(err: Error): string {
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  if (typeof cause?.code === "string") return cause.code;
  if (typeof cause?.message === "string" && cause.message !== "") return cause.message;
  return err.message;
}

const WORK_EXIT_CODES = `
Exit codes:
  0    stopped by Ctrl-C (after the current task), or --once and the task was completed
  1    --once and the command failed (non-zero exit, killed) or the service refused its result;
       or the service refused a call (e.g. no such channel)
  2    bad usage
  3    the service could not be reached
  126  the command cannot be run (e.g. not executable); the task is released at once
  127  the command was not found; the task is released at once and the worker stops
  130  stopped by a second Ctrl-C: the command was stopped and the task released

Ctrl-C (or SIGTERM) once: the running command goes on, its task is completed (or released if it
fails), then the worker exits. Twice: the command's process group gets SIGTERM (SIGKILL 5 s later,
or at a third Ctrl-C), the task is released, exit 130. The command runs in its own session and
process group, without a controlling terminal, so the terminal's Ctrl-C does not reach it; it is
killed with its group if the worker ends any other way (kill -9, a closed terminal).`;

export function buildProgram(io: Io): Command {
  const program = new Command("agentbus")
    .description("agentbus: a message bus for software agents. Service commands (serve, worker, migrate, mcp) are listed by `agentbus help`.")
    .option("--url <url>", "the service's base URL (else AGENTBUS_URL, the profile, http://127.0.0.1:8080)")
    .option("--key <key>", "the API key (else AGENTBUS_API_KEY, the profile)")
    .option("--raw", "print what the service sent byte-exact even on a terminal (by default control characters, escape sequences and bidi overrides are shown escaped there, e.g. \\u001b)")
    .configureHelp({ showGlobalOptions: true })
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s.trimEnd()), writeErr: (s) => io.err(s.trimEnd()) });

  const profile = async (): Promise<Profile> => resolveProfile(io.env, program.opts<GlobalFlags>());
  const api = async (needsKey = true): Promise<AgentbusApi> => {
    const p = await profile();
    if (needsKey && p.key === undefined) throw new Exit(EXIT.usage, "no API key: pass --key, set AGENTBUS_API_KEY, or run `agentbus login`");
    // A command run by `agentbus work` (or under any tracer that sets TRACEPARENT) continues its task's trace.
    return new AgentbusApi(MCP_SERVICES, () => p.url, p.key, traceHeaders(traceFrom(io.env.TRACEPARENT, io.env.TRACESTATE)));
  };

  program
    .command("login")
    .description(
      "store the service URL and an API key in the profile file (mode 0600): checks a given key (--key, AGENTBUS_API_KEY, the profile) with the service, " +
        "or mints one when none is given",
    )
    .option("--label <label>", "the agent label of a key minted here", "cli")
    .action(async (opts: { label: string }) => {
      const p = await profile();
      const client = new AgentbusApi(MCP_SERVICES, () => p.url, p.key);
      let key = p.key;
      try {
        if (key === undefined) key = String((await client.call(KeyService.method.createKey, { agent_label: opts.label })).key ?? "");
        else await client.call(KeyService.method.getCurrentKey, {});
      } catch (err) {
        // Unreachable: the general message names the URL too.
        if (err instanceof ApiCallError) io.err(`agentbus: login to ${p.url} failed`);
        throw err;
      }
      const file = await writeProfile(io.env, { url: p.url, key });
      io.out(`logged in to ${p.url}; profile saved in ${file}`);
    });

  const key = program.command("key").description("API keys");
  key
    .command("create")
    .description("mint a new API key and print it (store it: it is shown once)")
    .option("--label <label>", "the agent label", "cli")
    .option("--json", "print the whole answer as JSON")
    .action(async (opts: { label: string; json?: boolean }) => {
      const issued = await (await api(false)).call(KeyService.method.createKey, { agent_label: opts.label });
      io.out(opts.json ? JSON.stringify(issued) : String(issued.key ?? ""));
    });
  key
    .command("show")
    .description("show the key in use: its label, scopes, request budget and storage quotas (used of limit)")
    .option("--json", "print the whole answer as JSON")
    .action(async (opts: { json?: boolean }) => {
      const info = await (await api()).call(KeyService.method.getCurrentKey, {});
      if (opts.json) {
        io.out(JSON.stringify(info));
        return;
      }
      io.out(`${String(info.key_id)}  ${String(info.agent_label)}  scopes: ${((info.scopes ?? []) as string[]).join(" ")}`);
      const quotas = (info.quotas ?? {}) as Record<string, { used: number; limit: number | null }>;
      for (const [name, q] of Object.entries(quotas)) io.out(`${name}: ${q.used} of ${q.limit ?? "unlimited"}`);
    });

  const channel = program.command("channel").description("channels");
  channel
    .command("create <name>")
    .description(
      "find or create a channel: your channel of that name is reused as it is (stderr says it already existed), else one is created " +
        "(claimable: a work queue; broadcast: every reader sees every message)",
    )
    .addOption(new Option("--mode <mode>", "claimable or broadcast (when creating)").choices(["claimable", "broadcast"]).default("claimable"))
    .addOption(new Option("--access <access>", "open or restricted (when creating)").choices(["open", "restricted"]).default("open"))
    .option("--description <text>", "what the channel is for (when creating)")
    .option("--group-concurrency <n>", "claimable: at most this many messages of one group in flight at once, 1..1000; 1 works each group strictly in order (when creating; default unbounded)", wholeNumber)
    .addOption(new Option("--dispatch <rule>", "claimable: fifo (oldest open work first) or fair (take turns between groups) (when creating; default fifo)").choices(["fifo", "fair"]))
    .option("--priority-aging <seconds>", "a waiting message counts one priority level more urgent per this many seconds, 1..86400 (when creating; default none)", wholeNumber)
    .option("--limit <name>", "a shared limit of yours (`agentbus limit create`) every delivered message holds; repeat for several (when creating)", collect)
    .option("--new", "create a new channel even if you have one of that name")
    .option("--json", "print the channel as JSON")
    .action(async (name: string, opts: ChannelCreateFlags) => {
      const client = await api();
      const print = (c: JsonObject) => io.out(opts.json ? JSON.stringify(c) : channelLine(c));
      if (!opts.new) {
        const existing = await ownChannelNamed(client, name);
        if (existing !== undefined) {
          io.err(`agentbus: channel ${name} already existed (${String(existing.id)}); reusing it as it is (--new creates another)`);
          print(existing);
          return;
        }
      }
      const settings: JsonObject = {
        ...(opts.groupConcurrency === undefined ? {} : { group_concurrency: opts.groupConcurrency }),
        ...(opts.dispatch === undefined ? {} : { dispatch: opts.dispatch }),
        ...(opts.priorityAging === undefined ? {} : { priority_aging_seconds: opts.priorityAging }),
        ...(opts.limit === undefined ? {} : { limits: opts.limit }),
      };
      print(await client.call(ChannelService.method.createChannel, { name, mode: opts.mode, access: opts.access, description: opts.description ?? null, ...settings }));
    });
  channel
    .command("get <channel>")
    .description("show a channel (id, alias, or the name of a channel you created)")
    .action(async (identifier: string) => {
      io.out(JSON.stringify(await (await api()).call(ChannelService.method.getChannel, { identifier }), null, 2));
    });
  channel
    .command("list")
    .description(
      "list your channels (created or joined), newest first: id, name, mode, owner, live messages and, on a claimable channel, open work " +
        `(ready to claim), each counted up to ${COUNT_CAP} ("${COUNT_CAP}+": at least that many); --discover lists the public ones`,
    )
    .option("--discover", "list discoverable channels instead")
    .option("--json", "one JSON object per line")
    .action(async (opts: { discover?: boolean; json?: boolean }) => {
      const page = await (await api()).call(opts.discover ? ChannelService.method.discoverChannels : ChannelService.method.listMyChannels, {});
      for (const c of (page.data ?? []) as JsonObject[]) io.out(opts.json ? JSON.stringify(c) : summaryLine(c));
    });
  channel
    .command("rename <channel> <new-name>")
    .description("rename a channel you own (its id and aliases stay)")
    .option("--json", "print the channel as JSON")
    .action(async (identifier: string, name: string, opts: { json?: boolean }) => {
      const renamed = await (await api()).call(ChannelService.method.updateChannel, { identifier, channel: { name } });
      io.out(opts.json ? JSON.stringify(renamed) : channelLine(renamed));
    });
  channel
    .command("alias <channel> <alias>")
    .description(
      "give a channel you own an alias: a name unique across the service, by which anyone can address it; with --remove, take it off again " +
        "(the alias is then free for anyone). Prints the channel and the aliases it holds",
    )
    .option("--remove", "remove the alias instead of adding it")
    .option("--json", "print the channel as JSON")
    .action(async (identifier: string, alias: string, opts: { remove?: boolean; json?: boolean }) => {
      const client = await api();
      const changed = await client.call(opts.remove ? ChannelService.method.removeChannelAlias : ChannelService.method.addChannelAlias, { identifier, alias });
      const aliases = (changed.aliases ?? []) as string[];
      io.out(opts.json ? JSON.stringify(changed) : `${channelLine(changed)}  aliases: ${aliases.length > 0 ? aliases.join(" ") : "none"}`);
    });
  channel
    .command("delete <channel>")
    .description("delete a channel you own, with its messages, for good; asks first on a terminal, needs --yes when stdin is not one")
    .option("--yes", "delete without asking")
    .action(async (identifier: string, opts: { yes?: boolean }) => {
      if (opts.yes !== true && !stdinIsTTY(io)) throw new Exit(EXIT.usage, "channel delete asks for confirmation on a terminal; pass --yes to delete without asking");
      const client = await api();
      // Deleted by id: what was confirmed is what goes, whatever the name or alias resolves to meanwhile.
      const found = await client.call(ChannelService.method.getChannel, { identifier });
      if (opts.yes !== true && !(await confirm(io, `delete channel ${String(found.name)} (${String(found.id)}) and all its messages for good?`))) {
        throw new Exit(EXIT.refused, "not deleted");
      }
      await client.call(ChannelService.method.deleteChannel, { identifier: String(found.id) });
      io.out(`${String(found.id)}  ${String(found.name)}  deleted`);
    });

  addA2aCommands(channel, io, api);
  addTraceCommands(program, io, api);

  const limit = program.command("limit").description("shared limits: bounds on the messages in flight and on deliveries per window, across every channel and message that names them (a model provider's quota, say)");
  limit
    .command("create <name>")
    .description("create a shared limit; give --max-in-flight, --rate or both. Channels name it with `channel create --limit`, messages with `send --limit`")
    .option("--max-in-flight <n>", "at most this many delivered messages hold it at once, 1..100000", wholeNumber)
    .option("--rate <count/seconds>", "at most COUNT deliveries in any SECONDS, e.g. 100/60 (COUNT 1..1000000, SECONDS 1..86400)", rateOf)
    .option("--json", "print the limit as JSON")
    .action(async (name: string, opts: { maxInFlight?: number; rate?: { count: number; per_seconds: number }; json?: boolean }) => {
      if (opts.maxInFlight === undefined && opts.rate === undefined) throw new Exit(EXIT.usage, "limit create needs --max-in-flight, --rate or both");
      const created = await (await api()).call(LimitService.method.createLimit, {
        name,
        ...(opts.maxInFlight === undefined ? {} : { max_in_flight: opts.maxInFlight }),
        ...(opts.rate === undefined ? {} : { rate: opts.rate }),
      });
      io.out(opts.json ? JSON.stringify(created) : limitLine(created));
    });
  limit
    .command("list")
    .description("list your limits with their live use: in flight of the bound, and deliveries in the current rate window")
    .option("--json", "one JSON object per line")
    .action(async (opts: { json?: boolean }) => {
      const page = await (await api()).call(LimitService.method.listLimits, {});
      for (const l of (page.data ?? []) as JsonObject[]) io.out(opts.json ? JSON.stringify(l) : limitLine(l));
    });
  limit
    .command("get <name>")
    .description("show one of your limits with its live use, as JSON")
    .action(async (name: string) => {
      io.out(JSON.stringify(await (await api()).call(LimitService.method.getLimit, { name }), null, 2));
    });
  limit
    .command("update <name>")
    .description("change a limit's bounds (the next delivery on uses them); `none` removes one, as long as the other remains")
    .option("--max-in-flight <n|none>", "the new bound on messages in flight, 1..100000, or none")
    .option("--rate <count/seconds|none>", "the new rate, e.g. 100/60, or none")
    .option("--json", "print the limit as JSON")
    .action(async (name: string, opts: { maxInFlight?: string; rate?: string; json?: boolean }) => {
      if (opts.maxInFlight === undefined && opts.rate === undefined) throw new Exit(EXIT.usage, "limit update needs --max-in-flight, --rate or both");
      const update: JsonObject = {};
      try {
        if (opts.maxInFlight !== undefined) update.max_in_flight = opts.maxInFlight === "none" ? null : wholeNumber(opts.maxInFlight);
        if (opts.rate !== undefined) update.rate = opts.rate === "none" ? null : rateOf(opts.rate);
      } catch (err) {
        if (err instanceof InvalidArgumentError) throw new Exit(EXIT.usage, err.message);
        throw err;
      }
      const changed = await (await api()).call(LimitService.method.updateLimit, { name, update });
      io.out(opts.json ? JSON.stringify(changed) : limitLine(changed));
    });
  limit
    .command("delete <name>")
    .description("delete a limit: channels and messages that named it stop holding it")
    .action(async (name: string) => {
      await (await api()).call(LimitService.method.deleteLimit, { name });
      io.out(`${name}  deleted`);
    });

  program
    .command("send <channel> [content]")
    .description("post a message; the content comes from the argument or, without one (or with -), from stdin less one trailing newline")
    .option("--group <key>", "the message's group (1..128 characters), e.g. a repository: a channel with a group concurrency works a group's messages a few, or one, at a time")
    .addOption(new Option("--priority <1-5>", "how urgent: 1 (most) to 5 (least); workers receive more urgent work first (default 3)").choices(["1", "2", "3", "4", "5"]))
    .option("--ttl <seconds>", "expire the message this many seconds after posting, when sooner than the channel's TTL", wholeNumber)
    .option("--limit <name>", "a shared limit of the channel's owner the message holds while in flight, besides the channel's; repeat for several", collect)
    .option("--depends-on <message-id>", "a message this one waits for: it is handed out once each is acknowledged, with their results; repeat for several", collect)
    .option("--json", "print the stored message as JSON")
    .action(async (identifier: string, content: string | undefined, opts: SendFlags) => {
      const text = content === undefined || content === "-" ? withoutTrailingNewline(await readAll(io.stdin)) : content;
      if (text === "") throw new Exit(EXIT.usage, "nothing to send: give the content as an argument or on stdin");
      const posted = await (await api()).call(MessageService.method.createMessage, {
        identifier,
        content: text,
        ...(opts.group === undefined ? {} : { group_key: opts.group }),
        ...(opts.priority === undefined ? {} : { priority: Number(opts.priority) }),
        ...(opts.ttl === undefined ? {} : { ttl_seconds: opts.ttl }),
        ...(opts.limit === undefined ? {} : { limits: opts.limit }),
        ...(opts.dependsOn === undefined ? {} : { depends_on: opts.dependsOn }),
      });
      const message = posted.message as JsonObject;
      io.out(opts.json ? JSON.stringify(message) : String(message.id));
    });

  program
    .command("cancel <message-id>")
    .description("cancel a task you posted (or one in a channel you own): never handed out if no worker has it; a worker holding it is told, and may still finish it")
    .option("--reason <text>", "why, for the worker and whoever reads the task (at most 500 characters)")
    .option("--json", "print the message as JSON")
    .action(async (messageId: string, opts: { reason?: string; json?: boolean }) => {
      const client = await api();
      const { message } = (await client.call(MessageService.method.cancelMessage, { message_id: messageId, ...(opts.reason === undefined ? {} : { reason: opts.reason }) })) as {
        message: JsonObject;
      };
      if (opts.json) io.out(JSON.stringify(message));
      else io.out(message.state === "cancelled" ? `${messageId}: cancelled` : `${messageId}: cancel requested; its worker is told and lets go of it (a result it still sends is kept)`);
    });

  addWaitpointCommands(program, io, api);
  addScheduleCommands(program, io, api);

  program
    .command("result <message-id>")
    .description("print a task's result; with --wait, wait up to that many seconds for a worker to complete it (exits 1 at once if the task was dead-lettered, expired or cancelled)")
    .option("--wait <seconds>", "seconds to wait for the result", (v) => Number(v), 0)
    .option("--json", "print the whole message as JSON")
    .action(async (messageId: string, opts: { wait: number; json?: boolean }) => {
      if (!Number.isFinite(opts.wait) || opts.wait < 0) throw new Exit(EXIT.usage, "--wait takes a number of seconds");
      const client = await api();
      const deadline = Date.now() + opts.wait * 1000;
      for (;;) {
        const left = Math.max(0, (deadline - Date.now()) / 1000);
        const wait = Math.min(WAIT_SLICE, left);
        const m = await client.call(MessageService.method.getMessage, { message_id: messageId, wait }, { waitSeconds: wait });
        const done = Array.isArray(m.acknowledged_by) && m.acknowledged_by.length > 0;
        // A task that can no longer be done has no result to wait for (docs/decisions.md#message-state).
        const ended = typeof m.state === "string" && ENDED_STATES.has(m.state);
        if (done || ended || left <= 0 || m.active === false) {
          if (opts.json) io.out(JSON.stringify(m));
          else if (done) io.out(String(m.result ?? ""));
          if (ended && !done) throw new Exit(EXIT.refused, `no result: the task is ${String(m.state).replace("_", "-")}`);
          if (!done) throw new Exit(EXIT.waitEnded, "no result yet");
          return;
        }
      }
    });

  program
    .command("tail <channel>")
    .description("follow a channel: one line per message (time, author, content) or --json, resuming after a dropped connection, until Ctrl-C")
    .option("--since <cursor>", "start after this cursor (0: every live message)", "0")
    .option("--json", "one JSON object per line")
    .action(async (identifier: string, opts: { since: string; json?: boolean }) => {
      const client = await api();
      const stop = interruption(io);
      let since = opts.since;
      let backoffMs = 500;
      try {
        while (!stop.signal.aborted) {
          try {
            const started = Date.now();
            const page = await client.call(MessageService.method.listMessages, { identifier, since, limit: 100, wait: WAIT_SLICE }, { waitSeconds: WAIT_SLICE, signal: stop.signal });
            const messages = (page.data ?? []) as JsonObject[];
            for (const m of messages) io.out(opts.json ? JSON.stringify(m) : messageLine(m));
            if (typeof page.next_cursor === "string") since = page.next_cursor;
            backoffMs = 500;
            await notSpinning(messages.length, started, stop.signal);
          } catch (err) {
            if (stop.signal.aborted) break;
            // A refusal is final; a dropped connection or a busy service is retried.
            if (err instanceof ApiCallError && err.status < 500 && err.status !== 429 && err.status !== 408) throw err;
            io.err(`connection lost (${err instanceof Error ? err.message : String(err)}); resuming in ${backoffMs} ms`);
            await pause(backoffMs, stop.signal);
            backoffMs = Math.min(backoffMs * 2, 30_000);
          }
        }
      } finally {
        stop.dispose();
      }
    });

  program
    .command("work <channel>")
    .argument("<command...>", "the command run per task (after --)")
    .description(
      "work a claimable channel: receive a task, run the command with its content on stdin, complete it with the command's stdout " +
        "as the result on exit 0, release it with back-off otherwise (also when the service refuses the result); heartbeats while the command runs; " +
        "Ctrl-C stops after the current task, a second Ctrl-C stops the command. The command does not get the API key: AGENTBUS_API_KEY (and any variable holding the key) " +
        "is removed from its environment unless --pass-key",
    )
    .option("--lease <seconds>", "lease length (30..3600)", (v) => Number(v), 60)
    .option("--once", "stop after one task (exit 1 when its command failed or the service refused its result)")
    .option("--pass-key", "give the command the API key as AGENTBUS_API_KEY (by default it does not get it)")
    .option("--progress", "report the command's stderr lines as the task's progress (appended, at most once a second); they still go to stderr")
    .addHelpText("after", WORK_EXIT_CODES)
    .action(async (identifier: string, command: string[], opts: { lease: number; once?: boolean; passKey?: boolean; progress?: boolean }) => {
      const client = await api();
      const env = commandEnvironment(io.env, (await profile()).key, opts.passKey === true);
      await work(client, io, identifier, command, { lease: opts.lease, once: opts.once === true, env, stop: io.stop, progress: opts.progress === true });
    });

  /** Waits for a job without a line per poll: the one line naming it is all a person or a log needs. */
  const finishedJob = async (client: AgentbusApi, jobId: string, waitSeconds: number): Promise<JsonObject> => {
    io.err(`job ${jobId} submitted`);
    const deadline = Date.now() + waitSeconds * 1000;
    let job = await client.call(JobService.method.getJob, { job_id: jobId });
    while (job.status !== "completed" && job.status !== "failed") {
      if (Date.now() > deadline) throw new Exit(EXIT.waitEnded, `job ${jobId} is still ${String(job.status)}`);
      await pause(JOB_POLL_MS);
      job = await client.call(JobService.method.getJob, { job_id: jobId });
    }
    if (job.status === "failed") {
      const error = (job.error ?? {}) as { error?: string; message?: string };
      throw new Exit(EXIT.refused, `job ${jobId} failed: ${error.error ?? ""}: ${error.message ?? ""}`);
    }
    return job;
  };
  const waitOption = () => new Option("--wait <seconds>", "how long to wait for the job").argParser((v) => Number(v)).default(120);
  const checkWait = (wait: number) => {
    if (!Number.isFinite(wait) || wait < 0) throw new Exit(EXIT.usage, "--wait takes a number of seconds");
  };
  /** Prints a job's JSON result, or writes it to `output` and prints the file's name. */
  const emitResult = async (job: JsonObject, output: string | undefined) => {
    const text = JSON.stringify(job.result, null, 2);
    if (output === undefined) {
      io.out(text);
      return;
    }
    await writeOutput(output, `${text}\n`);
    io.out(output);
  };

  program
    .command("pdf <file>")
    .description("render an HTML or Markdown file (- for stdin) to PDF: submit, wait, download to -o")
    .requiredOption("-o, --output <file>", "where to write the PDF")
    .addOption(new Option("--format <format>", "the input's format (default: markdown for .md and .markdown files, else html)").choices(["html", "markdown"]))
    .addOption(waitOption())
    .action(async (file: string, opts: { output: string; format?: string; wait: number }) => {
      checkWait(opts.wait);
      const content = await readInput(file, io.stdin);
      const format = opts.format ?? (/\.(md|markdown)$/i.test(file) ? "markdown" : "html");
      const client = await api();
      const jobId = String((await client.call(JobService.method.createPdfJob, { content, format })).job_id);
      await finishedJob(client, jobId, opts.wait);
      const p = await profile();
      const res = await fetch(new URL(`/v1/pdf/${jobId}`, p.url), { headers: p.key === undefined ? {} : { "X-API-Key": p.key } });
      if (!res.ok) throw new Exit(EXIT.refused, `the PDF could not be downloaded (HTTP ${res.status})`);
      await writeOutput(opts.output, Buffer.from(await res.arrayBuffer()));
      io.out(opts.output);
    });
  program
    .command("parse <posting>")
    .description("extract a job posting's fields from its URL (http:// or https://), or from its text in a file (- for stdin); prints them as JSON")
    .option("-o, --output <file>", "write the JSON to this file instead of stdout")
    .addOption(waitOption())
    .action(async (posting: string, opts: { output?: string; wait: number }) => {
      checkWait(opts.wait);
      const fields: JsonObject = /^https?:\/\//i.test(posting) ? { url: posting } : { text: await readInput(posting, io.stdin) };
      const client = await api();
      const jobId = String((await client.call(JobService.method.createJobPostingParseJob, fields)).job_id);
      await emitResult(await finishedJob(client, jobId, opts.wait), opts.output);
    });
  program
    .command("transcript <url>")
    .description("fetch a video's timestamped transcript; prints it as JSON")
    .option("-o, --output <file>", "write the JSON to this file instead of stdout")
    .addOption(waitOption())
    .action(async (url: string, opts: { output?: string; wait: number }) => {
      checkWait(opts.wait);
      const client = await api();
      const jobId = String((await client.call(JobService.method.createTranscriptJob, { url })).job_id);
      await emitResult(await finishedJob(client, jobId, opts.wait), opts.output);
    });

  return program;
}

/**
 * The channel `name` names when it is the caller's own of exactly that name
 * (as the MCP tool find_or_create_channel reuses it; the newest, when several
 * share the name), else undefined: no such name, or an id or another key's
 * alias that the name resolves to first (docs/decisions.md#channel-names).
 */
async function ownChannelNamed(client: AgentbusApi, name: string): Promise<JsonObject | undefined> {
  let found: JsonObject;
  try {
    found = await client.call(ChannelService.method.getChannel, { identifier: name });
  } catch (err) {
    if (err instanceof ApiCallError && err.body.error === "channel_not_found") return undefined;
    throw err;
  }
  if (found.name !== name) return undefined;
  const me = await client.call(KeyService.method.getCurrentKey, {});
  return found.created_by_key_id === me.key_id ? found : undefined;
}

/** Runs the shell command line `argv` (after `agentbus`); resolves to the exit code. */
export async function runShell(argv: readonly string[], streams: Io): Promise<number> {
  // Every line, the commands' and the errors below, goes out through this one writer.
  const io: Io = { ...streams, ...onTerminal(streams, () => program.opts<GlobalFlags>().raw === true) };
  const program = buildProgram(io);
  try {
    await program.parseAsync([...argv], { from: "user" });
    return EXIT.ok;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof Exit) {
      if (err.message !== "") io.err(`agentbus: ${err.message}`);
      return err.code;
    }
    if (err instanceof ApiCallError) {
      io.err(`agentbus: ${err.body.error}: ${err.body.message}`);
      if (err.body.suggestion !== undefined) io.err(`hint: ${err.body.suggestion}`);
      return EXIT.refused;
    }
    if (unreachable(err)) {
      const { url } = await resolveProfile(io.env, program.opts<GlobalFlags>());
      io.err(`agentbus: the service at ${url} could not be reached (${unreachableReason(err)})`);
      return EXIT.unreachable;
    }
    io.err(`agentbus: ${err instanceof Error ? err.message : String(err)}`);
    return EXIT.refused;
  }
}
