/**
 * Progress and following one message (docs/decisions.md#progress): the lease
 * holder reports progress (POST /v1/messages/{id}/progress); followers see it
 * on GET /v1/messages/{id}/events (SSE: state, progress, result), on gRPC
 * WatchMessage, and with GET /v1/messages/{id}?wait=&progress_after=.
 */
import http from "node:http";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { beforeAll, describe, expect, it } from "vitest";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { createChannel, postMessage, type MessageJson, type ReceivedJson } from "../support/fixtures.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const server = useTestServer();
const url = () => server.url;
let owner: string;
let worker: string;
let other: string;
beforeAll(async () => {
  [owner, worker, other] = await Promise.all(["progress-owner", "progress-worker", "progress-other"].map((l) => mintKey(url(), l)));
});

interface ProgressJson {
  data: Record<string, unknown>;
  text: string;
  updated_at: string;
}
type WithProgress = MessageJson & { progress: ProgressJson | null };

const leased = async (extra: Record<string, unknown> = {}) => {
  const ch = await createChannel(url(), owner);
  const m = await postMessage(url(), owner, ch, { content: "long task", ...extra });
  const res = await rest<{ data: ReceivedJson[] }>(url(), "POST", `/v1/channels/${ch}/messages:receive`, { key: worker, body: { lease_seconds: 60 } });
  const [lease] = res.body.data;
  return { ch, id: m.id, token: lease!.lease_token };
};
const report = (id: string, body: Record<string, unknown>, key = worker) =>
  rest<{ message: WithProgress; error?: string }>(url(), "POST", `/v1/messages/${id}/progress`, { key, body });

/** A GET /v1/messages/{id}/events stream: its events as they come, until it ends or is closed. */
function events(id: string, lastEventId?: string) {
  const got: Array<{ id: string; event: string; data: WithProgress | { cursor: string } }> = [];
  let ended = false;
  const req = http.get(`${url()}/v1/messages/${id}/events`, { headers: { "X-API-Key": owner, ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}) } }, (res) => {
    let buffer = "";
    res.setEncoding("utf8");
    res.on("data", (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = Object.fromEntries(block.split("\n").filter((l) => !l.startsWith(":")).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]));
        if (fields.event !== undefined) got.push({ id: fields.id ?? "", event: fields.event, data: JSON.parse(fields.data ?? "null") });
      }
    });
    res.on("end", () => (ended = true));
  });
  return { got, ended: () => ended, close: () => req.destroy() };
}

async function until(condition: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("POST /v1/messages/{id}/progress", () => {
  it("stores the holder's data and text on the message, with when", async () => {
    const { id, token } = await leased();
    const res = await report(id, { lease_token: token, data: { step: 2, of: 5 }, text: "parsing" });
    expect(res.status).toBe(200);
    expect(res.body.message.progress).toMatchObject({ data: { step: 2, of: 5 }, text: "parsing" });
    expect(Date.parse(res.body.message.progress!.updated_at)).toBeGreaterThan(0);
  });

  it("replaces the text, or with append adds to it, and keeps the data when only text is sent", async () => {
    const { id, token } = await leased();
    await report(id, { lease_token: token, data: { step: 1 }, text: "one" });
    await report(id, { lease_token: token, text: " two", append: true });
    expect((await report(id, { lease_token: token, text: " three", append: true })).body.message.progress).toMatchObject({ data: { step: 1 }, text: "one two three" });
    expect((await report(id, { lease_token: token, text: "over" })).body.message.progress!.text).toBe("over");
  });

  it("keeps the last 64 KiB of appended text, cut at a character's start", async () => {
    const { id, token } = await leased();
    await report(id, { lease_token: token, text: "é".repeat(20_000) });
    await report(id, { lease_token: token, text: "€".repeat(20_000), append: true });
    const text = (await report(id, { lease_token: token, text: "end", append: true })).body.message.progress!.text;
    expect(Buffer.byteLength(text, "utf8")).toBeLessThanOrEqual(65_536);
    expect(Buffer.byteLength(text, "utf8")).toBeGreaterThan(65_530);
    expect(text.endsWith("€end")).toBe(true);
    expect(text).not.toContain("\uFFFD");
  });

  it("moves updated_at forward at every report", async () => {
    const { id, token } = await leased();
    const times: number[] = [];
    for (let i = 0; i < 5; i++) times.push(Date.parse((await report(id, { lease_token: token, text: String(i) })).body.message.progress!.updated_at) * 1000);
    const raw = await rest<WithProgress>(url(), "GET", `/v1/messages/${id}`, { key: owner });
    expect(raw.body.progress!.text).toBe("4");
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  it.each([
    ["another key", (t: string) => ({ key: other, body: { lease_token: t, text: "x" } })],
    ["a token that is not the lease's", () => ({ key: worker, body: { lease_token: "lease_nope", text: "x" } })],
  ])("refuses %s with 409 not_lease_holder", async (_what, make) => {
    const { id, token } = await leased();
    const { key, body } = make(token);
    const res = await report(id, body, key);
    expect(res.status).toBe(409);
    expect(res.body.error).toBe("not_lease_holder");
  });

  it("refuses a holder whose lease was released, with 409 not_lease_holder", async () => {
    const { id, token } = await leased();
    await rest(url(), "POST", `/v1/messages/${id}/release`, { key: worker, body: {} });
    expect((await report(id, { lease_token: token, text: "late" })).body.error).toBe("not_lease_holder");
  });

  it.each([
    [{}, "invalid_progress"],
    [{ data: { blob: "x".repeat(17_000) } }, "progress_too_large"],
    [{ text: "x".repeat(65_537) }, "progress_too_large"],
  ])("refuses %j with 422 %s", async (extra, code) => {
    const { id, token } = await leased();
    const res = await report(id, { lease_token: token, ...extra });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe(code);
  });
});

describe("GET /v1/messages/{id}?wait=&progress_after=", () => {
  it("answers at the next progress report, not at the end of the wait", async () => {
    const { id, token } = await leased();
    const first = (await report(id, { lease_token: token, text: "one" })).body.message.progress!.updated_at;
    const started = Date.now();
    const waiting = rest<WithProgress>(url(), "GET", `/v1/messages/${id}?wait=20&progress_after=${encodeURIComponent(first)}`, { key: owner });
    await new Promise((r) => setTimeout(r, 200));
    await report(id, { lease_token: token, text: " two", append: true });
    const got = await waiting;
    expect(got.body.progress!.text).toBe("one two");
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("refuses a progress_after that is not a time with 422 invalid_progress_after", async () => {
    const { id } = await leased();
    const res = await rest(url(), "GET", `/v1/messages/${id}?wait=1&progress_after=yesterday`, { key: owner });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe("invalid_progress_after");
  });
});

describe("GET /v1/messages/{id}/events", () => {
  it("sends the state, then each progress report, then the result and the final state, and ends", async () => {
    const { id, token } = await leased();
    const stream = events(id);
    try {
      await until(() => stream.got.some((e) => e.event === "state"));
      expect(stream.got.map((e) => e.event)).toEqual(["open", "state"]);
      await report(id, { lease_token: token, data: { pct: 50 }, text: "half" });
      await until(() => stream.got.some((e) => e.event === "progress"));
      expect((stream.got.at(-1)!.data as WithProgress).progress).toMatchObject({ data: { pct: 50 }, text: "half" });
      await rest(url(), "POST", `/v1/messages/${id}/ack`, { key: worker, body: { result: "done" } });
      await until(() => stream.ended());
      expect(stream.got.map((e) => e.event)).toEqual(["open", "state", "progress", "state", "result"]);
      expect(stream.got.at(-1)!.data).toMatchObject({ state: "acknowledged", result: "done" });
    } finally {
      stream.close();
    }
  });

  it("resumes after Last-Event-ID with only what changed since", async () => {
    const { id, token } = await leased();
    const first = events(id);
    await until(() => first.got.some((e) => e.event === "state"));
    const lastId = first.got.at(-1)!.id;
    first.close();
    await report(id, { lease_token: token, text: "while away" });
    const again = events(id, lastId);
    try {
      await until(() => again.got.some((e) => e.event === "progress"));
      expect(again.got.map((e) => e.event)).toEqual(["open", "progress"]);
    } finally {
      again.close();
    }
  });

  it("tells the holder following its task that the task was cancelled", async () => {
    const { id } = await leased();
    const stream = events(id);
    try {
      await until(() => stream.got.some((e) => e.event === "state"));
      await rest(url(), "POST", `/v1/messages/${id}:cancel`, { key: owner, body: {} });
      await until(() => stream.got.filter((e) => e.event === "state").length === 2);
      expect(stream.got.at(-1)!.data).toMatchObject({ state: "in_flight", cancel_requested: true });
    } finally {
      stream.close();
    }
  });

  it("answers 404 message_not_found before the stream opens", async () => {
    const res = await rest(url(), "GET", "/v1/messages/00000000-0000-4000-8000-000000000000/events", { key: owner });
    expect(res.status).toBe(404);
  });
});

describe("gRPC WatchMessage", () => {
  it("streams the state, a progress report and the result, then ends", async () => {
    const { id, token } = await leased();
    const client = createClient(MessageService, createGrpcTransport({ baseUrl: url() }));
    const seen: string[] = [];
    const reading = (async () => {
      for await (const e of client.watchMessage({ messageId: id }, { headers: { "x-api-key": owner } })) {
        seen.push(e.event);
        if (e.event === "state" && seen.length === 2) await report(id, { lease_token: token, text: "working" });
        if (e.event === "progress") await rest(url(), "POST", `/v1/messages/${id}/ack`, { key: worker, body: { result: "ok" } });
      }
    })();
    await reading;
    expect(seen).toEqual(["open", "state", "progress", "state", "result"]);
  });
});

describe("across service processes", () => {
  it("wakes a follower waiting on another process when the worker reports progress on this one", async () => {
    const a = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn" });
    const b = await startTestServer({ AGENTBUS_LOG_LEVEL: "warn", DATABASE_URL: a.databaseUrl });
    try {
      const key = await mintKey(a.url, "progress-two-processes");
      const ch = await createChannel(a.url, key);
      const m = await postMessage(a.url, key, ch, { content: "long task" });
      const [lease] = (await rest<{ data: ReceivedJson[] }>(a.url, "POST", `/v1/channels/${ch}/messages:receive`, { key, body: { lease_seconds: 60 } })).body.data;
      const first = (await rest<{ message: WithProgress }>(a.url, "POST", `/v1/messages/${m.id}/progress`, { key, body: { lease_token: lease!.lease_token, text: "one" } })).body.message.progress!;
      const started = Date.now();
      const waiting = rest<WithProgress>(b.url, "GET", `/v1/messages/${m.id}?wait=20&progress_after=${encodeURIComponent(first.updated_at)}`, { key });
      await new Promise((r) => setTimeout(r, 300));
      await rest(a.url, "POST", `/v1/messages/${m.id}/progress`, { key, body: { lease_token: lease!.lease_token, text: " two", append: true } });
      expect((await waiting).body.progress!.text).toBe("one two");
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
