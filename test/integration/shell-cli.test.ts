/**
 * The shell commands (`agentbus key|channel|send|result|work|tail|login …`),
 * run as real child processes against a real service, the way a person or a
 * script does: output, exit codes, stdin, the profile file.
 */
import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { access, mkdtemp, open, readFile, rm, stat, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel, postMessage } from "../support/fixtures.js";
import { startCuttableProxy } from "../../clients/typescript/test/proxy.js";
import { AdjustableClock } from "../support/clock.js";
import { mintKey, rest, useTestServer } from "../support/server.js";
import { runInProcess, spawnShell } from "../support/shell.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const clock = new AdjustableClock();
const server = useTestServer({}, { clock });
let key: string;
let home: string;

beforeAll(async () => {
  key = await mintKey(server.url, "shell");
  home = await mkdtemp(path.join(tmpdir(), "agentbus-cli-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

function cli(args: string[], options: { input?: string; env?: Record<string, string>; group?: boolean } = {}) {
  const env = { HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json"), ...options.env };
  return spawnShell(args, { env, input: options.input, group: options.group });
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}

const run = (args: string[], options: { input?: string; env?: Record<string, string> } = {}) => cli(args, options).done;

/** What a running command has written to stderr so far. */
function stderrOf(shell: ReturnType<typeof cli>): () => string {
  let text = "";
  shell.child.stderr.on("data", (c: Buffer) => (text += c.toString("utf8")));
  return () => text;
}

const exists = (file: string) => access(file).then(
  () => true,
  () => false,
);

/** A named pipe: a command that reads it waits until the test writes it, so the test decides when the command ends. */
function gate(): string {
  const file = path.join(home, `gate-${randomUUID()}`);
  execFileSync("mkfifo", [file]);
  return file;
}

/**
 * Lets the command reading `file` (a gate) go on with `text`, once it has the
 * gate open: opened without blocking, a FIFO without a reader answers ENXIO,
 * so a command that died fails the wait instead of hanging the test.
 */
async function pass(file: string, text: string): Promise<void> {
  let writer: FileHandle | undefined;
  await until(async () => {
    writer = await open(file, constants.O_WRONLY | constants.O_NONBLOCK).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENXIO") return undefined;
      throw err;
    });
    return writer !== undefined;
  });
  await writer!.write(text);
  await writer!.close();
}

/** The process has ended: gone, or a zombie nobody has reaped yet. */
async function ended(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch {
    return true;
  }
}

const inProcessEnv = () => ({ HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") });

describe("agentbus shell commands", () => {
  it("key create prints a new key that works", async () => {
    const r = await run(["key", "create", "--label", "from-shell"]);
    expect(r.code).toBe(0);
    const minted = r.stdout.trim();
    expect(minted).toMatch(/^ak_/);
    const me = await rest<{ agent_label: string }>(server.url, "GET", "/v1/keys/me", { key: minted });
    expect(me.body.agent_label).toBe("from-shell");
  });

  it("key show prints the key's label, scopes and storage quotas", async () => {
    const r = await run(["key", "show"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ak_\S+ {2}\S+ {2}scopes: .*messages:read/);
    expect(r.stdout).toMatch(/^live_messages: \d+ of \d+$/m);
    expect(r.stdout).toMatch(/^channels: \d+ of \d+$/m);
  });

  it("channel create and get, by the name", async () => {
    const name = `shell-${Date.now()}`;
    const created = await run(["channel", "create", name, "--mode", "broadcast"]);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(new RegExp(`^[0-9a-f-]{36}  ${name}  broadcast`));
    const got = await run(["channel", "get", name]);
    expect(JSON.parse(got.stdout)).toMatchObject({ name, mode: "broadcast" });
    const listed = await run(["channel", "list", "--json"]);
    expect(listed.stdout.trim().split("\n").map((l) => (JSON.parse(l) as { name: string }).name)).toContain(name);
  });

  it("channel create reuses your channel of that name, saying it already existed", async () => {
    const name = `reused-${randomUUID()}`;
    const first = await run(["channel", "create", name]);
    const second = await run(["channel", "create", name]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(second.stderr).toContain(`channel ${name} already existed`);
  });

  it("channel create --new makes another channel of the same name", async () => {
    const name = `twice-${randomUUID()}`;
    const first = await run(["channel", "create", name]);
    const second = await run(["channel", "create", name, "--new"]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout.split("  ")[0]).not.toBe(first.stdout.split("  ")[0]);
  });

  it("channel rename moves the channel to the new name", async () => {
    const [before, after] = [`old-${randomUUID()}`, `new-${randomUUID()}`];
    const id = (await run(["channel", "create", before])).stdout.split("  ")[0];
    const r = await run(["channel", "rename", before, after]);
    expect(r.code, r.stderr).toBe(0);
    expect((await rest<{ id: string }>(server.url, "GET", `/v1/channels/${after}`, { key })).body.id).toBe(id);
    expect((await rest(server.url, "GET", `/v1/channels/${before}`, { key })).status).toBe(404);
  });

  it("channel alias gives the channel a name another key can address it by", async () => {
    const ch = await createChannel(server.url, key);
    const alias = `alias-${randomUUID()}`;
    const r = await run(["channel", "alias", ch, alias]);
    expect(r.code, r.stderr).toBe(0);
    const other = await mintKey(server.url);
    expect((await rest<{ id: string }>(server.url, "GET", `/v1/channels/${alias}`, { key: other })).body.id).toBe(ch);
  });

  it("channel alias --remove takes the alias off, so the channel is no longer reached by it", async () => {
    const ch = await createChannel(server.url, key);
    const alias = `gone-${randomUUID()}`;
    expect((await rest(server.url, "POST", `/v1/channels/${ch}/aliases`, { key, body: { alias } })).status).toBe(201);
    const r = await run(["channel", "alias", ch, alias, "--remove"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^${ch}  \\S+  claimable  aliases: none$`, "m"));
    expect((await rest(server.url, "GET", `/v1/channels/${alias}`, { key })).status).toBe(404);
  });

  it("channel alias --remove exits 1 naming alias_not_found for an alias the channel does not hold", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "alias", ch, "never-held", "--remove"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("alias_not_found");
  });

  it("channel list shows each channel's owner, live messages and open work", async () => {
    const name = `counted-${randomUUID()}`;
    const ch = await createChannel(server.url, key, { name, mode: "claimable" });
    for (const content of ["a", "b", "c"]) await postMessage(server.url, key, ch, { content });
    const other = await mintKey(server.url);
    await rest(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key: other, body: { max_messages: 1 } });
    const r = await run(["channel", "list"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${ch}  ${name}  claimable  owner shell  live 3  open 2\n`);
  });

  it("channel list shows no open work for a broadcast channel", async () => {
    const name = `told-${randomUUID()}`;
    const ch = await createChannel(server.url, key, { name, mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "news" });
    const r = await run(["channel", "list"]);
    expect(r.stdout).toContain(`${ch}  ${name}  broadcast  owner shell  live 1\n`);
  });

  it("channel list shows 1000+ for a channel holding more messages than the service counts", async () => {
    const ch = await createChannel(server.url, key, { mode: "claimable" });
    const drafts = Array.from({ length: 100 }, (_, i) => ({ content: `task ${i}` }));
    for (let batch = 0; batch < 10; batch++) {
      expect((await rest(server.url, "POST", `/v1/channels/${ch}/messages:batchCreate`, { key, body: { messages: drafts } })).status).toBe(201);
    }
    const r = await run(["channel", "list"]);
    expect(r.stdout).toMatch(new RegExp(`^${ch}  .*  live 1000\\+  open 1000\\+$`, "m"));
  });

  it("channel delete --yes deletes the channel", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "delete", ch, "--yes"]);
    expect(r.code, r.stderr).toBe(0);
    expect((await rest(server.url, "GET", `/v1/channels/${ch}`, { key })).status).toBe(404);
  });

  it("channel delete without --yes refuses when stdin is not a terminal, deleting nothing", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "delete", ch]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--yes");
    expect((await rest(server.url, "GET", `/v1/channels/${ch}`, { key })).status).toBe(200);
  });

  it("channel delete on a terminal asks, and deletes on yes", async () => {
    const ch = await createChannel(server.url, key);
    const r = await runInProcess(["channel", "delete", ch], { env: inProcessEnv(), tty: true, stdinIsTTY: true, input: "y\n" });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(new RegExp(`delete channel \\S+ \\(${ch}\\) and all its messages for good\\? \\[y/N\\]`));
    expect((await rest(server.url, "GET", `/v1/channels/${ch}`, { key })).status).toBe(404);
  });

  it("channel delete on a terminal keeps the channel on any answer but yes", async () => {
    const ch = await createChannel(server.url, key);
    const r = await runInProcess(["channel", "delete", ch], { env: inProcessEnv(), tty: true, stdinIsTTY: true, input: "\n" });
    expect(r.code).toBe(1);
    expect((await rest(server.url, "GET", `/v1/channels/${ch}`, { key })).status).toBe(200);
  });

  it("send posts the argument, or stdin without one, and prints the message id", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const fromArg = await run(["send", ch, "hello"]);
    const fromStdin = await run(["send", ch], { input: "line one\nline two\n" });
    expect([fromArg.code, fromStdin.code]).toEqual([0, 0]);
    const page = await rest<{ data: Array<{ id: string; content: string }> }>(server.url, "GET", `/v1/channels/${ch}/messages?since=0`, { key });
    expect(page.body.data.map((m) => [m.id, m.content])).toEqual([
      [fromArg.stdout.trim(), "hello"],
      [fromStdin.stdout.trim(), "line one\nline two"],
    ]);
  });

  it("send drops one trailing newline from stdin, and only one", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const r = await run(["send", ch], { input: "hi\n\n" });
    expect(r.code, r.stderr).toBe(0);
    expect((await rest<{ content: string }>(server.url, "GET", `/v1/messages/${r.stdout.trim()}`, { key })).body.content).toBe("hi\n");
  });

  it("send - reads the content from stdin", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const r = await run(["send", ch, "-"], { input: "from stdin" });
    expect(r.code, r.stderr).toBe(0);
    expect((await rest<{ content: string }>(server.url, "GET", `/v1/messages/${r.stdout.trim()}`, { key })).body.content).toBe("from stdin");
  });

  it("pdf and parse name an input file that does not exist (exit 2), not the service", async () => {
    const missing = path.join(home, "no-such-report.md");
    for (const args of [["pdf", missing, "-o", path.join(home, "out.pdf")], ["parse", missing]]) {
      const r = await run(args);
      expect([r.code, r.stderr.trim()], args[0]).toEqual([2, `agentbus: no such file: ${missing}`]);
    }
  });

  it("work runs the command per task with the content on stdin and completes it with the command's stdout", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "shout this" });
    const r = await run(["work", ch, "--once", "--", "tr", "a-z", "A-Z"]);
    expect(r.code, r.stderr).toBe(0);
    const result = await run(["result", task.id, "--wait", "5"]);
    expect([result.code, result.stdout]).toEqual([0, "SHOUT THIS\n"]);
  });

  it("work keeps a result within the 64 KiB limit when the command writes more, and says so", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "big" });
    // 70,000 bytes of a two-byte character: the cut falls inside one.
    const r = await run(["work", ch, "--once", "--", "node", "-e", "process.stdout.write('é'.repeat(35000))"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/wrote more than 65533 bytes/);
    const m = await rest<{ result: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(Buffer.byteLength(m.body.result)).toBeLessThanOrEqual(65536);
    expect(m.body.result.startsWith("éé")).toBe(true);
  });

  it("work releases a task whose command fails, for a later retry", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "doomed" });
    const r = await run(["work", ch, "--once", "--", "sh", "-c", "exit 3"]);
    expect(r.stderr).toMatch(/exited with 3; released, retried in 1 s/);
    const m = await rest<{ claimed_by: unknown; acknowledged_by: unknown[]; delivery_count: number }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body).toMatchObject({ claimed_by: null, acknowledged_by: [], delivery_count: 1 });
  });

  it("work keeps the API key out of the command's environment, under any variable name", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "who am i" });
    const r = await run(["work", ch, "--once", "--", "sh", "-c", 'printf "[%s][%s]" "$AGENTBUS_API_KEY" "$COPIED_KEY"'], { env: { COPIED_KEY: key } });
    expect(r.code, r.stderr).toBe(0);
    const m = await rest<{ result: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body.result).toBe("[][]");
  });

  it("work --pass-key gives the command the key as AGENTBUS_API_KEY", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "who am i" });
    const r = await run(["work", ch, "--once", "--pass-key", "--", "sh", "-c", 'printf "[%s]" "$AGENTBUS_API_KEY"']);
    expect(r.code, r.stderr).toBe(0);
    const m = await rest<{ result: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body.result).toBe(`[${key}]`);
  });

  it("work releases a task whose result the service refuses (a NUL byte), says why, and goes on to the next task", async () => {
    const ch = await createChannel(server.url, key);
    const bad = await postMessage(server.url, key, ch, { content: "bad" });
    // Five earlier deliveries put the refused task's back-off at 2^5 = 32 s, so
    // the worker cannot take it again before the test has looked at it.
    for (let i = 0; i < 5; i++) {
      const received = await rest<{ data: unknown[] }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 1 } });
      expect(received.body.data).toHaveLength(1);
      expect((await rest(server.url, "POST", `/v1/messages/${bad.id}/release`, { key, body: {} })).status).toBe(200);
    }
    const good = await postMessage(server.url, key, ch, { content: "good" });
    const work = cli(["work", ch, "--", "sh", "-c", 'if [ "$(cat)" = bad ]; then printf "a\\000b"; else echo fine; fi']);
    let stderr = "";
    work.child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    await until(() => stderr.includes(`${good.id}: done`));
    work.child.kill("SIGINT");
    const r = await work.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      `${bad.id}: the service refused the result (invalid_string: 'result' contains the NUL character (U+0000), which cannot be stored); released, retried in 32 s`,
    );
    const refused = await rest<{ claimed_by: unknown; acknowledged_by: unknown[]; delivery_count: number; result: unknown; available_at: string }>(
      server.url,
      "GET",
      `/v1/messages/${bad.id}`,
      { key },
    );
    expect(refused.body).toMatchObject({ claimed_by: null, acknowledged_by: [], delivery_count: 6, result: null });
    expect(Date.parse(refused.body.available_at)).toBeGreaterThan(Date.now() + 20_000);
    expect((await rest<{ result: string }>(server.url, "GET", `/v1/messages/${good.id}`, { key })).body.result).toBe("fine\n");
    const receive = async () => (await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 1 } })).body.data;
    expect(await receive()).toEqual([]);
    clock.advanceSeconds(33);
    try {
      expect((await receive()).map((t) => t.message.id)).toEqual([bad.id]);
    } finally {
      clock.reset();
    }
  }, 30_000);

  it("work --once exits 1 when the service refuses the result, with the task released", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "binary" });
    const r = await run(["work", ch, "--once", "--", "printf", "a\\000b"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/the service refused the result \(invalid_string: .*NUL.*\); released, retried in 1 s/);
    const m = await rest<{ claimed_by: unknown; acknowledged_by: unknown[]; delivery_count: number }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body).toMatchObject({ claimed_by: null, acknowledged_by: [], delivery_count: 1 });
  });

  it("work exits 3 naming the task when the service cannot be reached to take its result", async () => {
    const proxy = await startCuttableProxy(server.url);
    try {
      const ch = await createChannel(server.url, key);
      const task = await postMessage(server.url, key, ch, { content: "unheard" });
      const work = cli(["work", ch, "--once", "--", "sh", "-c", "sleep 2; echo done"], { env: { AGENTBUS_URL: proxy.url } });
      await until(async () => (await rest<{ claimed_by: unknown }>(server.url, "GET", `/v1/messages/${task.id}`, { key })).body.claimed_by !== null);
      proxy.cut({ refuse: true });
      const r = await work.done;
      expect(r.code).toBe(3);
      expect(r.stderr).toMatch(new RegExp(`${task.id}: the result could not be sent \\(.*\\); the release failed too`));
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it("result exits 4 when the wait ends before a result, and 1 with the error code for an unknown message", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "nobody works here" });
    expect((await run(["result", task.id, "--wait", "1"])).code).toBe(4);
    const unknown = await run(["result", "00000000-0000-4000-8000-000000000000"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/message_not_found/);
    expect(unknown.stderr).toMatch(/^hint: /m);
  });

  it("result stops waiting and exits 1 when the task was dead-lettered", async () => {
    const ch = await createChannel(server.url, key, { max_deliveries: 1 });
    const task = await postMessage(server.url, key, ch, { content: "fails every time" });
    const leased = await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect((await rest(server.url, "POST", `/v1/messages/${leased.body.data[0]!.message.id}/release`, { key, body: {} })).status).toBe(200);
    const started = Date.now();
    const r = await run(["result", task.id, "--wait", "20"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/no result: the task is dead-lettered/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("cancel cancels a task no worker holds, with its reason, and result then stops waiting", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "no longer needed" });
    const r = await run(["cancel", task.id, "--reason", "the user left"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${task.id}: cancelled\n`);
    const json = await run(["cancel", task.id]);
    expect(json.code).toBe(1);
    expect(json.stderr).toMatch(/already_finished/);
    const result = await run(["result", task.id, "--wait", "20"]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/no result: the task is cancelled/);
  });

  it("waitpoint create, release --until-waitpoint and waitpoint complete --approve (with the URL and no key) park a task until someone decides", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "deploy to production" });
    const leased = await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect(leased.body.data[0]?.message.id).toBe(task.id);
    const created = await run(["waitpoint", "create", "--timeout", "600", "--description", "Deploy?"]);
    expect(created.code, created.stderr).toBe(0);
    const [id, url] = created.stdout.trim().split("\n");
    expect(url).toMatch(/\/v1\/waitpoints\/wpt_.+:complete$/);
    const released = await run(["release", task.id, "--until-waitpoint", id!]);
    expect(released.stdout).toBe(`${task.id}: waiting\n`);
    const listed = await run(["waitpoint", "list", "--state", "waiting"]);
    expect(listed.stdout).toMatch(new RegExp(`^${id}  waiting  until .+  1 task\\(s\\) waiting  Deploy\\?$`, "m"));
    // A person with only the URL: no key anywhere.
    const done = await run(["waitpoint", "complete", url!, "--approve", "--by", "dana"], { env: { AGENTBUS_API_KEY: "" } });
    expect(done.code, done.stderr).toBe(0);
    expect(done.stdout).toMatch(new RegExp(`^${id}  completed  \\{.*\\}  Deploy\\?\\n$`));
    expect(JSON.parse(/\{.*\}/.exec(done.stdout)![0])).toEqual({ approved: true, by: "dana" });
    const again = await rest<{ data: Array<{ message: { waitpoint: unknown } }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: {} });
    expect(again.body.data[0]?.message.waitpoint).toMatchObject({ id, data: { approved: true, by: "dana" } });
    const twice = await run(["waitpoint", "complete", id!, "--deny"]);
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/waitpoint_already_completed/);
  });

  it("schedule create, list, pause, resume and delete manage a channel's schedules", async () => {
    const ch = await createChannel(server.url, key);
    const created = await run(["schedule", "create", ch, "0 9 * * 1-5", "standup notes", "--timezone", "Europe/Berlin", "--group", "daily", "--json"]);
    expect(created.code, created.stderr).toBe(0);
    const s = JSON.parse(created.stdout) as { id: string; timezone: string; message: { group_key: string } };
    expect(s).toMatchObject({ timezone: "Europe/Berlin", message: { group_key: "daily" } });
    expect((await run(["schedule", "list", "--channel", ch])).stdout).toMatch(new RegExp(`^${s.id}  0 9 \\* \\* 1-5 \\(Europe/Berlin\\)  next .+  runs 0\\n$`));
    expect((await run(["schedule", "pause", s.id])).stdout).toContain("  paused  ");
    expect((await run(["schedule", "resume", s.id])).stdout).toContain("  next ");
    const bad = await run(["schedule", "create", ch, "61 * * * *", "x"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/invalid_cron/);
    expect((await run(["schedule", "delete", s.id])).stdout).toBe(`${s.id}  deleted\n`);
  });

  it("send --depends-on posts a message that waits for its parents", async () => {
    const ch = await createChannel(server.url, key);
    const parent = await postMessage(server.url, key, ch, { content: "first" });
    const r = await run(["send", ch, "second", "--depends-on", parent.id, "--json"]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ state: "blocked", depends_on: [parent.id] });
  });

  it("tail prints each message as it arrives, one JSON object per line with --json, until Ctrl-C", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "before" });
    const tail = cli(["tail", ch, "--json"]);
    await until(() => tail.lines.length >= 1);
    await postMessage(server.url, key, ch, { content: "after" });
    await until(() => tail.lines.length >= 2);
    tail.child.kill("SIGINT");
    const r = await tail.done;
    expect(r.code).toBe(0);
    expect(tail.lines.map((l) => (JSON.parse(l) as { content: string }).content)).toEqual(["before", "after"]);
  });

  it("tail resumes after the connection drops, missing nothing", async () => {
    const proxy = await startCuttableProxy(server.url);
    try {
      const ch = await createChannel(server.url, key, { mode: "broadcast" });
      await postMessage(server.url, key, ch, { content: "before" });
      const tail = cli(["tail", ch, "--json"], { env: { AGENTBUS_URL: proxy.url } });
      await until(() => tail.lines.length >= 1);
      proxy.cut({ refuse: true });
      await postMessage(server.url, key, ch, { content: "during the drop" });
      await new Promise((r) => setTimeout(r, 300));
      proxy.reopen();
      await postMessage(server.url, key, ch, { content: "after" });
      await until(() => tail.lines.length >= 3);
      tail.child.kill("SIGINT");
      const r = await tail.done;
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/connection lost .*; resuming in \d+ ms/);
      expect(tail.lines.map((l) => (JSON.parse(l) as { content: string }).content)).toEqual(["before", "during the drop", "after"]);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it("work heartbeats while the command runs, so a task longer than its lease is still completed", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "slow" });
    const work = cli(["work", ch, "--once", "--lease", "30", "--", "sh", "-c", "sleep 13; echo finished"]);
    await until(async () => (await rest<{ claimed_by: unknown }>(server.url, "GET", `/v1/messages/${task.id}`, { key })).body.claimed_by !== null);
    // 18 of the lease's 30 seconds pass at once: it would end 12 s from now, before the command does (13 s);
    // only the heartbeat (every 10 s, a third of the lease) keeps it.
    clock.advanceSeconds(18);
    try {
      const r = await work.done;
      expect(r.code, r.stderr).toBe(0);
      const m = await rest<{ result: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
      expect(m.body.result).toBe("finished\n");
    } finally {
      clock.reset();
    }
  }, 30_000);

  // The worker runs detached in its own group, and the test sends SIGINT to that whole group, as a
  // terminal does to its foreground job on Ctrl-C: the command sees it only if it is in that group.
  it("work: the first Ctrl-C lets the running command finish and its task complete, then the worker exits 0", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "finish me" });
    const started = path.join(home, `started-${randomUUID()}`);
    const release = gate();
    const work = cli(["work", ch, "--", "sh", "-c", 'echo started > "$0"; exec cat "$1"', started, release], { group: true });
    const stderr = stderrOf(work);
    await until(() => exists(started));
    process.kill(-work.child.pid!, "SIGINT");
    await until(() => stderr().includes(`${task.id}: stopping once this task is done`));
    await pass(release, "finished\n");
    const r = await work.done;
    expect(r.code, r.stderr).toBe(0);
    const m = await rest<{ result: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body.result).toBe("finished\n");
  }, 30_000);

  it("work: a second Ctrl-C stops the command, releases its task, and the worker exits 130", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "stop me" });
    const started = path.join(home, `started-${randomUUID()}`);
    const never = gate();
    const work = cli(["work", ch, "--", "sh", "-c", 'echo started > "$0"; exec cat "$1"', started, never], { group: true });
    const stderr = stderrOf(work);
    await until(() => exists(started));
    process.kill(-work.child.pid!, "SIGINT");
    await until(() => stderr().includes(`${task.id}: stopping once this task is done`));
    process.kill(-work.child.pid!, "SIGINT");
    const r = await work.done;
    expect(r.code, r.stderr).toBe(130);
    const m = await rest<{ claimed_by: unknown; acknowledged_by: unknown[] }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body).toMatchObject({ claimed_by: null, acknowledged_by: [] });
  }, 30_000);

  it("work stops the command of a task its author cancels and gives the task back, cancelled; with --once it exits 1", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "cancel me" });
    const started = path.join(home, `started-${randomUUID()}`);
    const never = gate();
    // A lease of 30 s: the worker heartbeats every 10 s, and learns of the cancel then.
    const work = cli(["work", ch, "--once", "--lease", "30", "--", "sh", "-c", 'echo started > "$0"; exec cat "$1"', started, never]);
    await until(() => exists(started));
    expect((await rest(server.url, "POST", `/v1/messages/${task.id}:cancel`, { key, body: { reason: "not needed" } })).status).toBe(200);
    const r = await work.done;
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(`${task.id}: cancelled by its author; stopping the command`);
    expect(r.stderr).toContain(`${task.id}: the command was stopped (the task was cancelled); released`);
    expect((await rest<{ state: string }>(server.url, "GET", `/v1/messages/${task.id}`, { key })).body.state).toBe("cancelled");
  }, 30_000);

  it("work --progress reports the command's stderr lines as the task's progress, and still prints them", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "report" });
    const r = await run(["work", ch, "--once", "--progress", "--", "sh", "-c", "echo reading >&2; sleep 1.2; echo writing >&2; echo done"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain("reading\nwriting\n");
    const m = await rest<{ result: string; progress: { text: string } | null }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body).toMatchObject({ result: "done\n", progress: { text: "reading\nwriting\n" } });
  }, 30_000);

  it("work: the command ends with the worker when the worker is killed with SIGKILL", async () => {
    const ch = await createChannel(server.url, key);
    await postMessage(server.url, key, ch, { content: "orphan?" });
    const pidFile = path.join(home, `pid-${randomUUID()}`);
    const never = gate();
    const work = cli(["work", ch, "--", "sh", "-c", 'echo $$ > "$0"; exec cat "$1"', pidFile, never]);
    await until(async () => (await readFile(pidFile, "utf8").catch(() => "")).endsWith("\n"));
    const pid = Number((await readFile(pidFile, "utf8")).trim());
    // Not work.done: that waits for the worker's pipes, which a surviving command would hold open.
    const exited = new Promise((resolve) => work.child.once("exit", resolve));
    work.child.kill("SIGKILL");
    await exited;
    await until(() => ended(pid));
  }, 30_000);

  it("work --once exits 1 when the command fails", async () => {
    const ch = await createChannel(server.url, key);
    await postMessage(server.url, key, ch, { content: "doomed" });
    const r = await run(["work", ch, "--once", "--", "sh", "-c", "exit 3"]);
    expect(r.code, r.stderr).toBe(1);
  });

  it("work exits 127 naming a command that does not exist, and releases the task for another worker at once", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "nobody can run this" });
    const r = await run(["work", ch, "--", "no-such-command-for-agentbus"]);
    expect(r.code).toBe(127);
    expect(r.stderr).toContain("agentbus: command not found: no-such-command-for-agentbus");
    const received = await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { max_messages: 1 } });
    expect(received.body.data.map((t) => t.message.id)).toEqual([task.id]);
  });

  it("login stores the URL and a new key in a profile file only its owner can read", async () => {
    const profile = path.join(home, "login-profile.json");
    const r = await run(["login", "--label", "laptop"], { env: { AGENTBUS_API_KEY: "", AGENTBUS_PROFILE: profile } });
    expect(r.code, r.stderr).toBe(0);
    expect((await stat(profile)).mode & 0o777).toBe(0o600);
    const saved = JSON.parse(await readFile(profile, "utf8")) as { url: string; key: string };
    expect(saved.url).toBe(server.url);
    // The stored key is what later commands use.
    const me = await run(["channel", "create", `via-profile-${Date.now()}`], { env: { AGENTBUS_API_KEY: "", AGENTBUS_URL: "", AGENTBUS_PROFILE: profile } });
    expect(me.code, me.stderr).toBe(0);
    expect(saved.key).toMatch(/^ak_/);
  });

  it("login names the URL it tried when the service cannot be reached", async () => {
    const r = await run(["login"], { env: { AGENTBUS_URL: "http://127.0.0.1:9", AGENTBUS_API_KEY: "", AGENTBUS_PROFILE: path.join(home, `unreached-${randomUUID()}.json`) } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("the service at http://127.0.0.1:9 could not be reached");
  });

  it("login checks a given key with the service and, when it is refused, names the URL and saves nothing", async () => {
    const profile = path.join(home, `refused-${randomUUID()}.json`);
    const r = await run(["login"], { env: { AGENTBUS_API_KEY: "ak_not_a_key", AGENTBUS_PROFILE: profile } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`agentbus: login to ${server.url} failed`);
    expect(await exists(profile)).toBe(false);
  });

  it("tail names a message's author by the posting key's label when the message names no actor", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const label = `poster-${randomUUID().slice(0, 8)}`;
    await postMessage(server.url, await mintKey(server.url, label), ch, { content: "hello" });
    const r = await runInProcess(["tail", ch], { env: inProcessEnv(), tty: false, stopWhen: (out) => out.stdout.includes("\n") });
    expect(r.stdout).toMatch(new RegExp(`^\\S+  ${label}  hello$`, "m"));
  });

  it("tail names the actor a message names rather than the key's label", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    await postMessage(server.url, key, ch, { content: "hello", actor_label: "planner" });
    const r = await runInProcess(["tail", ch], { env: inProcessEnv(), tty: false, stopWhen: (out) => out.stdout.includes("\n") });
    expect(r.stdout).toMatch(/^\S+ {2}planner {2}hello$/m);
  });

  it("answers --help on every command and exits 2 on bad usage", async () => {
    for (const args of [["send", "--help"], ["work", "--help"], ["channel", "create", "--help"], ["tail", "--help"]]) {
      const r = await run(args);
      expect(r.code, args.join(" ")).toBe(0);
      expect(r.stdout).toMatch(/^Usage: agentbus /m);
    }
    expect((await run(["send"])).code).toBe(2);
    expect((await run(["no-such-command"])).code).toBe(2);
    expect((await run(["channel", "create", "x", "--mode", "sideways"])).code).toBe(2);
  });

  it("runs as `npx agentbus` in this checkout (npm install links the bin)", async () => {
    const child = spawn("npx", ["--no-install", "agentbus", "channel", "list", "--json"], {
      cwd: root,
      env: { PATH: process.env.PATH ?? "", HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString("utf8")));
    const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
    expect(code, stderr).toBe(0);
  }, 60_000);

  it("exits 3 when the service cannot be reached", async () => {
    const r = await run(["channel", "list"], { env: { AGENTBUS_URL: "http://127.0.0.1:9" } });
    expect(r.code).toBe(3);
  });
});
