/**
 * `agentbus serve` with AGENTBUS_HTTP_PROCESSES=2 (docs/operations.md#several-processes):
 * two HTTP processes on one port against one database, driven over REST,
 * gRPC, Connect and gRPC-Web; a long-poll on one process woken by a post on
 * either; a replaced process; SIGTERM stops them all.
 */
import net, { type AddressInfo } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { poolShare, processEnv } from "../../src/processes.js";
import { loadConfig } from "../../src/platform/config.js";
import { eventually } from "../support/eventually.js";
import { useTestDatabase } from "../support/database.js";
import { isAlive, spawnCli, startServiceProcess, stopServiceProcess, type ServiceProcess } from "../support/process.js";
import { mintKey, rest } from "../support/server.js";

const db = useTestDatabase();
let svc: ServiceProcess;

interface LogLine {
  msg?: string;
  process?: number;
  pid?: number;
  url?: string;
}
const logLines = (): LogLine[] => svc.lines.flatMap((l) => (l.startsWith("{") ? [JSON.parse(l) as LogLine] : []));
/** The processes that served at least one request so far. */
const servingProcesses = () => new Set(logLines().filter((l) => l.msg === "request").map((l) => l.process));

beforeAll(async () => {
  svc = await startServiceProcess({
    DATABASE_URL: db.url,
    AGENTBUS_HTTP_PROCESSES: "2",
    AGENTBUS_LOG_LEVEL: "info",
    AGENTBUS_LOG_FORMAT: "json",
    AGENTBUS_RATE_LIMIT: "0",
    AGENTBUS_KEY_MINT_LIMIT: "0",
  });
  // The first "listening" line came from one process; wait for the other.
  await eventually(async () => logLines().filter((l) => l.msg?.startsWith("agentbus listening on")).length >= 2, 30_000, 50);
}, 60_000);
afterAll(() => stopServiceProcess(svc, 10_000));

describe("two HTTP processes on one port", () => {
  it("both listen on the same address", () => {
    const urls = new Set(logLines().filter((l) => l.msg?.startsWith("agentbus listening on")).map((l) => l.url));
    expect([...urls]).toEqual([svc.url]);
  });

  it("share the connections between them: REST requests on separate connections reach both", async () => {
    // Each request on its own connection; the primary hands connections out in turn.
    await eventually(async () => {
      await Promise.all(Array.from({ length: 8 }, () => fetch(`${svc.url}/health`, { headers: { connection: "close" } }).then((r) => r.text())));
      return servingProcesses().size >= 2;
    }, 30_000, 100);
  });

  it("serve one state over every protocol: a channel made over gRPC, posted to over Connect, read over gRPC-Web and REST", async () => {
    const key = await mintKey(svc.url);
    const headers = { "x-api-key": key };
    const channels = createClient(ChannelService, createGrpcTransport({ baseUrl: svc.url }));
    const connect = createClient(MessageService, createConnectTransport({ baseUrl: svc.url, httpVersion: "1.1" }));
    const grpcWeb = createClient(MessageService, createGrpcWebTransport({ baseUrl: svc.url, httpVersion: "1.1" }));
    const channel = await channels.createChannel({ name: "two processes", mode: ChannelMode.CLAIMABLE }, { headers });
    await connect.createMessage({ identifier: channel.id, content: "over connect" }, { headers });
    const page = await grpcWeb.listMessages({ identifier: channel.id }, { headers });
    expect(page.data.map((m) => m.content)).toEqual(["over connect"]);
    const viaRest = await rest<{ data: Array<{ content: string }> }>(svc.url, "GET", `/v1/channels/${channel.id}/messages`, { key });
    expect(viaRest.body.data.map((m) => m.content)).toEqual(["over connect"]);
  });

  it("wakes long-polls on every process when one of them takes a post", async () => {
    const key = await mintKey(svc.url);
    const created = await rest<{ id: string }>(svc.url, "POST", "/v1/channels", { key, body: { name: "wake", mode: "broadcast" } });
    const ch = created.body.id;
    const waiters = Array.from({ length: 6 }, () =>
      fetch(`${svc.url}/v1/channels/${ch}/messages?wait=20`, { headers: { "x-api-key": key, connection: "close" } }).then(
        async (r) => ((await r.json()) as { data: Array<{ content: string }> }).data.map((m) => m.content),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await rest(svc.url, "POST", `/v1/channels/${ch}/messages`, { key, body: { content: "hello" } })).status).toBe(201);
    for (const got of await Promise.all(waiters)) expect(got).toEqual(["hello"]);
  });

  it("leases each message once across the processes", async () => {
    const owner = await mintKey(svc.url);
    const created = await rest<{ id: string }>(svc.url, "POST", "/v1/channels", { key: owner, body: { name: "queue", mode: "claimable" } });
    const ch = created.body.id;
    const messages = Array.from({ length: 100 }, (_, i) => ({ content: `task ${i}` }));
    expect((await rest(svc.url, "POST", `/v1/channels/${ch}/messages:batchCreate`, { key: owner, body: { messages } })).status).toBe(201);
    const workers = await Promise.all(Array.from({ length: 8 }, (_, i) => mintKey(svc.url, `mp-worker-${i}-${Date.now()}`)));
    const leased: string[] = [];
    await Promise.all(
      workers.map(async (key) => {
        for (;;) {
          const res = await fetch(`${svc.url}/v1/channels/${ch}/messages:receive`, {
            method: "POST",
            headers: { "x-api-key": key, "content-type": "application/json", connection: "close" },
            body: JSON.stringify({ max_messages: 5 }),
          });
          const { data } = (await res.json()) as { data: Array<{ message: { id: string } }> };
          if (data.length === 0) return;
          leased.push(...data.map((d) => d.message.id));
        }
      }),
    );
    expect(leased).toHaveLength(100);
    expect(new Set(leased).size).toBe(100);
  });

  it("replaces a process that dies, on the same port", async () => {
    const before = logLines().filter((l) => l.msg?.startsWith("agentbus listening on")).length;
    const victim = logLines().find((l) => l.msg === "http process started" && typeof l.pid === "number")?.pid;
    expect(victim).toBeDefined();
    process.kill(victim!, "SIGKILL");
    await eventually(async () => logLines().filter((l) => l.msg?.startsWith("agentbus listening on")).length > before, 30_000, 50);
    expect((await fetch(`${svc.url}/health`, { headers: { connection: "close" } })).status).toBe(200);
  });

  it("stops every process and exits 0 on SIGTERM", async () => {
    const pids = logLines().flatMap((l) => (l.msg === "http process started" && typeof l.pid === "number" ? [l.pid] : []));
    svc.signal("SIGTERM");
    expect((await svc.exited).code).toBe(0);
    await eventually(async () => pids.every((pid) => !isAlive(pid)), 10_000, 50);
  });
});

describe("a process that cannot start", () => {
  it("stops the service with exit code 1 instead of starting it again and again", async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const cli = spawnCli(["serve"], { HOST: "127.0.0.1", PORT: String(port), DATABASE_URL: db.url, AGENTBUS_HTTP_PROCESSES: "2", AGENTBUS_LOG_FORMAT: "json" });
      expect(await cli.exited).toBe(1);
      expect(cli.lines.join("\n")).toContain("an HTTP process failed while starting");
    } finally {
      taken.close();
    }
  }, 60_000);
});

describe("how the processes are configured", () => {
  const config = loadConfig({ AGENTBUS_HTTP_PROCESSES: "4", AGENTBUS_DB_POOL_SIZE: "20" });

  it("splits the pool budget between the processes, at least 2 each", () => {
    expect(poolShare(20, 4)).toBe(5);
    expect(poolShare(3, 4)).toBe(2);
  });

  it("runs the job workers in the first process only, on the primary's database", () => {
    expect(processEnv(config, "postgres://db", 0)).toMatchObject({ DATABASE_URL: "postgres://db", AGENTBUS_WORKERS: "true", AGENTBUS_DB_POOL_SIZE: "5", AGENTBUS_HTTP_PROCESSES: "1" });
    expect(processEnv(config, "postgres://db", 1)).toMatchObject({ AGENTBUS_WORKERS: "false" });
  });
});
