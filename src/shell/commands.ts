/**
 * The shell commands of `agentbus` (beside serve, worker, migrate and mcp):
 * login, key, channel, send, tail, work, result, pdf, parse, transcript.
 * Arguments are parsed by commander. Each command talks to a running service
 * over its REST API (the same client the MCP tools use).
 *
 * Exit codes: 0 done; 1 the service refused (its error code and suggestion go
 * to stderr); 2 bad usage; 3 the service could not be reached; 4 a wait ran
 * out before the awaited thing happened (result, job).
 *
 * Everything printed goes through one writer that escapes what would act on
 * a terminal (./terminal.ts); `--raw` turns that off.
 */
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { Command, CommanderError, Option } from "commander";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../model/json.js";
import { AgentbusApi, ApiCallError, notSpinning, pause } from "../server/mcp/api.js";
import { MCP_SERVICES } from "../server/mcp/services.js";
import { resolveProfile, writeProfile, type Profile } from "./profile.js";
import { onTerminal, type Io as TerminalIo } from "./terminal.js";

export const EXIT = { ok: 0, refused: 1, usage: 2, unreachable: 3, waitEnded: 4 } as const;

/** Ends a command with an exit code (and a line for stderr). */
class Exit extends Error {
  constructor(
    readonly code: number,
    message = "",
  ) {
    super(message);
  }
}

export interface Io extends TerminalIo {
  /** Stops `tail` and `work` as Ctrl-C does, for a caller that runs them in its own process. */
  stop?: AbortSignal;
}

interface GlobalFlags {
  url?: string;
  key?: string;
  raw?: boolean;
}

/** How long a result or job wait may be asked for, per request (the service caps long-polls lower). */
const WAIT_SLICE = 20;
const RESULT_MAX_BYTES = 64 * 1024;
/** What is kept of a command's stdout: a multi-byte character cut at the end decodes to U+FFFD (3 bytes), still within the limit. */
const STDOUT_KEPT_BYTES = RESULT_MAX_BYTES - 3;
async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString("utf8");
}

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

/** A task is retried after 2^(delivery−1) s, at most 5 minutes. */
const retryDelaySeconds = (message: JsonObject) => Math.min(2 ** Math.max(0, Number(message.delivery_count ?? 1) - 1), 300);

const errorText = (err: unknown) => (err instanceof ApiCallError ? `${err.body.error}: ${err.body.message}` : err instanceof Error ? err.message : String(err));

function messageLine(m: JsonObject): string {
  const who = (m.actor as { name?: string } | null)?.name ?? (m.actor_label as string | null) ?? String(m.author_key_id ?? "");
  return `${String(m.created_at)}  ${who}  ${oneLine(String(m.content ?? ""))}`;
}

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
    return new AgentbusApi(MCP_SERVICES, () => p.url, p.key);
  };

  program
    .command("login")
    .description("store the service URL and an API key in the profile file (mode 0600); mints a key when none is given (--key, AGENTBUS_API_KEY, the profile)")
    .option("--label <label>", "the agent label of a key minted here", "cli")
    .action(async (opts: { label: string }) => {
      const p = await profile();
      let key = p.key;
      if (key === undefined) {
        const issued = await (await api(false)).call(KeyService.method.createKey, { agent_label: opts.label });
        key = String(issued.key ?? "");
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
    .description("create a channel (claimable: a work queue; broadcast: every reader sees every message)")
    .addOption(new Option("--mode <mode>", "claimable or broadcast").choices(["claimable", "broadcast"]).default("claimable"))
    .addOption(new Option("--access <access>", "open or restricted").choices(["open", "restricted"]).default("open"))
    .option("--description <text>", "what the channel is for")
    .option("--json", "print the channel as JSON")
    .action(async (name: string, opts: { mode: string; access: string; description?: string; json?: boolean }) => {
      const created = await (await api()).call(ChannelService.method.createChannel, { name, mode: opts.mode, access: opts.access, description: opts.description ?? null });
      io.out(opts.json ? JSON.stringify(created) : `${String(created.id)}  ${String(created.name)}  ${String(created.mode)}`);
    });
  channel
    .command("get <channel>")
    .description("show a channel (id, alias, or the name of a channel you created)")
    .action(async (identifier: string) => {
      io.out(JSON.stringify(await (await api()).call(ChannelService.method.getChannel, { identifier }), null, 2));
    });
  channel
    .command("list")
    .description("list your channels (created or joined), newest first; --discover lists the public ones")
    .option("--discover", "list discoverable channels instead")
    .option("--json", "one JSON object per line")
    .action(async (opts: { discover?: boolean; json?: boolean }) => {
      const page = await (await api()).call(opts.discover ? ChannelService.method.discoverChannels : ChannelService.method.listMyChannels, {});
      for (const c of (page.data ?? []) as JsonObject[]) io.out(opts.json ? JSON.stringify(c) : `${String(c.id)}  ${String(c.name)}  ${String(c.mode)}`);
    });

  program
    .command("send <channel> [content]")
    .description("post a message; the content comes from the argument or, without one, from stdin")
    .option("--json", "print the stored message as JSON")
    .action(async (identifier: string, content: string | undefined, opts: { json?: boolean }) => {
      const text = content ?? (await readAll(io.stdin));
      if (text === "") throw new Exit(EXIT.usage, "nothing to send: give the content as an argument or on stdin");
      const posted = await (await api()).call(MessageService.method.createMessage, { identifier, content: text });
      const message = posted.message as JsonObject;
      io.out(opts.json ? JSON.stringify(message) : String(message.id));
    });

  program
    .command("result <message-id>")
    .description("print a task's result; with --wait, wait up to that many seconds for a worker to complete it")
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
        if (done || left <= 0 || m.active === false) {
          if (opts.json) io.out(JSON.stringify(m));
          else if (done) io.out(String(m.result ?? ""));
          if (!done) throw new Exit(EXIT.waitEnded, "no result yet");
          return;
        }
      }
    });

  program
    .command("tail <channel>")
    .description("follow a channel: one line per message (or --json), resuming after a dropped connection, until Ctrl-C")
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
        "Ctrl-C stops after the current task. The command does not get the API key: AGENTBUS_API_KEY (and any variable holding the key) " +
        "is removed from its environment unless --pass-key",
    )
    .option("--lease <seconds>", "lease length (30..3600)", (v) => Number(v), 60)
    .option("--once", "stop after one task (exit 1 when the service refused its result)")
    .option("--pass-key", "give the command the API key as AGENTBUS_API_KEY (by default it does not get it)")
    .action(async (identifier: string, command: string[], opts: { lease: number; once?: boolean; passKey?: boolean }) => {
      const client = await api();
      const env = commandEnvironment(io.env, (await profile()).key, opts.passKey === true);
      const stop = interruption(io);
      try {
        while (!stop.signal.aborted) {
          let received: JsonObject;
          const receivedAt = Date.now();
          try {
            received = await client.call(MessageService.method.receiveMessages, { identifier, max_messages: 1, lease_seconds: opts.lease, wait: WAIT_SLICE }, { waitSeconds: WAIT_SLICE, signal: stop.signal });
          } catch (err) {
            if (stop.signal.aborted) break;
            throw err;
          }
          const [task] = (received.data ?? []) as Array<{ message: JsonObject; lease_token: string }>;
          if (task === undefined) {
            await notSpinning(0, receivedAt, stop.signal);
            continue;
          }
          const id = String(task.message.id);
          // Ctrl-C between the lease and the command's start: the command would
          // not hear it (it did not exist yet) and would run to its end. Hand
          // the task back at once instead.
          if (stop.signal.aborted) {
            await client.call(MessageService.method.releaseMessage, { message_id: id, delay_seconds: 0 });
            io.err(`${id}: stopping; released without running the command`);
            break;
          }
          const outcome = await runTask(command, String(task.message.content ?? ""), env, () => {
            void client.call(MessageService.method.heartbeatLease, { lease_token: task.lease_token, lease_seconds: opts.lease }).catch(() => undefined);
          }, (opts.lease * 1000) / 3);
          const settled = await settleTask(client, io, task.message, outcome);
          if (opts.once) {
            if (settled === "refused") throw new Exit(EXIT.refused);
            break;
          }
        }
      } finally {
        stop.dispose();
      }
    });

  const jobCommand = (name: string, description: string, submit: (arg: string) => Promise<{ client: AgentbusApi; jobId: string }>) =>
    program
      .command(`${name} <input>`)
      .description(description)
      .option("-o, --output <file>", "where to write the PDF (pdf only)")
      .option("--wait <seconds>", "how long to wait for the job", (v) => Number(v), 120)
      .action(async (input: string, opts: { output?: string; wait: number }) => {
        if (name === "pdf" && opts.output === undefined) throw new Exit(EXIT.usage, "pdf needs -o <file.pdf>");
        const { client, jobId } = await submit(input);
        io.err(`job ${jobId} submitted`);
        const deadline = Date.now() + opts.wait * 1000;
        let job = await client.call(JobService.method.getJob, { job_id: jobId });
        while (job.status !== "completed" && job.status !== "failed") {
          if (Date.now() > deadline) throw new Exit(EXIT.waitEnded, `job ${jobId} is still ${String(job.status)}`);
          io.err(`job ${jobId}: ${String(job.status)}`);
          await pause(500);
          job = await client.call(JobService.method.getJob, { job_id: jobId });
        }
        if (job.status === "failed") {
          const error = (job.error ?? {}) as { error?: string; message?: string };
          throw new Exit(EXIT.refused, `job ${jobId} failed: ${error.error ?? ""}: ${error.message ?? ""}`);
        }
        if (name === "pdf") {
          const p = await profile();
          const res = await fetch(new URL(`/v1/pdf/${jobId}`, p.url), { headers: p.key === undefined ? {} : { "X-API-Key": p.key } });
          if (!res.ok) throw new Exit(EXIT.refused, `the PDF could not be downloaded (HTTP ${res.status})`);
          await writeFile(opts.output!, Buffer.from(await res.arrayBuffer()));
          io.out(opts.output!);
          return;
        }
        io.out(JSON.stringify(job.result, null, 2));
      });

  jobCommand("pdf", "render an HTML or Markdown file to PDF (-o out.pdf): submit, show progress, download", async (file) => {
    const content = await readFile(file, "utf8");
    const client = await api();
    const format = /\.(md|markdown)$/i.test(file) ? "markdown" : "html";
    return { client, jobId: String((await client.call(JobService.method.createPdfJob, { content, format })).job_id) };
  });
  jobCommand("parse", "extract a job posting's fields from its URL", async (url) => {
    const client = await api();
    return { client, jobId: String((await client.call(JobService.method.createJobPostingParseJob, { url })).job_id) };
  });
  jobCommand("transcript", "fetch a video's timestamped transcript", async (url) => {
    const client = await api();
    return { client, jobId: String((await client.call(JobService.method.createTranscriptJob, { url })).job_id) };
  });

  return program;
}

interface TaskOutcome {
  code: number;
  stdout: string;
  truncated: boolean;
}

/**
 * Completes a task with its command's stdout, or hands it back to be retried
 * after its back-off. A refusal (of the result, say a NUL byte the service
 * cannot store, or of the release, when the lease ran out meanwhile) is
 * reported and the worker goes on: one bad task must not stop the queue nor
 * stay leased. When the service cannot be reached, the task is released if
 * the service still answers that, and the error ends the worker (exit 3).
 * docs/decisions.md#shell-work
 */
async function settleTask(client: AgentbusApi, io: Io, message: JsonObject, outcome: TaskOutcome): Promise<"done" | "released" | "refused"> {
  const id = String(message.id);
  const delay = retryDelaySeconds(message);
  const release = async (why: string): Promise<"released" | "refused"> => {
    try {
      await client.call(MessageService.method.releaseMessage, { message_id: id, delay_seconds: delay });
      io.err(`${id}: ${why}; released, retried in ${delay} s`);
      return "released";
    } catch (err) {
      io.err(`${id}: ${why}; the release failed too (${errorText(err)})`);
      if (!(err instanceof ApiCallError)) throw err;
      return "refused";
    }
  };
  if (outcome.code !== 0) return release(`the command exited with ${outcome.code}`);
  if (outcome.truncated) io.err(`${id}: the command wrote more than ${STDOUT_KEPT_BYTES} bytes; the result keeps the first ${STDOUT_KEPT_BYTES}`);
  try {
    const acked = await client.call(MessageService.method.ackMessage, { message_id: id, result: outcome.stdout });
    io.err(`${id}: done (${String(acked.status)})`);
    return "done";
  } catch (err) {
    if (err instanceof ApiCallError) {
      await release(`the service refused the result (${errorText(err)})`);
      return "refused";
    }
    await release(`the result could not be sent (${errorText(err)})`).catch(() => undefined);
    throw err;
  }
}

/** Runs the command with `input` on stdin and `env` as its environment; its stdout (up to the result limit) and exit code. Heartbeats while it runs. */
function runTask(command: string[], input: string, env: NodeJS.ProcessEnv, heartbeat: () => void, everyMs: number): Promise<TaskOutcome> {
  return new Promise((resolve) => {
    const child = spawn(command[0]!, command.slice(1), { stdio: ["pipe", "pipe", "inherit"], env });
    const timer = setInterval(heartbeat, everyMs);
    const chunks: Buffer[] = [];
    let size = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      if (size < STDOUT_KEPT_BYTES) chunks.push(chunk.subarray(0, STDOUT_KEPT_BYTES - size));
      size += chunk.length;
    });
    child.stdin.on("error", () => undefined);
    child.stdin.end(input);
    const done = (code: number) => {
      clearInterval(timer);
      resolve({ code, stdout: Buffer.concat(chunks).toString("utf8"), truncated: size > STDOUT_KEPT_BYTES });
    };
    child.on("error", () => done(127));
    child.on("close", (code, signal) => done(code ?? (signal ? 128 : 1)));
  });
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
    io.err(`agentbus: the service could not be reached (${err instanceof Error ? err.message : String(err)})`);
    return EXIT.unreachable;
  }
}
