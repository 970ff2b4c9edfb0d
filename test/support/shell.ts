/** The `agentbus` shell commands run as a real child process, as a person or a script runs them. */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { runShell } from "../../src/shell/commands.js";
import { cliArgs } from "./process.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

export interface ShellRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface ShellOptions {
  /** The whole environment the command sees (nothing is inherited but what is given). */
  env: Record<string, string>;
  /** Written to stdin, which is then closed. */
  input?: string;
  /** Its own process group, as a terminal's foreground job: Ctrl-C reaches the command it runs too. */
  group?: boolean;
}

export function spawnShell(args: string[], options: ShellOptions) {
  const child = spawn(process.execPath, cliArgs(args), {
    cwd: root,
    detached: options.group ?? false,
    env: { PATH: process.env.PATH ?? "", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const lines: string[] = [];
  let stdout = "";
  let stderr = "";
  createInterface({ input: child.stdout }).on("line", (line) => lines.push(line));
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString("utf8")));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
  child.stdin.end(options.input ?? "");
  const done = new Promise<ShellRun>((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
  return { child, lines, done };
}

export interface InProcessOptions {
  env: Record<string, string>;
  /** Whether stdout and stderr count as terminals, as they do for a person at a shell. */
  tty: boolean;
  /** Aborted when `stopWhen` first holds for the output so far: ends `tail` and `work` as Ctrl-C does. */
  stopWhen?: (out: ShellRun) => boolean;
  /** What the command reads on stdin (default: nothing). */
  input?: string;
  /** Whether stdin counts as a terminal, where a person can answer a question. */
  stdinIsTTY?: boolean;
}

/**
 * The shell commands run inside the test's process, through the same entry
 * point as the binary, so a test can say whether stdout and stderr are
 * terminals (a child process of a test only ever writes to pipes).
 */
export async function runInProcess(args: string[], options: InProcessOptions): Promise<ShellRun> {
  const run: ShellRun = { code: null, stdout: "", stderr: "" };
  const stop = new AbortController();
  const check = () => {
    if (options.stopWhen?.(run) === true) stop.abort();
  };
  const stdin = Object.assign(Readable.from(options.input === undefined ? [] : [options.input]), { isTTY: options.stdinIsTTY === true });
  run.code = await runShell(args, {
    env: options.env,
    stdin,
    out: (line) => {
      run.stdout += `${line}\n`;
      check();
    },
    err: (line) => {
      run.stderr += `${line}\n`;
      check();
    },
    outIsTTY: options.tty,
    errIsTTY: options.tty,
    stop: stop.signal,
  });
  return run;
}
