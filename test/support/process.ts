/** Runs `agentbus` as a real child process, the way an operator does. */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inject } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * A module of the service as this run compiled it (compiled.ts), for a child
 * process: `compiledModule("src/store/embedded.ts")` is the file URL of its
 * JavaScript.
 */
export function compiledModule(source: string): string {
  return pathToFileURL(path.join(inject("compiledService"), source.replace(/\.ts$/, ".js"))).href;
}

/** The node arguments that run the `agentbus` command line, compiled once per run (as `npm start` runs dist/). */
export function cliArgs(args: string[]): string[] {
  return [fileURLToPath(compiledModule("src/cli.ts")), ...args];
}

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; afterMs: number }>;
  /** Sends a signal and records when, so `exited.afterMs` measures from it. */
  signal(sig: NodeJS.Signals): void;
  /** With `group`: signals the whole process group, as Ctrl-C in a terminal does. */
  signalGroup(sig: NodeJS.Signals): void;
  stderr(): string;
}

export interface SpawnOptions {
  /** Its own process group, as a terminal's foreground job (for signalGroup). */
  group?: boolean;
}

export function spawnCli(args: string[], env: Record<string, string>, options: SpawnOptions = {}): { child: ChildProcess; lines: string[]; stderr: () => string; exited: Promise<number | null> } {
  const base = { ...process.env };
  for (const name of Object.keys(base)) if (name === "DATABASE_URL" || name === "PORT" || name.startsWith("AGENTBUS_")) delete base[name];
  const child = spawn(process.execPath, cliArgs(args), {
    cwd: root,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.group ?? false,
  });
  const lines: string[] = [];
  let stderr = "";
  createInterface({ input: child.stdout! }).on("line", (line) => lines.push(line));
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
  // Exited, and what it wrote read to the end: a check of its lines after the
  // exit must not race the pipe. A grandchild still holding the pipe open is
  // not waited for past 2 s.
  const drained = Promise.race([
    new Promise<void>((resolve) => child.stdout!.once("close", () => resolve())),
    new Promise<void>((resolve) => child.once("exit", () => setTimeout(resolve, 2_000).unref())),
  ]);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => void drained.then(() => resolve(code))));
  return { child, lines, stderr: () => stderr, exited };
}

export async function startServiceProcess(env: Record<string, string>, timeoutMs = 30_000, options: SpawnOptions = {}): Promise<ServiceProcess> {
  const { child, lines, stderr } = spawnCli(["serve"], { HOST: "127.0.0.1", PORT: "0", ...env }, options);
  let signalledAt = 0;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; afterMs: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, afterMs: performance.now() - signalledAt })),
  );
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const line of lines) {
      const match = /listening on (http:\/\/[^"\s]+)/.exec(line);
      if (match) {
        return {
          child,
          url: match[1]!,
          lines,
          exited,
          signal(sig) {
            signalledAt = performance.now();
            child.kill(sig);
          },
          signalGroup(sig) {
            signalledAt = performance.now();
            process.kill(-child.pid!, sig);
          },
          stderr,
        };
      }
    }
    if (child.exitCode !== null) break;
    // Real time: polls a real child process.
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`agentbus did not start:\n${lines.join("\n")}\n${stderr()}`);
}

/** SIGTERM, then SIGKILL if the process has not exited within graceMs. */
export async function stopServiceProcess(svc: ServiceProcess | undefined, graceMs: number): Promise<void> {
  if (!svc || svc.child.exitCode !== null) return;
  svc.signal("SIGTERM");
  // Real time: a bound on a real process's exit.
  await Promise.race([svc.exited, sleep(graceMs)]);
  if (svc.child.exitCode === null) svc.child.kill("SIGKILL");
}

/** Alive and not a zombie (an orphan reaped late by pid 1 still answers signal 0). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
