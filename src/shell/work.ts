/**
 * `agentbus work`: receive a task, run the command with its content on
 * stdin, complete it with the command's stdout or hand it back, until
 * stopped (docs/decisions.md#shell-work).
 *
 * The command runs in its own session and process group, so the Ctrl-C a
 * terminal sends to its foreground group reaches the worker and not the
 * command: the first one lets the current task finish and complete, a second
 * one stops the command (SIGTERM to its group, SIGKILL 5 s later or on a
 * third) and releases the task.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import type { Duplex, Readable, Writable } from "node:stream";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import type { JsonObject } from "../model/json.js";
import { ApiCallError, notSpinning, type AgentbusApi } from "../server/mcp/api.js";
import { EXIT, Exit } from "./exit.js";
import type { Io } from "./terminal.js";

/** How long a task's receive long-polls, per request. */
const RECEIVE_WAIT = 20;
const RESULT_MAX_BYTES = 64 * 1024;
/** What is kept of a command's stdout: a multi-byte character cut at the end decodes to U+FFFD (3 bytes), still within the limit. */
const STDOUT_KEPT_BYTES = RESULT_MAX_BYTES - 3;
/** How long a command stopped by a second Ctrl-C has to end after SIGTERM before its group gets SIGKILL. */
const STOP_GRACE_MS = 5000;

export interface WorkOptions {
  lease: number;
  once: boolean;
  /** The command's environment. */
  env: NodeJS.ProcessEnv;
  /** Aborted: as a first Ctrl-C, for a caller that runs the worker in its own process. */
  stop?: AbortSignal | undefined;
  /** Report the command's stderr lines as the task's progress (appended), besides passing them on. */
  progress?: boolean | undefined;
}

/** How often, at most, the command's stderr lines go out as one progress report. */
const PROGRESS_EVERY_MS = 1_000;

/**
 * A process between the worker and the command: the leader of the command's
 * group, holding one end of a socket (fd 3) whose other end only the worker
 * holds. However the worker ends, kill -9 and a closed terminal included,
 * the socket reads end-of-file and the guard kills the group, so no command
 * outlives its worker (a detached command would otherwise run on, its task
 * still leased). It ignores the signals sent to the group, which are for the
 * command, and reports how the command ended on the socket. CommonJS for
 * `node -e`, which needs no file beside the build.
 */
const GUARD = `
const { spawn } = require("node:child_process");
const { Socket } = require("node:net");
const lifeline = new Socket({ fd: 3, readable: true, writable: true });
const killGroup = () => { try { process.kill(-process.pid, "SIGKILL"); } catch {} };
lifeline.on("end", killGroup).on("error", killGroup).resume();
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => {});
let reported = false;
const report = (status) => {
  if (reported) return;
  reported = true;
  lifeline.off("end", killGroup);
  lifeline.end(JSON.stringify(status), () => process.exit(0));
};
const [file, ...args] = process.argv.slice(1);
const command = spawn(file, args, { stdio: "inherit" });
command.on("error", (err) => report({ error: err.code || err.message }));
command.on("exit", (code, signal) => report({ code, signal }));
`;

interface TaskOutcome {
  /** The command's exit code, or 128 + the signal's number. */
  code: number;
  /** The signal that ended the command. */
  signal: string | null;
  /** Why the command could not be started (ENOENT, EACCES, …). */
  spawnError: string | null;
  /** A second Ctrl-C stopped the command. */
  stopped: boolean;
  stdout: string;
  truncated: boolean;
}

/** The stages of stopping: `finishing` (a first Ctrl-C or SIGTERM, or `stop`), `now` (a second), `kill` (a third). */
function stopStages(stop: AbortSignal | undefined, onFinishing: () => void) {
  const finishing = new AbortController();
  const now = new AbortController();
  const kill = new AbortController();
  const finish = () => {
    if (finishing.signal.aborted) return;
    finishing.abort();
    onFinishing();
  };
  const next = () => {
    if (!finishing.signal.aborted) finish();
    else if (!now.signal.aborted) now.abort();
    else kill.abort();
  };
  process.on("SIGINT", next);
  process.on("SIGTERM", next);
  stop?.addEventListener("abort", finish, { once: true });
  if (stop?.aborted === true) finish();
  return {
    finishing: finishing.signal,
    now: now.signal,
    kill: kill.signal,
    dispose: () => {
      process.off("SIGINT", next);
      process.off("SIGTERM", next);
      stop?.removeEventListener("abort", finish);
    },
  };
}

/** A task is retried after 2^(delivery−1) s, at most 5 minutes. */
const retryDelaySeconds = (message: JsonObject) => Math.min(2 ** Math.max(0, Number(message.delivery_count ?? 1) - 1), 300);

const errorText = (err: unknown) => (err instanceof ApiCallError ? `${err.body.error}: ${err.body.message}` : err instanceof Error ? err.message : String(err));

/** Works `identifier` with `command` until stopped; throws Exit for a non-zero end. */
export async function work(client: AgentbusApi, io: Io, identifier: string, command: string[], options: WorkOptions): Promise<void> {
  let running: string | undefined;
  const stop = stopStages(options.stop, () => {
    if (running !== undefined) io.err(`${running}: stopping once this task is done; Ctrl-C again stops its command now`);
  });
  try {
    while (!stop.finishing.aborted) {
      let received: JsonObject;
      const receivedAt = Date.now();
      try {
        received = await client.call(
          MessageService.method.receiveMessages,
          { identifier, max_messages: 1, lease_seconds: options.lease, wait: RECEIVE_WAIT },
          { waitSeconds: RECEIVE_WAIT, signal: stop.finishing },
        );
      } catch (err) {
        if (stop.finishing.aborted) break;
        throw err;
      }
      const [task] = (received.data ?? []) as Array<{ message: JsonObject; lease_token: string }>;
      if (task === undefined) {
        await notSpinning(0, receivedAt, stop.finishing);
        continue;
      }
      const id = String(task.message.id);
      // Ctrl-C between the lease and the command's start: the task was not
      // yet the current one for the person who pressed it. Hand it back unrun.
      if (stop.finishing.aborted) {
        await client.call(MessageService.method.releaseMessage, { message_id: id, delay_seconds: 0 });
        io.err(`${id}: stopping; released without running the command`);
        break;
      }
      running = id;
      // The task's author cancelled it (docs/decisions.md#cancel): the heartbeat
      // answer says so, and the command is stopped as a second Ctrl-C stops it.
      const cancelled = new AbortController();
      const heartbeat = () => {
        client
          .call(MessageService.method.heartbeatLease, { lease_token: task.lease_token, lease_seconds: options.lease })
          .then((answer) => {
            if (answer.cancel_requested === true && !cancelled.signal.aborted) {
              io.err(`${id}: cancelled by its author; stopping the command`);
              cancelled.abort();
            }
          })
          .catch(() => undefined);
      };
      const progress = options.progress ? progressReporter(client, id, task.lease_token) : undefined;
      const outcome = await runTask(command, String(task.message.content ?? ""), { ...options.env, ...traceEnv(task.message) }, {
        heartbeat,
        everyMs: (options.lease * 1000) / 3,
        stop: AbortSignal.any([stop.now, cancelled.signal]),
        kill: stop.kill,
        onStderr: progress?.add,
      });
      await progress?.flush();
      running = undefined;
      if (outcome.stopped && cancelled.signal.aborted && !stop.now.aborted) {
        // Given back, it is cancelled, not handed out again.
        await release(client, io, id, 0, "the command was stopped (the task was cancelled)");
        if (options.once) throw new Exit(EXIT.refused);
        continue;
      }
      if (outcome.stopped) {
        await release(client, io, id, 0, "the command was stopped (Ctrl-C twice)");
        throw new Exit(EXIT.interrupted);
      }
      if (outcome.spawnError !== null) {
        // Every task would fail alike: stop rather than churn through the
        // queue, and give this one back at once (it did not fail).
        await release(client, io, id, 0, "the command could not be started");
        const name = command[0] ?? "";
        if (outcome.spawnError === "ENOENT") throw new Exit(EXIT.notFound, `command not found: ${name}`);
        throw new Exit(EXIT.cannotRun, `cannot run ${name}: ${outcome.spawnError === "EACCES" ? "permission denied" : outcome.spawnError}`);
      }
      const settled = await settleTask(client, io, task.message, outcome);
      if (options.once) {
        if (settled !== "done") throw new Exit(EXIT.refused);
        break;
      }
    }
  } finally {
    stop.dispose();
  }
}

/** Releases a task after `delay` seconds, saying why; a refused release is reported, an unreachable service ends the worker. */
async function release(client: AgentbusApi, io: Io, id: string, delay: number, why: string): Promise<"released" | "refused"> {
  try {
    await client.call(MessageService.method.releaseMessage, { message_id: id, delay_seconds: delay });
    io.err(`${id}: ${why}; released${delay > 0 ? `, retried in ${delay} s` : ""}`);
    return "released";
  } catch (err) {
    io.err(`${id}: ${why}; the release failed too (${errorText(err)})`);
    if (!(err instanceof ApiCallError)) throw err;
    return "refused";
  }
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
async function settleTask(client: AgentbusApi, io: Io, message: JsonObject, outcome: TaskOutcome): Promise<"done" | "failed" | "refused"> {
  const id = String(message.id);
  const delay = retryDelaySeconds(message);
  if (outcome.code !== 0) {
    await release(client, io, id, delay, outcome.signal !== null ? `the command was killed by ${outcome.signal}` : `the command exited with ${outcome.code}`);
    return "failed";
  }
  if (outcome.truncated) io.err(`${id}: the command wrote more than ${STDOUT_KEPT_BYTES} bytes; the result keeps the first ${STDOUT_KEPT_BYTES}`);
  try {
    const acked = await client.call(MessageService.method.ackMessage, { message_id: id, result: outcome.stdout });
    io.err(`${id}: done (${String(acked.status)})`);
    return "done";
  } catch (err) {
    if (err instanceof ApiCallError) {
      await release(client, io, id, delay, `the service refused the result (${errorText(err)})`);
      return "refused";
    }
    await release(client, io, id, delay, `the result could not be sent (${errorText(err)})`).catch(() => undefined);
    throw err;
  }
}

/**
 * Sends the command's stderr as the task's progress (docs/decisions.md#progress):
 * whole lines, appended, at most one report a second (a chatty command costs
 * one request a second, not one per line). A failed report is dropped: the
 * work goes on.
 */
function progressReporter(client: AgentbusApi, messageId: string, leaseToken: string): { add(chunk: Buffer): void; flush(): Promise<void> } {
  let pending = "";
  let partial = "";
  let timer: NodeJS.Timeout | undefined;
  let sending: Promise<void> = Promise.resolve();
  const send = () => {
    timer = undefined;
    if (pending === "") return;
    const text = pending;
    pending = "";
    sending = sending.then(() =>
      client.call(MessageService.method.reportProgress, { message_id: messageId, lease_token: leaseToken, text, append: true }).then(
        () => undefined,
        () => undefined,
      ),
    );
  };
  return {
    add(chunk: Buffer) {
      partial += chunk.toString("utf8");
      const end = partial.lastIndexOf("\n");
      if (end < 0) return;
      pending += partial.slice(0, end + 1);
      partial = partial.slice(end + 1);
      timer ??= setTimeout(send, PROGRESS_EVERY_MS);
    },
    async flush() {
      clearTimeout(timer);
      pending += partial;
      partial = "";
      send();
      await sending;
    },
  };
}

interface RunControls {
  /** The command's stderr, as it comes (it is passed on to ours either way). */
  onStderr?: ((chunk: Buffer) => void) | undefined;
  heartbeat(): void;
  everyMs: number;
  /** Aborted: SIGTERM to the command's group, SIGKILL after the grace period. */
  stop: AbortSignal;
  /** Aborted: SIGKILL to the command's group at once. */
  kill: AbortSignal;
}

/**
 * The task's trace context for the command, as the OpenTelemetry SDKs read it
 * from the environment (TRACEPARENT, TRACESTATE): whatever the command does
 * joins the trace of the hand-off (docs/decisions.md#trace-context).
 */
export function traceEnv(message: JsonObject): Record<string, string> {
  const trace = message.trace as JsonObject | null | undefined;
  if (trace === null || trace === undefined || typeof trace.traceparent !== "string") return {};
  return { TRACEPARENT: trace.traceparent, ...(typeof trace.tracestate === "string" ? { TRACESTATE: trace.tracestate } : {}) };
}

/** Runs the command (under the guard) with `input` on stdin and `env` as its environment; its stdout (up to the result limit) and how it ended. Heartbeats while it runs. */
function runTask(command: string[], input: string, env: NodeJS.ProcessEnv, controls: RunControls): Promise<TaskOutcome> {
  return new Promise((resolve) => {
    const onStderr = controls.onStderr;
    const child = spawn(process.execPath, ["-e", GUARD, "--", ...command], { detached: true, stdio: ["pipe", "pipe", onStderr ? "pipe" : "inherit", "pipe"], env });
    const [stdin, stdout, stderr, lifeline] = child.stdio as unknown as [Writable, Readable, Readable | null, Duplex];
    stderr?.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk);
      onStderr?.(chunk);
    });
    let status = "";
    lifeline.setEncoding("utf8");
    lifeline.on("data", (text: string) => (status += text));
    lifeline.on("error", () => undefined);

    const chunks: Buffer[] = [];
    let size = 0;
    stdout.on("data", (chunk: Buffer) => {
      if (size < STDOUT_KEPT_BYTES) chunks.push(chunk.subarray(0, STDOUT_KEPT_BYTES - size));
      size += chunk.length;
    });
    stdin.on("error", () => undefined);
    stdin.end(input);

    const timer = setInterval(controls.heartbeat, controls.everyMs);
    let stopped = false;
    let grace: NodeJS.Timeout | undefined;
    const signalGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal);
      } catch {
        // The group has ended already.
      }
    };
    const onStop = () => {
      stopped = true;
      signalGroup("SIGTERM");
      grace = setTimeout(() => signalGroup("SIGKILL"), STOP_GRACE_MS);
    };
    const onKill = () => signalGroup("SIGKILL");
    controls.stop.addEventListener("abort", onStop, { once: true });
    controls.kill.addEventListener("abort", onKill, { once: true });

    let settled = false;
    const done = (ended: { code: number | null; signal: string | null; spawnError?: string }) => {
      if (settled) return;
      settled = true;
      clearInterval(timer);
      clearTimeout(grace);
      controls.stop.removeEventListener("abort", onStop);
      controls.kill.removeEventListener("abort", onKill);
      const signal = ended.signal;
      const signalNumber = signal === null ? 0 : (constants.signals[signal as NodeJS.Signals] ?? 0);
      resolve({
        code: ended.code ?? 128 + signalNumber,
        signal,
        spawnError: ended.spawnError ?? null,
        stopped,
        stdout: Buffer.concat(chunks).toString("utf8"),
        truncated: size > STDOUT_KEPT_BYTES,
      });
    };
    // The guard itself could not be started (no process slots, say).
    child.on("error", (err: NodeJS.ErrnoException) => done({ code: null, signal: null, spawnError: err.code ?? err.message }));
    child.on("close", (code, signal) => {
      let reported: { code?: number | null; signal?: string | null; error?: string } | undefined;
      try {
        reported = status === "" ? undefined : (JSON.parse(status) as typeof reported);
      } catch {
        reported = undefined;
      }
      // No report: the guard was killed with its group (SIGKILL after the grace period).
      if (reported === undefined) done({ code, signal });
      else if (reported.error !== undefined) done({ code: null, signal: null, spawnError: reported.error });
      else done({ code: reported.code ?? null, signal: reported.signal ?? null });
    });
  });
}
