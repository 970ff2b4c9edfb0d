/**
 * Job-posting parse (docs/decisions.md#parse-jobs) and transcript
 * (#transcript-jobs) jobs end to end, through the
 * real server and its workers, against local fakes of the language-model
 * provider, a job board and the video host: POST → 202 {job_id} → poll
 * GET /jobs/{id} → completed with the result, or failed with {error,
 * message}. Also the submission errors (422, 503 llm_not_configured), the
 * retries of a failing model, and the private-address rule with and
 * without AGENTBUS_ALLOW_PRIVATE_TARGETS.
 */
import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getJob, waitForJob, type JobJson } from "../support/pdf.js";
import { QUIET_JOBS, startJobWorld, type JobWorld } from "../support/job-fakes.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";
import { POSTING_FACTS, type FakeJobBoard } from "../fakes/job-board.js";
import type { FakeOpenAI } from "../fakes/openai-server.js";
import { ENGLISH_TRANSCRIPT, VIDEOS, type FakeVideoHost } from "../fakes/video-host.js";


const ANSWER = {
  title: "Senior Backend Engineer",
  company: "Nordwind Logistics GmbH",
  location: "Hamburg, Germany (hybrid)",
  salary_min: "72,000",
  salary_max: 88000,
  salary_currency: "eur",
  employment_type: "Full-time",
  requirements: ["5+ years building backend services with Node.js and TypeScript"],
  skills: ["Node.js", "TypeScript", "PostgreSQL"],
  benefits: ["30 days of paid vacation"],
  description_summary: "Nordwind Logistics is hiring a senior backend engineer. The role builds the routing platform.",
};

const EXPECTED_POSTING = {
  ...ANSWER,
  salary_min: 72000,
  salary_currency: "EUR",
  employment_type: "full-time",
};

let world: JobWorld;
let llm: FakeOpenAI;
let board: FakeJobBoard;
let host: FakeVideoHost;
let server: TestServer;
let key: string;

beforeAll(async () => {
  world = await startJobWorld();
  ({ llm, board, host, server } = world);
  key = await mintKey(server.url);
});
afterEach(() => llm.reset());
afterAll(async () => {
  await world?.close();
});

async function submit(base: string, apiKey: string, path: string, body: unknown): Promise<number> {
  const res = await rest(base, "POST", path, { key: apiKey, body });
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(Object.keys(res.body)).toEqual(["job_id"]);
  expect(Number.isInteger(res.body.job_id)).toBe(true);
  return res.body.job_id as number;
}

async function run(path: string, body: unknown, base = server.url, apiKey = key): Promise<JobJson> {
  return waitForJob(base, apiKey, await submit(base, apiKey, path, body));
}

describe("POST /v1/jobs/parse", () => {
  it("parses a posting page: 202, then completed with all eleven fields normalised", async () => {
    llm.answer = ANSWER;
    llm.expectInMessages = [POSTING_FACTS.intro, POSTING_FACTS.salary];
    const job = await run("/v1/jobs/parse", { url: board.url("/jobs/senior-backend-engineer") });
    expect(job).toMatchObject({ kind: "job_posting", status: "completed", error: null });
    expect(job.result).toEqual(EXPECTED_POSTING);
    expect(llm.violations).toEqual([]);
    expect(llm.requests).toHaveLength(1);
  });

  it("parses raw text, with every unknown field null or []", async () => {
    const baker = { title: "Baker", company: null, location: null, salary_min: null, salary_max: null, salary_currency: null, employment_type: null, requirements: [], skills: [], benefits: [], description_summary: null };
    llm.answer = baker;
    llm.expectInMessages = ["Baker wanted in Lyon"];
    const job = await run("/v1/jobs/parse", { text: "Baker wanted in Lyon", url: null });
    expect(job.status).toBe("completed");
    expect(job.result).toEqual(baker);
  });

  it("answers 422 for missing input and bad URLs", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, "missing_field"],
      [{ url: null, text: null }, "missing_field"],
      [{ text: "   " }, "invalid_string"],
      [{ url: "not a url" }, "invalid_url"],
      [{ url: "ftp://example.com/job" }, "invalid_url"],
      [{ url: "/jobs/1", text: "x" }, "invalid_url"],
    ];
    for (const [body, code] of cases) {
      const res = await rest(server.url, "POST", "/v1/jobs/parse", { key, body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.error).toBe(code);
      expect(res.body.suggestion).toBeTruthy();
    }
  });

  it("needs an API key, and a job is visible only to its key (jobs-private)", async () => {
    expect((await rest(server.url, "POST", "/v1/jobs/parse", { body: { text: "Baker" } })).status).toBe(401);
    llm.answer = ANSWER;
    const id = await submit(server.url, key, "/v1/jobs/parse", { text: "Baker wanted" });
    const other = await mintKey(server.url);
    const res = await getJob(server.url, other, id);
    expect(res.status).toBe(404);
    expect((res.body as unknown as Record<string, unknown>).error).toBe("job_not_found");
    await waitForJob(server.url, key, id);
  });

  it("retries a failing model, then completes", async () => {
    llm.answer = ANSWER;
    llm.failNext(1, 503);
    const job = await run("/v1/jobs/parse", { text: "Baker wanted" });
    expect(job.status).toBe("completed");
    expect(llm.requests).toHaveLength(2);
  });

  it("retries a model that keeps failing, then fails the job with error set", async () => {
    llm.failAlways(500);
    const job = await run("/v1/jobs/parse", { text: "Baker wanted" });
    expect(job).toMatchObject({ status: "failed", result: null });
    expect(job.error?.error).toBe("llm_failed");
    expect(job.error?.message).toContain("500");
    // Three attempts in all (the runner's default), then no more.
    expect(llm.requests).toHaveLength(3);
  });

  it("fails at once, without retries, on a permanent failure", async () => {
    llm.answer = "this is not JSON";
    const job = await run("/v1/jobs/parse", { text: "Baker wanted" });
    expect(job.error?.error).toBe("llm_invalid_response");
    expect(llm.requests).toHaveLength(1);
    const gone = await run("/v1/jobs/parse", { url: board.url("/jobs/gone") });
    expect(gone.error).toMatchObject({ error: "page_fetch_failed" });
    expect(gone.error?.message).toContain("404");
  });
});

describe("POST /v1/video/transcript and /v1/youtube/transcript", () => {
  it("fetches a transcript from a watch-page URL: completed with segments in seconds", async () => {
    const job = await run("/v1/video/transcript", { url: `https://www.youtube.com/watch?v=${VIDEOS.english}&t=42s` });
    expect(job).toMatchObject({ kind: "transcript", status: "completed", error: null });
    expect(job.result).toEqual({ video_id: VIDEOS.english, ...ENGLISH_TRANSCRIPT });
  });

  it("accepts the short-link form on the host-named path, with a language", async () => {
    const job = await run("/v1/youtube/transcript", { url: `https://youtu.be/${VIDEOS.multi}?si=abc`, language: "de" });
    expect(job.status).toBe("completed");
    expect(job.result).toMatchObject({ video_id: VIDEOS.multi, language: "de", full_text: "Hallo und willkommen" });
  });

  it("takes a regional variant, and auto-generated captions when they are all there is", async () => {
    const gb = await run("/v1/video/transcript", { url: `https://youtu.be/${VIDEOS.multi}` });
    expect(gb.result).toMatchObject({ language: "en-GB" });
    const asr = await run("/v1/video/transcript", { url: `https://www.youtube.com/watch?v=${VIDEOS.autoOnly}` });
    expect(asr.result).toMatchObject({ language: "en", full_text: "hello and welcome to the show" });
  });

  it.each([
    [VIDEOS.none, "en", "transcript_unavailable"],
    [VIDEOS.multi, "ja", "language_unavailable"],
    [VIDEOS.consentAlways, "en", "video_host_blocked"],
    [VIDEOS.rateLimited, "en", "video_host_blocked"],
  ])("video %s in %s fails with %s", async (id, language, code) => {
    const job = await run("/v1/video/transcript", { url: `https://youtu.be/${id}`, language });
    expect(job).toMatchObject({ status: "failed", result: null });
    expect(job.error?.error).toBe(code);
    if (code === "language_unavailable") expect(job.error?.message).toContain("de (Deutsch), en-GB");
  });

  it("answers 422 for bad URLs and languages", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, "missing_field"],
      [{ url: "https://vimeo.com/12345678" }, "invalid_video_url"],
      [{ url: "https://www.youtube.com/watch?v=short" }, "invalid_video_url"],
      [{ url: "https://www.youtube.com/@channel" }, "invalid_video_url"],
      [{ url: `https://youtu.be/${VIDEOS.english}`, language: "english!" }, "invalid_language"],
    ];
    for (const path of ["/v1/video/transcript", "/v1/youtube/transcript"]) {
      for (const [body, code] of cases) {
        const res = await rest(server.url, "POST", path, { key, body });
        expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(422);
        expect(res.body.error).toBe(code);
      }
    }
  });
});

describe("configuration", () => {
  let strict: TestServer | undefined;
  let keyless: TestServer | undefined;
  let unreachable: TestServer | undefined;
  afterAll(async () => {
    await unreachable?.close();
    await strict?.close();
    await keyless?.close();
  });

  it("without OPENAI_API_KEY, a valid parse submission answers 503 llm_not_configured (bad input still 422)", async () => {
    keyless = await startTestServer({ AGENTBUS_VIDEO_BASE_URL: host.baseUrl });
    const k = await mintKey(keyless.url);
    const res = await rest(keyless.url, "POST", "/v1/jobs/parse", { key: k, body: { text: "Baker wanted" } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "llm_not_configured", suggestion: expect.stringContaining("OPENAI_API_KEY") as unknown });
    expect((await rest(keyless.url, "POST", "/v1/jobs/parse", { key: k, body: { url: "nope" } })).status).toBe(422);
  });

  it("a posting page or video host that cannot be reached fails naming no address (failure-classes)", async () => {
    // A port nothing listens on, behind a host name: the address it resolves to must not reach the caller.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise((resolve) => probe.close(resolve));
    unreachable = await startTestServer(
      {
        AGENTBUS_WORKERS: "true",
        AGENTBUS_ALLOW_PRIVATE_TARGETS: "true",
        OPENAI_API_KEY: llm.apiKey,
        OPENAI_BASE_URL: llm.baseUrl,
        AGENTBUS_LLM_MODEL: llm.model,
        AGENTBUS_VIDEO_BASE_URL: `http://localhost:${port}`,
      },
      { jobs: QUIET_JOBS },
    );
    const k = await mintKey(unreachable.url);
    const IP = /\b\d{1,3}(\.\d{1,3}){3}\b|::1|\[[0-9a-f:]+\]/i;
    // Both are retried (a refused connection may be transient) before they fail: wait for them side by side.
    const ids = [
      await submit(unreachable.url, k, "/v1/jobs/parse", { url: `http://localhost:${port}/jobs/x` }),
      await submit(unreachable.url, k, "/v1/video/transcript", { url: `https://www.youtube.com/watch?v=${VIDEOS.english}` }),
    ];
    const [page, video] = await Promise.all(ids.map((id) => waitForJob(unreachable!.url, k, id, 45_000)));
    expect(page).toMatchObject({ status: "failed", error: { error: "page_fetch_failed" } });
    expect(page!.error?.message).not.toMatch(IP);
    expect(video).toMatchObject({ status: "failed", error: { error: "video_host_unavailable" } });
    expect(video!.error?.message).not.toMatch(IP);
  }, 60_000);

  it("without AGENTBUS_ALLOW_PRIVATE_TARGETS, private posting URLs and video hosts are refused", async () => {
    strict = await startTestServer(
      {
        AGENTBUS_WORKERS: "true",
        OPENAI_API_KEY: llm.apiKey,
        OPENAI_BASE_URL: llm.baseUrl,
        AGENTBUS_LLM_MODEL: llm.model,
        AGENTBUS_VIDEO_BASE_URL: host.baseUrl,
      },
      { jobs: QUIET_JOBS },
    );
    const k = await mintKey(strict.url);
    const before = board.requests.length;
    for (const url of [board.url("/jobs/senior-backend-engineer"), board.localhostUrl("/jobs/senior-backend-engineer")]) {
      const job = await run("/v1/jobs/parse", { url }, strict.url, k);
      expect(job).toMatchObject({ status: "failed", error: { error: "url_not_allowed" } });
    }
    expect(board.requests.length).toBe(before);
    expect(llm.requests).toHaveLength(0);

    const video = await run("/v1/video/transcript", { url: `${host.baseUrl}/watch?v=${VIDEOS.english}` }, strict.url, k);
    expect(video).toMatchObject({ status: "failed", error: { error: "video_host_unavailable" } });

    // The model provider is the operator's own address (not caller input): text still parses.
    llm.answer = ANSWER;
    const text = await run("/v1/jobs/parse", { text: "Baker wanted" }, strict.url, k);
    expect(text.status).toBe("completed");
  });
});
