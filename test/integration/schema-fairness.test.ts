/**
 * docs/decisions.md#schemas-off-thread: the schema thread is shared by every
 * key, and its jobs take turns by key. Key A keeps the thread busy with
 * costly metadata checks (30 batches of 10 posts at once, against a schema at
 * the node bound) while key B posts to its own channel with a small schema:
 * B's median post may take at most three times its median with the service
 * idle, measured in the same test. Before the turns, the thread was one queue
 * in arrival order and B waited behind A's whole backlog (seconds in
 * production; here about ten times its idle median).
 *
 * Runs in vitest's "alone" project (vitest.config.ts): on two cores, other
 * test files would be measured along with the service.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { MAX_SCHEMA_JOBS_PER_KEY } from "../../src/domain/json-schema-thread.js";
import { MAX_SCHEMA_NODES } from "../../src/domain/json-schema.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const server = useTestServer();
const BATCH = 10;
let keyA: string;
let keyB: string;
let channelA: string;
let channelB: string;

/**
 * Every property of the metadata is checked against as many $refs as the
 * node bound allows, each a linear-time pattern.
 */
const costlySchema = {
  required: ["n"],
  definitions: { s: { anyOf: [{ type: "string", pattern: "^(a+)+$" }, { type: "integer", minimum: 0 }] } },
  additionalProperties: { allOf: Array.from({ length: Math.floor(MAX_SCHEMA_NODES / 12) }, () => ({ $ref: "#/definitions/s" })) },
};
/**
 * One post: every property runs through the whole schema, under a
 * millisecond of the thread, hundreds of times B's check. A job on the thread
 * is never interrupted for another key's, so B may still wait for the one A
 * job running there; what the turns remove, and this test measures, is the
 * backlog behind it, which grows with how many posts A sends at once.
 */
const costly = (n: number | undefined) => ({
  content: "x",
  metadata: { ...(n === undefined ? {} : { n }), ...Object.fromEntries(Array.from({ length: 4 }, (_, i) => [`k${i}`, "a".repeat(300)])) },
});
/**
 * A posts in batches: each item is checked on the thread in turn, so one
 * request keeps the thread busy for BATCH jobs, and A floods the thread with
 * schema checks rather than the event loop with requests. The last item
 * lacks `n`: the batch fails its schema (one violation, after the whole
 * check), so nothing of A's is stored.
 */
const costlyBatch = { messages: [...Array.from({ length: BATCH - 1 }, (_, i) => costly(i)), costly(undefined)] };

/** Batches at once, within what one key may have queued (a batch has one item on the thread at a time). */
const FLOOD = MAX_SCHEMA_JOBS_PER_KEY - 2;
const SAMPLES = 20;

beforeAll(async () => {
  keyA = await mintKey(server.url);
  keyB = await mintKey(server.url);
  const create = async (key: string, name: string, metadataSchema: object) => {
    const res = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name, mode: "broadcast", metadata_schema: metadataSchema } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.id;
  };
  channelA = await create(keyA, "costly", costlySchema);
  channelB = await create(keyB, "small", { type: "object", properties: { n: { type: "integer" } }, required: ["n"] });
  // Compiles both (cached on the thread), and warms every path the measured posts take.
  expect((await postA()).status).toBe(422);
  for (let i = 0; i < 5; i++) await postB(i);
});

const postA = () => rest<{ error: string }>(server.url, "POST", `/v1/channels/${channelA}/messages:batchCreate`, { key: keyA, body: costlyBatch });

async function postB(n: number): Promise<number> {
  const started = performance.now();
  const res = await rest(server.url, "POST", `/v1/channels/${channelB}/messages`, { key: keyB, body: { content: "x", metadata: { n } } });
  // Real time: this test measures the service's latency.
  const took = performance.now() - started;
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return took;
}

/** B's posts one after another, as one agent sends them. */
async function samplesOfB(): Promise<number[]> {
  const took: number[] = [];
  for (let i = 0; i < SAMPLES; i++) took.push(await postB(i));
  return took;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

describe("schema checks take turns by key", () => {
  it("keeps another key's schema-checked post within 3x its idle median while one key floods costly checks", { timeout: 30_000 }, async () => {
    const idleBefore = await samplesOfB();

    let flooding = true;
    const outcomes = new Map<string, number>();
    let answered = 0;
    const flood = Array.from({ length: FLOOD }, async () => {
      while (flooding) {
        const res = await postA();
        const outcome = `${res.status} ${res.body.error}`;
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
        answered++;
      }
    });
    // Until A's backlog has been on the thread a while: a round of its batches is answered.
    while (answered < FLOOD) await new Promise((r) => setTimeout(r, 5));
    const busy = await samplesOfB();
    flooding = false;
    await Promise.all(flood);
    // Idle before and after, pooled: the machine's own drift during the test weighs on both sides.
    const idle = median([...idleBefore, ...(await samplesOfB())]);

    const underFlood = median(busy);
    const report = JSON.stringify({ idleMedianMs: idle, floodMedianMs: underFlood, busyMs: busy.map(Math.round), a: Object.fromEntries(outcomes) });
    // A was refused on its schema every time (nothing of A's reached the database), never for its number of checks.
    expect([...outcomes.keys()], report).toEqual(["422 metadata_validation_failed"]);
    expect(underFlood, report).toBeLessThanOrEqual(3 * idle);
  });
});
