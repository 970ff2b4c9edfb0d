/** The async job use cases (src/domain/jobs.ts) over an in-memory JobStore. */
import { describe, expect, it } from "vitest";
import { AsyncJobs } from "../../src/domain/jobs.js";
import type { Caller } from "../../src/model/caller.js";
import { ApiError } from "../../src/model/errors.js";
import { resultExpiry } from "../../src/model/jobs.js";
import { ManualClock } from "../support/clock.js";
import { FakeJobStore } from "../support/fakes/jobs.js";

const caller = (keyId: string): Caller => ({ keyId, agentLabel: keyId, ownerId: keyId });
const alice = caller("key-alice");
const bob = caller("key-bob");

function setup(maxUnfinished = 3) {
  const store = new FakeJobStore();
  const clock = new ManualClock();
  return { store, clock, jobs: new AsyncJobs(store, clock, maxUnfinished) };
}

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe("AsyncJobs", () => {
  it("creates a job queued and queues its run", async () => {
    const { store, jobs } = setup();
    const id = await jobs.submit(alice, "pdf", { content: "<p>x</p>" });
    expect((await jobs.get(alice, id)).status).toBe("queued");
    expect(store.queued).toEqual([{ kind: "pdf", id }]);
  });

  it("refuses a key's submission beyond its unfinished jobs with 429 job_limit_exceeded and Retry-After, for that key only", async () => {
    const { jobs } = setup(2);
    await jobs.submit(alice, "pdf", {});
    await jobs.submit(alice, "transcript", {});
    const err = await refusal(jobs.submit(alice, "pdf", {}));
    expect(err.code).toBe("job_limit_exceeded");
    expect(err.details).toEqual({ retry_after: 5, max_unfinished_jobs: 2 });
    expect(err.headers).toEqual({ "Retry-After": "5" });
    await expect(jobs.submit(bob, "pdf", {})).resolves.toBeGreaterThan(0);
  });

  it("answers job_not_found for another key's job, as for an unknown or impossible id", async () => {
    const { jobs } = setup();
    const id = await jobs.submit(alice, "pdf", {});
    expect((await refusal(jobs.get(bob, id))).code).toBe("job_not_found");
    expect((await refusal(jobs.get(alice, id + 1))).code).toBe("job_not_found");
    expect((await refusal(jobs.get(alice, 0n))).code).toBe("job_not_found");
    expect((await refusal(jobs.get(alice, 2n ** 60n))).code).toBe("job_not_found");
  });

  it("hides a completed job's result once it has expired", async () => {
    const { store, clock, jobs } = setup();
    const id = await jobs.submit(alice, "pdf", {});
    await store.claim(id, clock.now());
    await store.complete(id, { result: { url: "/v1/pdf/1" }, pdf: new Uint8Array([1]) }, clock.now(), resultExpiry(clock.now()));
    expect((await jobs.get(alice, id)).result).toEqual({ url: "/v1/pdf/1" });
    await clock.advance((24 * 60 * 60 + 1) * 1000);
    expect((await jobs.get(alice, id)).result).toBeNull();
  });

  it("refuses the PDF with job_not_completed while the job is queued", async () => {
    const { jobs } = setup();
    const id = await jobs.submit(alice, "pdf", {});
    expect((await refusal(jobs.pdf(alice, id))).code).toBe("job_not_completed");
  });

  it("refuses the PDF with job_failed after the job failed", async () => {
    const { store, clock, jobs } = setup();
    const id = await jobs.submit(alice, "pdf", {});
    await store.fail(id, { error: "invalid_input", message: "no" }, clock.now(), resultExpiry(clock.now()));
    expect((await refusal(jobs.pdf(alice, id))).code).toBe("job_failed");
  });

  it("downloads a completed job's PDF for 24 hours, then answers result_expired", async () => {
    const { store, clock, jobs } = setup();
    const id = await jobs.submit(alice, "pdf", {});
    await store.claim(id, clock.now());
    await store.complete(id, { result: {}, pdf: new Uint8Array([37, 80, 68, 70]) }, clock.now(), resultExpiry(clock.now()));
    expect([...(await jobs.pdf(alice, id))]).toEqual([37, 80, 68, 70]);
    await clock.advance((24 * 60 * 60 + 1) * 1000);
    expect((await refusal(jobs.pdf(alice, id))).code).toBe("result_expired");
  });

  it("answers job_not_found for the PDF of a job of another kind", async () => {
    const { jobs } = setup();
    const id = await jobs.submit(alice, "transcript", {});
    expect((await refusal(jobs.pdf(alice, id))).code).toBe("job_not_found");
  });
});
