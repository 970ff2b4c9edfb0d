/**
 * Issue 28 from the shell, against a real service: `send --group --priority
 * --ttl` stores the message so, `channel create` with the group, dispatch,
 * aging and limit flags makes the channel so, and `limit create|list|get|
 * update|delete` manage the key's shared limits over /v1/limits. What the
 * commands send, flag by flag, is test/unit/shell-requests.test.ts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";
import { spawnShell } from "../support/shell.js";

const server = useTestServer();
let key: string;
let home: string;

beforeAll(async () => {
  key = await mintKey(server.url, "shell-groups");
  home = await mkdtemp(path.join(tmpdir(), "agentbus-cli-groups-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

const run = (args: string[], input?: string) =>
  spawnShell(args, { env: { HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") }, input }).done;

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}`;

describe("agentbus send with a group, a priority and an expiry", () => {
  it("stores the message with its group_key and priority, expiring ttl seconds after it was posted", async () => {
    const ch = await createChannel(server.url, key, { mode: "claimable" });
    const r = await run(["send", ch, "review PR 7", "--group", "repo:agentbus", "--priority", "1", "--ttl", "600"]);
    expect(r.code, r.stderr).toBe(0);
    const stored = await rest<{ group_key: string | null; priority: number; created_at: string; expires_at: string }>(server.url, "GET", `/v1/messages/${r.stdout.trim()}`, { key });
    expect(stored.body).toMatchObject({ group_key: "repo:agentbus", priority: 1 });
    expect(Date.parse(stored.body.expires_at) - Date.parse(stored.body.created_at)).toBe(600_000);
  });

  it("posts at priority 3 and without a group when neither is given", async () => {
    const ch = await createChannel(server.url, key, { mode: "claimable" });
    const r = await run(["send", ch, "plain"]);
    expect(r.code, r.stderr).toBe(0);
    expect((await rest(server.url, "GET", `/v1/messages/${r.stdout.trim()}`, { key })).body).toMatchObject({ group_key: null, priority: 3 });
  });

  it("exits 1 naming the service's code for a TTL longer than the channel's", async () => {
    const ch = await createChannel(server.url, key, { mode: "claimable", ttl_seconds: 300 });
    const r = await run(["send", ch, "too long", "--ttl", "301"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("invalid_ttl_seconds");
  });
});

describe("agentbus channel create and limit", () => {
  it("creates a limit, a channel naming it with its group settings, lists and shows the limit's use, then deletes it", async () => {
    const limit = unique("model");
    const created = await run(["limit", "create", limit, "--max-in-flight", "5", "--rate", "100/60"]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.trim()).toBe(`${limit}  in flight 0 of 5  used 0 of 100 per 60 s`);

    const name = unique("repos");
    const channel = await run(["channel", "create", name, "--group-concurrency", "1", "--dispatch", "fair", "--priority-aging", "30", "--limit", limit, "--json"]);
    expect(channel.code, channel.stderr).toBe(0);
    const id = (JSON.parse(channel.stdout) as { id: string }).id;
    const read = await rest(server.url, "GET", `/v1/channels/${id}`, { key });
    expect(read.body).toMatchObject({ group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 30, limits: [limit] });

    // One delivery holds the limit: the shell shows it in flight and counted in the window.
    const sent = await run(["send", id, "task", "--group", "a"]);
    expect(sent.code, sent.stderr).toBe(0);
    expect((await rest(server.url, "POST", `/v1/channels/${id}/messages:receive`, { key, body: { max_messages: 1 } })).status).toBe(200);
    const listed = await run(["limit", "list"]);
    expect(listed.stdout).toContain(`${limit}  in flight 1 of 5  used 1 of 100 per 60 s`);
    const got = await run(["limit", "get", limit]);
    expect(JSON.parse(got.stdout)).toMatchObject({ name: limit, max_in_flight: 5, rate: { count: 100, per_seconds: 60 }, in_flight: 1, used_in_window: 1 });

    const updated = await run(["limit", "update", limit, "--max-in-flight", "none", "--json"]);
    expect(updated.code, updated.stderr).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ name: limit, max_in_flight: null, rate: { count: 100, per_seconds: 60 } });

    const deleted = await run(["limit", "delete", limit]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const gone = await run(["limit", "get", limit]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain("limit_not_found");
  });

  it("exits 1 naming unknown_limit for a channel that names a limit the key does not have", async () => {
    const r = await run(["channel", "create", unique("queue"), "--limit", unique("nowhere")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("unknown_limit");
  });
});
