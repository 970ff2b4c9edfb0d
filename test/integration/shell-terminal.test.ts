/**
 * Text from the service is untrusted where the shell commands print it: on a
 * terminal, every character that would act on the terminal (OSC 52 clipboard
 * writes, OSC 0 titles, a bare CR, CSI, C1 CSI, bidi overrides) is shown
 * escaped; with --raw, and to a pipe or a file, the bytes are as stored. Each
 * command that prints service data is run three ways against a real service:
 * on a terminal (in the test's process, which can say so), on a terminal with
 * --raw, and as a child process writing to pipes.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel, postMessage } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";
import { runInProcess, spawnShell, type ShellRun } from "../support/shell.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

const server = useTestServer();
let key: string;
let home: string;

beforeAll(async () => {
  key = await mintKey(server.url, "terminal");
  home = await mkdtemp(path.join(tmpdir(), "agentbus-terminal-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

/** A clipboard write (OSC 52), a window title (OSC 0), a bare CR, clear screen, C1 CSI, and a right-to-left override. */
const HOSTILE = "a\u001b]52;c;cHduZWQ=\u0007b\u001b]0;title\u0007c\rd\u001b[2Je\u009b31mf\u202eg";
/** How a terminal shows it: every one of those characters as a JSON-style escape. */
const SHOWN = String.raw`a\u001b]52;c;cHduZWQ=\u0007b\u001b]0;title\u0007c\u000dd\u001b[2Je\u009b31mf\u202eg`;
/** In JSON on a terminal: JSON.stringify's own escapes (\r), and C1 and bidi escaped the same way. */
const SHOWN_IN_JSON = String.raw`a\u001b]52;c;cHduZWQ=\u0007b\u001b]0;title\u0007c\rd\u001b[2Je\u009b31mf\u202eg`;
/** Anything a terminal would act on: C0 but newline and tab, DEL, C1, bidi embeddings, overrides and isolates. */
const ACTS_ON_A_TERMINAL = /(?![\n\t])[\p{Cc}\u202A-\u202E\u2066-\u2069]/u;

const env = () => ({ HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") });

async function completedTask(result: string): Promise<string> {
  const ch = await createChannel(server.url, key);
  const task = await postMessage(server.url, key, ch, { content: "task" });
  expect((await rest(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 1 } })).status).toBe(200);
  expect((await rest(server.url, "POST", `/v1/messages/${task.id}/ack`, { key, body: { result } })).status).toBe(200);
  return task.id;
}

async function describedChannel(description: string): Promise<string> {
  return createChannel(server.url, key, { mode: "broadcast", description });
}

interface Case {
  /** The command as a person types it. */
  command: string;
  stream: "stdout" | "stderr";
  json: boolean;
  /** Runs until interrupted (tail): stopped once it printed a line. */
  follows?: true;
  args(): Promise<string[]>;
}

const cases: Case[] = [
  {
    command: "tail",
    stream: "stdout",
    json: false,
    follows: true,
    args: async () => {
      const ch = await createChannel(server.url, key, { mode: "broadcast" });
      await postMessage(server.url, key, ch, { content: HOSTILE });
      return ["tail", ch];
    },
  },
  {
    command: "tail --json",
    stream: "stdout",
    json: true,
    follows: true,
    args: async () => {
      const ch = await createChannel(server.url, key, { mode: "broadcast" });
      await postMessage(server.url, key, ch, { content: HOSTILE });
      return ["tail", ch, "--json"];
    },
  },
  { command: "result", stream: "stdout", json: false, args: async () => ["result", await completedTask(HOSTILE)] },
  { command: "result --json", stream: "stdout", json: true, args: async () => ["result", await completedTask(HOSTILE), "--json"] },
  { command: "channel get", stream: "stdout", json: true, args: async () => ["channel", "get", await describedChannel(HOSTILE)] },
  {
    command: "channel list --json",
    stream: "stdout",
    json: true,
    args: async () => {
      await describedChannel(HOSTILE);
      return ["channel", "list", "--json"];
    },
  },
  // The service's refusal echoes the channel asked for ("Channel '…' not found"): its error text reaches stderr.
  { command: "work (the service's error on stderr)", stream: "stderr", json: false, args: async () => ["work", HOSTILE, "--once", "--", "cat"] },
];

const printed = (run: ShellRun, c: Case) => (c.stream === "stdout" ? run.stdout : run.stderr);
const stopAfterALine = (c: Case) => (c.follows ? (run: ShellRun) => run.stdout.includes("\n") : undefined);

async function throughPipes(args: string[], c: Case): Promise<ShellRun> {
  const shell = spawnShell(args, { env: env() });
  if (c.follows) {
    const deadline = Date.now() + 10_000;
    while (shell.lines.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    shell.child.kill("SIGINT");
  }
  return shell.done;
}

describe("service text printed on a terminal", () => {
  it.each(cases)("$command shows control characters, escape sequences and bidi overrides escaped", async (c) => {
    const run = await runInProcess(await c.args(), { env: env(), tty: true, stopWhen: stopAfterALine(c) });
    const text = printed(run, c);
    expect(text).not.toMatch(ACTS_ON_A_TERMINAL);
    expect(text).toContain(c.json ? SHOWN_IN_JSON : SHOWN);
  });

  it.each(cases.filter((c) => c.json))("$command stays valid JSON holding the exact text", async (c) => {
    const run = await runInProcess(await c.args(), { env: env(), tty: true, stopWhen: stopAfterALine(c) });
    const text = printed(run, c);
    // One JSON document: the whole output (channel get) or each line.
    const documents = c.command === "channel get" ? [text] : text.trim().split("\n");
    const values = documents.map((d) => JSON.stringify(JSON.parse(d)));
    expect(values.some((v) => v.includes(JSON.stringify(HOSTILE)))).toBe(true);
  });
});

describe("service text printed with --raw on a terminal", () => {
  it.each(cases)("$command prints the text byte-exact", async (c) => {
    const run = await runInProcess(["--raw", ...(await c.args())], { env: env(), tty: true, stopWhen: stopAfterALine(c) });
    expect(printed(run, c)).toContain(c.json ? JSON.stringify(HOSTILE) : HOSTILE);
  });
});

describe("service text printed to a pipe", () => {
  it.each(cases)("$command prints the text byte-exact", async (c) => {
    const run = await throughPipes(await c.args(), c);
    expect(printed(run, c)).toContain(c.json ? JSON.stringify(HOSTILE) : HOSTILE);
  });

  it("result prints the result and a newline, nothing else", async () => {
    const run = await spawnShell(["result", await completedTask(HOSTILE)], { env: env() }).done;
    expect(run.stdout).toBe(`${HOSTILE}\n`);
  });
});

describe("the agentbus binary", () => {
  /** Runs `agentbus <args>` with stdout and stderr on a pseudo-terminal (util-linux `script`); what the terminal received. */
  async function onAPseudoTerminal(args: string[]): Promise<string> {
    const line = [process.execPath, "--import", "tsx", "src/cli.ts", ...args].join(" ");
    const child = spawn("script", ["--quiet", "--return", "--command", line, "/dev/null"], { cwd: root, env: { PATH: process.env.PATH ?? "", ...env() }, stdio: ["ignore", "pipe", "inherit"] });
    let shown = "";
    child.stdout.on("data", (c: Buffer) => (shown += c.toString("utf8")));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code).toBe(0);
    // The terminal turns each newline into CR LF; the CRs that matter are the ones sent alone.
    return shown.replaceAll("\r\n", "\n");
  }

  it("escapes on a real terminal by itself, and prints the bytes there with --raw", async () => {
    const id = await completedTask(HOSTILE);
    expect(await onAPseudoTerminal(["result", id])).toBe(`${SHOWN}\n`);
    expect(await onAPseudoTerminal(["--raw", "result", id])).toBe(`${HOSTILE}\n`);
  });
});
