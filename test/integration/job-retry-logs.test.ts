/**
 * What a failing job writes to the log (issue 12): one line per attempt, no
 * stack for an expected failure (the video host cannot be reached), and the
 * error text said once, not once per wrapping cause.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/platform/free-port.js";
import { QUIET_JOBS as jobs } from "../support/job-fakes.js";
import { waitForJob } from "../support/pdf.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;
let key: string;

async function failTranscript(videoBaseUrl: string): Promise<Array<Record<string, unknown>>> {
  const s = await startTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_ALLOW_PRIVATE_TARGETS: "true", AGENTBUS_VIDEO_BASE_URL: videoBaseUrl }, { jobs });
  server = s;
  key = await mintKey(s.url);
  const res = await rest(s.url, "POST", "/v1/video/transcript", { key, body: { url: "https://www.youtube.com/watch?v=dQw4w9WgXcQ" } });
  expect(res.status).toBe(202);
  const jobId = res.body.job_id as number;
  const job = await waitForJob(s.url, key, jobId, 45_000);
  expect(job).toMatchObject({ status: "failed", error: { error: "video_host_unavailable" } });
  await s.close();
  return s.logs.filter((l) => l.job_id === jobId || (l.component === "jobs" && l.level !== "info"));
}

/** Each distinct clause of a message appears once (no "x: y: x" echoes). */
function repeatsItself(text: string): boolean {
  const clauses = text.split(/:\s+/).map((c) => c.trim().toLowerCase()).filter((c) => c.length > 3);
  return new Set(clauses).size !== clauses.length || clauses.some((c, i) => clauses.slice(i + 1).some((d) => d.includes(c) || c.includes(d)));
}

function expectOneQuietLinePerAttempt(lines: Array<Record<string, unknown>>): void {
  const attempts = lines.filter((l) => /job attempt failed|job failed/.test(String(l.msg)));
  // Three attempts: two retried, the last ends the job.
  expect(attempts.map((l) => [l.msg, l.attempt])).toEqual([
    ["job attempt failed; it will be retried", 1],
    ["job attempt failed; it will be retried", 2],
    ["job failed", 3],
  ]);
  // Nothing else about this job at warn or error (Agenda's own "job failed" included).
  expect(lines.filter((l) => l.level !== "info" && !attempts.includes(l))).toEqual([]);
  for (const line of lines) {
    const text = JSON.stringify(line);
    expect(text).not.toContain("stack");
    expect(line.err).toBeUndefined();
  }
  for (const line of attempts) {
    const error = line.error as { message: string; code: string };
    expect(error.code).toBe("video_host_unavailable");
    expect(repeatsItself(error.message), error.message).toBe(false);
  }
}

afterAll(async () => {
  await server?.close().catch(() => {});
});

describe("retry logs of a failing transcript job", () => {
  let refusedPort: number;
  beforeAll(async () => {
    refusedPort = await freePort();
  });

  it("a video host on a closed port: one line per attempt, no stack, the message said once", async () => {
    const lines = await failTranscript(`http://localhost:${refusedPort}`);
    expectOneQuietLinePerAttempt(lines);
    expect((lines.find((l) => l.attempt === 1)!.error as { cause?: string }).cause).toBe("ECONNREFUSED");
  }, 60_000);

  it("a video host whose name does not resolve: one line per attempt, no stack, the message said once", async () => {
    const lines = await failTranscript("http://video-host.invalid");
    expectOneQuietLinePerAttempt(lines);
    const first = lines.find((l) => l.attempt === 1)!.error as { message: string; cause?: string };
    expect(first.message).toContain("cannot resolve video-host.invalid");
    expect(first.cause).toBe("ENOTFOUND");
  }, 60_000);
});
