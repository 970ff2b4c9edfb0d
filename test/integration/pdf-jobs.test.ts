/**
 * The job API around PDF jobs (docs/decisions.md#job-record, #pdf-jobs,
 * #jobs-private, #error-body, #size-limits): what a submission is refused for,
 * who sees a job, the download before completion and after expiry, Chromium
 * missing, Idempotency-Key, the job sweep, and the same over gRPC. Rendering
 * itself is in pdf-rendering.test.ts.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { JobKind, JobStatus } from "../../gen/agentbus/v1/job_pb.js";
import { JobService, PdfFormat } from "../../gen/agentbus/v1/job_service_pb.js";
import { RESULT_TTL_SECONDS, TOMBSTONE_DAYS } from "../../src/model/jobs.js";
import { jobSweepJob } from "../../src/jobs/job-sweep.js";
import { createLogger } from "../../src/platform/logger.js";
import { Db } from "../../src/store/db.js";
import { PgJobStore } from "../../src/store/jobs.js";
import { PgPurgeStore, purge } from "../../src/store/purge.js";
import { AdjustableClock } from "../support/clock.js";
import { download, getJob, pageCount, pdfText, submitPdf, submitPdfJob, waitForJob } from "../support/pdf.js";
import { mintKey, rest, startTestServer, useTestServer } from "../support/server.js";

const DAY = 86_400;
const errorCode = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.error;

/** Jobs stay queued here: no workers. */
const idle = useTestServer();
let idleKey: string;
beforeAll(async () => {
  idleKey = await mintKey(idle.url);
});

describe("submission", () => {
  it("refuses a missing, blank or non-string content with 422 and a suggestion", async () => {
    const missing = await submitPdf(idle.url, idleKey, { format: "html" });
    expect(missing.status).toBe(422);
    expect(missing.body).toMatchObject({ error: "missing_field", field: "content" });
    expect(missing.body.suggestion).toBeTruthy();
    expect(missing.body.documentation_url).toBe("/docs/errors#missing_field");

    const blank = await submitPdf(idle.url, idleKey, { content: " \n\t " });
    expect(blank.status).toBe(422);
    expect(blank.body).toMatchObject({ error: "invalid_string", field: "content" });
    expect(blank.body.suggestion).toBeTruthy();

    const wrongType = await submitPdf(idle.url, idleKey, { content: 42 });
    expect(wrongType.status).toBe(422);
    expect(wrongType.body.suggestion).toBeTruthy();

    const nullContent = await submitPdf(idle.url, idleKey, { content: null });
    expect(nullContent.status).toBe(422);
    expect(nullContent.body.error).toBe("missing_field");
  });

  it("refuses an unknown format with 422 invalid_format, and a non-string css with 422", async () => {
    const format = await submitPdf(idle.url, idleKey, { content: "# x", format: "pdf" });
    expect(format.status).toBe(422);
    expect(format.body).toMatchObject({ error: "invalid_format" });
    expect(format.body.suggestion).toBe('Use "html" or "markdown".');

    const css = await submitPdf(idle.url, idleKey, { content: "# x", css: { color: "red" } });
    expect(css.status).toBe(422);
    expect(css.body.suggestion).toBeTruthy();
  });

  it("accepts bodies above the 1 MiB default up to 10 MiB, and answers 413 beyond", async () => {
    const big = await submitPdf(idle.url, idleKey, { content: `<p>${"a".repeat(3 * 1024 * 1024)}</p>` });
    expect(big.status).toBe(202);

    const tooBig = await submitPdf(idle.url, idleKey, { content: "a".repeat(10 * 1024 * 1024 + 1) });
    expect(tooBig.status).toBe(413);
    expect(tooBig.body).toMatchObject({ error: "payload_too_large", max_body_bytes: 10 * 1024 * 1024 });
  });

  it("requires an API key", async () => {
    const res = await rest(idle.url, "POST", "/v1/pdf/generate", { body: { content: "x" } });
    expect(res.status).toBe(401);
    expect(res.body.error).toBe("unauthorized");
  });

  it("queues the job: GET /jobs/{id} shows it queued with every field, the download answers 409", async () => {
    const id = await submitPdfJob(idle.url, idleKey, { content: "# Draft", format: "markdown" });
    const job = await getJob(idle.url, idleKey, id);
    expect(job.status).toBe(200);
    expect(job.body).toEqual({
      job_id: id,
      kind: "pdf",
      status: "queued",
      result: null,
      error: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/) as string,
      updated_at: job.body.created_at,
      completed_at: null,
      expires_at: null,
      trace: { traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/) as string, tracestate: null },
    });
    const early = await download(idle.url, idleKey, id);
    expect(early.status).toBe(409);
    expect(early.json).toMatchObject({ error: "job_not_completed" });
    expect(early.json?.suggestion).toBe("Poll GET /jobs/{job_id} until status is completed.");
    expect((await download(idle.url, idleKey, id, "/api/v1")).status).toBe(409);

    // Its Agenda job was written with it.
    const { rows } = await idle.app.pool.query("SELECT name, data FROM agenda_jobs WHERE data->>'job_id' = $1", [String(id)]);
    expect(rows).toEqual([{ name: "pdf", data: { job_id: id } }]);
  });

  it("gives the same job for a replayed Idempotency-Key, and writes it once", async () => {
    const headers = { "Idempotency-Key": `pdf-${Math.random()}` };
    const first = await submitPdf(idle.url, idleKey, { content: "<p>once</p>" }, headers);
    const again = await submitPdf(idle.url, idleKey, { content: "<p>once</p>" }, headers);
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.headers.get("x-idempotent-replay")).toBe("true");
    expect(again.body).toEqual(first.body);
    const { rows } = await idle.app.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM agenda_jobs WHERE data->>'job_id' = $1", [
      String(first.body.job_id),
    ]);
    expect(rows[0]!.n).toBe(1);
  });
});

describe("visibility (jobs-private)", () => {
  /** GET /jobs/{id} read as an error body. */
  const jobError = (key: string, id: number | string) => rest(idle.url, "GET", `/jobs/${id}`, { key });

  it("shows a job only to the key that submitted it; everyone else gets 404 job_not_found", async () => {
    const id = await submitPdfJob(idle.url, idleKey, { content: "<p>mine</p>" });
    const other = await mintKey(idle.url);
    const job = await jobError(other, id);
    expect(job.status).toBe(404);
    expect(job.body).toMatchObject({ error: "job_not_found" });
    expect(job.body.suggestion).toBeTruthy();
    expect((await download(idle.url, other, id)).json).toMatchObject({ error: "job_not_found" });
    expect((await download(idle.url, other, id, "/api/v1")).status).toBe(404);

    // Exactly like an id that does not exist.
    expect((await jobError(idleKey, 987654321)).body.error).toBe("job_not_found");
    expect((await jobError(idleKey, 0)).body.error).toBe("job_not_found");
    expect((await download(idle.url, idleKey, 987654321)).status).toBe(404);
    expect((await rest(idle.url, "GET", `/jobs/${id}`)).status).toBe(401);
  });

  it("answers 422 invalid_job_id for an id that is not an integer", async () => {
    const bad = await jobError(idleKey, "abc");
    expect(bad.status).toBe(422);
    expect(bad.body).toMatchObject({ error: "invalid_job_id" });
    expect(bad.body.suggestion).toBeTruthy();
    expect((await download(idle.url, idleKey, "1.5")).json).toMatchObject({ error: "invalid_job_id" });
  });
});

describe("without Chromium", () => {
  it("answers 503 pdf_renderer_unavailable at submission (after checking the input)", async () => {
    const server = await startTestServer({ AGENTBUS_CHROMIUM_PATH: "/nonexistent/chromium" });
    try {
      const key = await mintKey(server.url);
      const res = await submitPdf(server.url, key, { content: "<p>x</p>" });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ error: "pdf_renderer_unavailable" });
      expect(res.body.suggestion).toBeTruthy();
      // Bad input is still a 422, never a 5xx.
      expect((await submitPdf(server.url, key, { content: "" })).status).toBe(422);
      const { rows } = await server.app.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs");
      expect(rows[0]!.n).toBe(0);
    } finally {
      await server.close();
    }
  });
});

describe("the job sweep", () => {
  it("queues an Agenda job again for an unfinished job that lost its own", async () => {
    const id = await submitPdfJob(idle.url, idleKey, { content: "<p>orphan</p>" });
    await idle.app.pool.query("DELETE FROM agenda_jobs WHERE data->>'job_id' = $1", [String(id)]);
    const db = new Db(idle.app.pool);
    const later = new AdjustableClock();
    later.advanceSeconds(60);
    const run = { data: {}, signal: new AbortController().signal, touch: async () => {}, logger: createLogger("silent") };
    await jobSweepJob.run(run, { jobs: new PgJobStore(db, "test"), purge: new PgPurgeStore(db), clock: later, logger: createLogger("silent") });
    const { rows } = await idle.app.pool.query("SELECT name FROM agenda_jobs WHERE data->>'job_id' = $1", [String(id)]);
    expect(rows).toEqual([{ name: "pdf" }]);
    // A second sweep finds it covered.
    await jobSweepJob.run(run, { jobs: new PgJobStore(db, "test"), purge: new PgPurgeStore(db), clock: later, logger: createLogger("silent") });
    const again = await idle.app.pool.query("SELECT name FROM agenda_jobs WHERE data->>'job_id' = $1", [String(id)]);
    expect(again.rows).toHaveLength(1);
  });
});

describe("with workers", () => {
  const clock = new AdjustableClock();
  const server = useTestServer(
    { AGENTBUS_WORKERS: "true" },
    { clock, jobs: { processEveryMs: 1_000, intervals: { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } } },
  );
  let key: string;
  beforeAll(async () => {
    key = await mintKey(server.url);
  });
  afterEach(() => clock.reset());

  it("keeps the PDF 24 hours, then answers 410 result_expired, and 404 once the job is deleted", async () => {
    const db = new Db(server.app.pool);
    const id = await submitPdfJob(server.url, key, { content: "<p>short-lived</p>" });
    const done = await waitForJob(server.url, key, id);
    expect(done.status).toBe("completed");

    clock.advanceSeconds(RESULT_TTL_SECONDS - 60);
    expect((await download(server.url, key, id)).status).toBe(200);

    clock.advanceSeconds(120);
    const expired = await download(server.url, key, id);
    expect(expired.status).toBe(410);
    expect(expired.json).toMatchObject({ error: "result_expired" });
    expect(expired.json?.suggestion).toBeTruthy();
    expect((await download(server.url, key, id, "/api/v1")).status).toBe(410);
    // The job is still there, without its result.
    const job = (await getJob(server.url, key, id)).body;
    expect(job).toMatchObject({ status: "completed", result: null, error: null, completed_at: done.completed_at });

    // The purge empties it and keeps the tombstone: still 410.
    const counts = await purge(db, clock.now());
    expect(counts.expiredJobResults).toBeGreaterThanOrEqual(1);
    const { rows } = await server.app.pool.query("SELECT input, result, pdf FROM jobs WHERE id = $1", [id]);
    expect(rows).toEqual([{ input: null, result: null, pdf: null }]);
    expect((await download(server.url, key, id)).status).toBe(410);
    expect((await purge(db, clock.now())).expiredJobResults).toBe(0);

    clock.advanceSeconds(TOMBSTONE_DAYS * DAY);
    expect((await purge(db, clock.now())).deletedJobs).toBeGreaterThanOrEqual(1);
    expect((await getJob(server.url, key, id)).status).toBe(404);
    expect((await download(server.url, key, id)).status).toBe(404);
  });

  it("runs the same over gRPC: CreatePdfJob, GetJob, DownloadPdf, with the REST error codes", async () => {
    const client = createClient(JobService, createGrpcTransport({ baseUrl: server.url }));
    const headers = { "x-api-key": key };
    const submitted = await client.createPdfJob({ content: "# Over gRPC\n\nRendered **bold**.", format: PdfFormat.MARKDOWN, css: "h1 { color: navy }" }, { headers });
    expect(typeof submitted.jobId).toBe("bigint");

    let job = await client.getJob({ jobId: submitted.jobId }, { headers });
    const deadline = performance.now() + 20_000;
    while (job.status !== JobStatus.COMPLETED && job.status !== JobStatus.FAILED && performance.now() < deadline) {
      // Real time: the job is rendered by the real job runner and a real Chromium.
      await new Promise((r) => setTimeout(r, 50));
      job = await client.getJob({ jobId: submitted.jobId }, { headers });
    }
    expect(job.status).toBe(JobStatus.COMPLETED);
    expect(job.kind).toBe(JobKind.PDF);
    expect(job.result).toEqual({ case: "pdf", value: expect.objectContaining({ url: `/v1/pdf/${submitted.jobId}` }) as unknown });
    expect(job.completedAt).toBeDefined();

    const body = await client.downloadPdf({ jobId: submitted.jobId }, { headers });
    expect(body.contentType).toBe("application/pdf");
    const pdf = Buffer.from(body.data);
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-");
    expect(await pageCount(pdf)).toBe(1);
    expect(await pdfText(pdf)).toContain("Over gRPC");

    const rival = await mintKey(server.url);
    const hidden = await client.getJob({ jobId: submitted.jobId }, { headers: { "x-api-key": rival } }).catch((e: unknown) => e);
    expect(ConnectError.from(hidden).code).toBe(Code.NotFound);
    expect(errorCode(hidden)).toBe("job_not_found");

    const blank = await client.createPdfJob({ content: "  " }, { headers }).catch((e: unknown) => e);
    expect(ConnectError.from(blank).code).toBe(Code.InvalidArgument);
    expect(errorCode(blank)).toBe("invalid_string");
    const badFormat = await client.createPdfJob({ content: "x", format: 7 as PdfFormat }, { headers }).catch((e: unknown) => e);
    expect(errorCode(badFormat)).toBe("invalid_format");
  });

  it("over gRPC: 409 before completion is FailedPrecondition, and a body above 1 MiB is accepted", async () => {
    const client = createClient(JobService, createGrpcTransport({ baseUrl: idle.url }));
    const headers = { "x-api-key": idleKey };
    const big = await client.createPdfJob({ content: `<p>${"b".repeat(3 * 1024 * 1024)}</p>` }, { headers });
    const early = await client.downloadPdf({ jobId: big.jobId }, { headers }).catch((e: unknown) => e);
    expect(ConnectError.from(early).code).toBe(Code.FailedPrecondition);
    expect(errorCode(early)).toBe("job_not_completed");
  });
});
