/**
 * What the shell commands send for issue 28's settings: the flags of `send`,
 * `channel create` and `limit` reach the request as the REST API names them,
 * and a malformed value is bad usage (exit 2) before anything is sent. Run
 * in process against a stand-in for the REST API that records each request
 * (what the service then does with them is test/integration/shell-groups.test.ts).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runInProcess } from "../support/shell.js";

interface Received {
  method: string;
  url: string;
  body: unknown;
}

let api: Server;
let apiUrl: string;
const received: Received[] = [];

/** The answers the stand-in gives, by route: enough of the service's shapes for the commands to print. */
function answer(method: string, url: string, body: Record<string, unknown>): [number, unknown] {
  if (method === "GET" && url.startsWith("/v1/channels/")) return [404, { error: "channel_not_found", message: "No such channel" }];
  if (method === "POST" && url === "/v1/channels") return [201, { id: "ch_1", mode: "claimable", ...body }];
  if (method === "POST" && /^\/v1\/channels\/[^/]+\/messages$/.test(url)) return [201, { message: { id: "msg_1", ...body }, next_cursor: "c" }];
  const limit = { name: "openai", max_in_flight: 5, rate: { count: 100, per_seconds: 60 }, in_flight: 2, used_in_window: 41, created_at: "2026-11-27T00:00:00.000000Z" };
  if (method === "POST" && url === "/v1/limits") return [201, { ...limit, ...body }];
  if (method === "GET" && url === "/v1/limits") return [200, { data: [limit, { ...limit, name: "batch", max_in_flight: null, in_flight: 0 }, { ...limit, name: "calls", rate: null, used_in_window: 0 }] }];
  if (method === "GET" && url === "/v1/limits/openai") return [200, limit];
  if (method === "PATCH" && url === "/v1/limits/openai") return [200, { ...limit, ...body }];
  if (method === "DELETE" && url === "/v1/limits/openai") return [204, undefined];
  return [404, { error: "not_found", message: `No route ${method} ${url}` }];
}

beforeAll(async () => {
  api = createServer(async (req, res) => {
    let text = "";
    for await (const chunk of req) text += String(chunk);
    const body = (text === "" ? undefined : JSON.parse(text)) as Record<string, unknown> | undefined;
    const method = req.method ?? "";
    const url = req.url ?? "";
    received.push({ method, url, body });
    const [status, out] = answer(method, url, body ?? {});
    res.writeHead(status, out === undefined ? {} : { "Content-Type": "application/json" });
    res.end(out === undefined ? undefined : JSON.stringify(out));
  });
  await new Promise<void>((resolve) => api.listen(0, "127.0.0.1", resolve));
  apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => api.close(() => resolve())));
beforeEach(() => {
  received.length = 0;
});

const run = (args: string[]) => runInProcess(args, { env: { AGENTBUS_URL: apiUrl, AGENTBUS_API_KEY: "ak_test.secret", AGENTBUS_PROFILE: "/nonexistent/profile.json" }, tty: false });

/** The requests that changed something (the commands also look things up first). */
const writes = () => received.filter((r) => r.method !== "GET");

describe("agentbus send", () => {
  it("sends --group, --priority and --ttl (and --limit) as group_key, priority, ttl_seconds and limits", async () => {
    const out = await run(["send", "jobs", "review PR 7", "--group", "repo:agentbus", "--priority", "1", "--ttl", "600", "--limit", "openai", "--limit", "review-bots"]);
    expect(out, out.stderr).toMatchObject({ code: 0, stdout: "msg_1\n" });
    expect(writes()).toEqual([
      { method: "POST", url: "/v1/channels/jobs/messages", body: { content: "review PR 7", group_key: "repo:agentbus", priority: 1, ttl_seconds: 600, limits: ["openai", "review-bots"] } },
    ]);
  });

  it("sends none of them when they are not given", async () => {
    expect((await run(["send", "jobs", "plain"])).code).toBe(0);
    expect(writes()).toEqual([{ method: "POST", url: "/v1/channels/jobs/messages", body: { content: "plain" } }]);
  });

  it("refuses a priority outside 1..5 and a TTL that is not a whole number, sending nothing", async () => {
    for (const args of [
      ["--priority", "0"],
      ["--priority", "6"],
      ["--priority", "high"],
      ["--ttl", "1.5"],
      ["--ttl", "soon"],
    ]) {
      const out = await run(["send", "jobs", "x", ...args]);
      expect(out.code, args.join(" ")).toBe(2);
      expect(out.stderr).toMatch(/invalid/);
    }
    expect(received).toEqual([]);
  });
});

describe("agentbus channel create", () => {
  it("sends --group-concurrency, --dispatch, --priority-aging and each --limit with the new channel", async () => {
    const out = await run(["channel", "create", "repos", "--group-concurrency", "1", "--dispatch", "fair", "--priority-aging", "30", "--limit", "openai", "--limit", "anthropic"]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(writes()).toEqual([
      {
        method: "POST",
        url: "/v1/channels",
        body: { name: "repos", mode: "claimable", access: "open", description: null, group_concurrency: 1, dispatch: "fair", priority_aging_seconds: 30, limits: ["openai", "anthropic"] },
      },
    ]);
  });

  it("refuses a dispatch other than fifo or fair, sending nothing", async () => {
    expect((await run(["channel", "create", "repos", "--dispatch", "random"])).code).toBe(2);
    expect(received).toEqual([]);
  });
});

describe("agentbus limit", () => {
  it("create sends the name and the bounds given, and prints the limit's line", async () => {
    const out = await run(["limit", "create", "openai", "--max-in-flight", "5", "--rate", "100/60"]);
    expect(out, out.stderr).toMatchObject({ code: 0, stdout: "openai  in flight 2 of 5  used 41 of 100 per 60 s\n" });
    expect(writes()).toEqual([{ method: "POST", url: "/v1/limits", body: { name: "openai", max_in_flight: 5, rate: { count: 100, per_seconds: 60 } } }]);
  });

  it("create takes a rate alone, with or without a trailing s", async () => {
    expect((await run(["limit", "create", "openai", "--rate", "10/1s"])).code).toBe(0);
    expect(writes()[0]?.body).toEqual({ name: "openai", rate: { count: 10, per_seconds: 1 } });
  });

  it("create needs at least one bound, and a rate written COUNT/SECONDS, sending nothing otherwise", async () => {
    const none = await run(["limit", "create", "openai"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("--max-in-flight, --rate or both");
    expect((await run(["limit", "create", "openai", "--rate", "100 per minute"])).code).toBe(2);
    expect(received).toEqual([]);
  });

  it("list prints one line per limit with its live use, or JSON lines", async () => {
    const out = await run(["limit", "list"]);
    expect(out.stdout.split("\n").filter((l) => l !== "")).toEqual([
      "openai  in flight 2 of 5  used 41 of 100 per 60 s",
      "batch  in flight 0 (no bound)  used 41 of 100 per 60 s",
      "calls  in flight 2 of 5  no rate",
    ]);
    const json = await run(["limit", "list", "--json"]);
    expect(json.stdout.trim().split("\n").map((l) => (JSON.parse(l) as { name: string }).name)).toEqual(["openai", "batch", "calls"]);
  });

  it("get prints the limit as JSON", async () => {
    const out = await run(["limit", "get", "openai"]);
    expect(JSON.parse(out.stdout)).toMatchObject({ name: "openai", in_flight: 2, used_in_window: 41 });
  });

  it("update sends only the bounds given, none as null", async () => {
    expect((await run(["limit", "update", "openai", "--max-in-flight", "none", "--rate", "50/10"])).code).toBe(0);
    expect(writes()).toEqual([{ method: "PATCH", url: "/v1/limits/openai", body: { max_in_flight: null, rate: { count: 50, per_seconds: 10 } } }]);
    expect((await run(["limit", "update", "openai"])).code).toBe(2);
    expect((await run(["limit", "update", "openai", "--max-in-flight", "lots"])).code).toBe(2);
    expect(writes()).toHaveLength(1);
  });

  it("delete deletes the limit by name", async () => {
    const out = await run(["limit", "delete", "openai"]);
    expect(out, out.stderr).toMatchObject({ code: 0, stdout: "openai  deleted\n" });
    expect(writes()).toEqual([{ method: "DELETE", url: "/v1/limits/openai", body: undefined }]);
  });
});
