/**
 * Fairness between keys for the async jobs (docs/decisions.md#job-fairness), with the real
 * worker and the real Chromium: one key's heavy documents do not hold back
 * another key's small one, and one key cannot queue without bound.
 * The property is the order jobs run in (what the victim's job overtakes),
 * not a latency: documents are just heavy enough that the busy key's queue
 * cannot drain while the other key's job goes through.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getJob, submitPdf, submitPdfJob, waitForJob } from "../support/pdf.js";
import { mintKey, startTestServer, type TestServer } from "../support/server.js";
import { eventually } from "../support/eventually.js";

/** Quiet maintenance: these tests only need the pdf worker. */
const jobs = { processEveryMs: 250, intervals: { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } };

/** A document that takes Chromium a while to lay out and print (a long table). */
const heavy = (n: number) =>
  `<h1>Report ${n}</h1><table>${Array.from({ length: 1500 }, (_, i) => `<tr><td>${i}</td><td>${"lorem ipsum ".repeat(8)}</td><td>${i * n}</td></tr>`).join("")}</table>`;
const oneLine = { content: "<p>one line</p>" };

/** Submits and waits for the job to complete. */
async function render(base: string, key: string, body: Record<string, unknown>): Promise<void> {
  const job = await waitForJob(base, key, await submitPdfJob(base, key, body), 60_000);
  expect(job.error).toBeNull();
}

/** Waits until the job left the queue (it is rendering, or done). */
async function started(base: string, key: string, id: number): Promise<void> {
  await eventually(async () => (await getJob(base, key, id)).body.status !== "queued", 60_000, 20);
}

async function statuses(base: string, key: string, ids: number[]): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await getJob(base, key, id)).body.status));
}

describe("scheduling between keys", () => {
  let server: TestServer;
  beforeAll(async () => {
    // Two render slots, one of which one key may hold.
    server = await startTestServer(
      { AGENTBUS_WORKERS: "true", AGENTBUS_PDF_CONCURRENCY: "2", AGENTBUS_JOBS_MAX_RUNNING_PER_KEY: "1" },
      { jobs },
    );
  });
  afterAll(async () => {
    await server?.close();
  });

  it("renders a key's one-line PDF in the free slot while another key's heavy documents wait behind their one", async () => {
    const victim = await mintKey(server.url);
    const attacker = await mintKey(server.url);
    await render(server.url, victim, oneLine); // Chromium started and warm

    const heavyIds = [];
    for (let n = 1; n <= 4; n++) heavyIds.push(await submitPdfJob(server.url, attacker, { content: heavy(n) }));
    await started(server.url, attacker, heavyIds[0]!);
    await render(server.url, victim, oneLine);
    const attackerStatuses = await statuses(server.url, attacker, heavyIds);
    // The victim did not wait for the attacker's queue: most of it is still queued behind its one slot.
    expect(attackerStatuses.filter((s) => s === "queued").length, attackerStatuses.join(",")).toBeGreaterThanOrEqual(2);
    for (const id of heavyIds) expect((await waitForJob(server.url, attacker, id, 60_000)).status).toBe("completed");
  }, 90_000);
});

describe("one slot, interleaved", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_PDF_CONCURRENCY: "1" }, { jobs });
  });
  afterAll(async () => {
    await server?.close();
  });

  // The busy key holds the one slot; the other key's job takes the slot kept
  // in reserve for a key with none running (docs/decisions.md#job-fairness).
  it("runs the other key's job before the rest of the busy key's queue, when the busy key holds the one slot", async () => {
    const victim = await mintKey(server.url);
    const attacker = await mintKey(server.url);
    await render(server.url, victim, oneLine);
    const heavyIds = [];
    for (let n = 1; n <= 3; n++) heavyIds.push(await submitPdfJob(server.url, attacker, { content: heavy(n) }));
    await started(server.url, attacker, heavyIds[0]!);
    await render(server.url, victim, oneLine);
    // Only the document that was rendering when the victim arrived went first.
    const after = await statuses(server.url, attacker, heavyIds);
    expect(after.slice(1).every((s) => s !== "completed"), after.join(",")).toBe(true);
    for (const h of heavyIds) expect((await waitForJob(server.url, attacker, h, 60_000)).status).toBe("completed");
  }, 90_000);
});

describe("per-key cap on unfinished jobs", () => {
  let server: TestServer;
  beforeAll(async () => {
    // No workers: jobs stay queued.
    server = await startTestServer({ AGENTBUS_JOBS_MAX_QUEUED_PER_KEY: "3" });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("answers 429 job_limit_exceeded with Retry-After and a suggestion beyond the cap, for that key only", async () => {
    const busy = await mintKey(server.url);
    const other = await mintKey(server.url);
    // Concurrent submissions cannot slip past the cap together.
    const answers = await Promise.all(Array.from({ length: 8 }, () => submitPdf(server.url, busy, oneLine)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(3);
    const refused = answers.filter((a) => a.status !== 202);
    expect(refused).toHaveLength(5);
    for (const r of refused) {
      expect(r.status).toBe(429);
      expect(r.body).toMatchObject({ error: "job_limit_exceeded", retry_after: 5, max_unfinished_jobs: 3 });
      expect(r.body.suggestion).toBeTruthy();
      expect(r.headers.get("retry-after")).toBe("5");
    }
    expect((await submitPdf(server.url, other, oneLine)).status).toBe(202);
  });
});
