/**
 * The shell commands (`agentbus key|channel|send|result|work|tail|login …`),
 * run as real child processes against a real service, the way a person or a
 * script does: output, exit codes, stdin, the profile file.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel, postMessage } from "../support/fixtures.js";
import { startCuttableProxy } from "../../clients/typescript/test/proxy.js";
import { AdjustableClock } from "../support/clock.js";
import { mintKey, rest, useTestServer } from "../support/server.js";
import { spawnShell } from "../support/shell.js";

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

  it("send posts the argument, or stdin without one, and prints the message id", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const fromArg = await run(["send", ch, "hello"]);
    const fromStdin = await run(["send", ch], { input: "line one\nline two\n" });
    expect([fromArg.code, fromStdin.code]).toEqual([0, 0]);
    const page = await rest<{ data: Array<{ id: string; content: string }> }>(server.url, "GET", `/v1/channels/${ch}/messages?since=0`, { key });
    expect(page.body.data.map((m) => [m.id, m.content])).toEqual([
      [fromArg.stdout.trim(), "hello"],
      [fromStdin.stdout.trim(), "line one\nline two\n"],
    ]);
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
    expect(r.code).toBe(0);
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

  it("work stops on Ctrl-C: the interrupted task is released, and the command exits 0", async () => {
    const ch = await createChannel(server.url, key);
    const task = await postMessage(server.url, key, ch, { content: "interrupted" });
    const work = cli(["work", ch, "--", "sleep", "30"], { group: true });
    await until(async () => (await rest<{ claimed_by: unknown }>(server.url, "GET", `/v1/messages/${task.id}`, { key })).body.claimed_by !== null);
    process.kill(-work.child.pid!, "SIGINT");
    const r = await work.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/released/);
    const m = await rest<{ claimed_by: unknown; acknowledged_by: unknown[] }>(server.url, "GET", `/v1/messages/${task.id}`, { key });
    expect(m.body).toMatchObject({ claimed_by: null, acknowledged_by: [] });
  }, 30_000);

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
