/**
 * Publishing a channel as an A2A agent from the other surfaces: the shell's
 * `agentbus channel publish` and the MCP tool find_or_create_channel with
 * `a2a` (docs/decisions.md#a2a). The protocol itself is a2a-server.test.ts.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createChannel } from "../support/fixtures.js";
import { mintKey, rest, useTestServer } from "../support/server.js";
import { spawnShell } from "../support/shell.js";

const server = useTestServer();
let key: string;
let home: string;
beforeAll(async () => {
  key = await mintKey(server.url, "a2a-surfaces");
  home = await mkdtemp(path.join(tmpdir(), "agentbus-cli-a2a-"));
});
afterAll(async () => {
  await rm(home, { recursive: true, force: true });
});

const run = (args: string[]) =>
  spawnShell(args, { env: { HOME: home, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: path.join(home, "profile.json") } }).done;

const card = (id: string) => rest<{ name: string; skills: Array<{ id: string; name: string; description: string }> }>(server.url, "GET", `/a2a/${id}/.well-known/agent-card.json`);

describe("agentbus channel publish", () => {
  it("publishes a channel with its skills and prints the card's URL", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "publish", ch, "--name", "Translator", "--skill", "fr=French: into French", "--skill", "de=German"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`${server.url}/a2a/${ch}/.well-known/agent-card.json`);
    const got = await card(ch);
    expect(got.status).toBe(200);
    expect(got.body.name).toBe("Translator");
    expect(got.body.skills.map((s) => [s.id, s.name, s.description])).toEqual([["fr", "French", "into French"], ["de", "German", "German"]]);
  });

  it("unpublishes with --off and keeps the settings for the next publish", async () => {
    const ch = await createChannel(server.url, key);
    expect((await run(["channel", "publish", ch, "--name", "Kept"])).code).toBe(0);
    expect((await run(["channel", "publish", ch, "--off"])).code).toBe(0);
    expect((await card(ch)).status).toBe(404);
    expect((await run(["channel", "publish", ch])).code).toBe(0);
    expect((await card(ch)).body.name).toBe("Kept");
  });

  it("exits 2 on a skill without a name", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "publish", ch, "--skill", "nameless"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--skill");
  });

  it("exits 1 naming the service's code for a broadcast channel", async () => {
    const ch = await createChannel(server.url, key, { mode: "broadcast" });
    const r = await run(["channel", "publish", ch]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("invalid_a2a");
  });
});

describe("agentbus channel forward", () => {
  it("sets the forward with its header, and --off removes it", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "forward", ch, "https://agent.example.com", "--header", "Authorization: Bearer xyz"]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("forwarded to https://agent.example.com");
    const got = await rest<{ a2a_forward: unknown }>(server.url, "GET", `/v1/channels/${ch}`, { key });
    expect(got.body.a2a_forward).toEqual({ url: "https://agent.example.com", auth_header: { name: "Authorization", value: null } });
    expect((await run(["channel", "forward", ch, "--off"])).code).toBe(0);
    expect((await rest<{ a2a_forward: unknown }>(server.url, "GET", `/v1/channels/${ch}`, { key })).body.a2a_forward).toBeNull();
  });

  it("exits 1 naming the service's code for a private target, which this service refuses", async () => {
    const ch = await createChannel(server.url, key);
    const r = await run(["channel", "forward", ch, "http://127.0.0.1:9/agent"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("invalid_a2a_forward");
  });
});

describe("the MCP tool find_or_create_channel", () => {
  it("creates a channel published as an agent", async () => {
    const client = new Client({ name: "test-agent", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
    try {
      const result = (await client.callTool({
        name: "find_or_create_channel",
        arguments: { name: `agent-${Math.random().toString(36).slice(2, 8)}`, a2a: { enabled: true, name: "Helper", skills: [{ id: "help", name: "Help" }] } },
      })) as CallToolResult;
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false);
      const { channel } = result.structuredContent as { channel: { id: string; a2a: { enabled: boolean } } };
      expect(channel.a2a.enabled).toBe(true);
      expect((await card(channel.id)).body.name).toBe("Helper");
    } finally {
      await client.close();
    }
  });
});
