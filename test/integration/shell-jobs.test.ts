/**
 * The shell's job commands (`agentbus pdf|parse|transcript`) as a person
 * runs them: where their input comes from (a file, stdin), where their output
 * goes (-o), and what they print while they wait. Against a service with job
 * workers, real Chromium, and local stand-ins for the language model and the
 * video host.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ENGLISH_TRANSCRIPT, VIDEOS } from "../fakes/video-host.js";
import { startJobWorld, type JobWorld } from "../support/job-fakes.js";
import { pdfText } from "../support/pdf.js";
import { mintKey } from "../support/server.js";
import { spawnShell } from "../support/shell.js";

const POSTING = {
  title: "Baker",
  company: "Boulangerie Lyon",
  location: null,
  salary_min: null,
  salary_max: null,
  salary_currency: null,
  employment_type: null,
  requirements: [],
  skills: [],
  benefits: [],
  description_summary: null,
};
const POSTING_TEXT = "Boulangerie Lyon is hiring a baker for its early shift. Apply with your CV.";

let world: JobWorld;
let key: string;
let dir: string;

beforeAll(async () => {
  world = await startJobWorld();
  key = await mintKey(world.server.url);
  dir = await mkdtemp(join(tmpdir(), "agentbus-shell-jobs-"));
}, 60_000);
afterAll(async () => {
  await world?.close();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(() => {
  world.llm.reset();
  world.llm.answer = POSTING;
});

const cli = (args: string[], input?: string) =>
  spawnShell(args, { env: { HOME: dir, AGENTBUS_URL: world.server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: join(dir, "profile.json") }, input });

async function until(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}

const modelSaw = (text: string) => world.llm.requests.some((r) => r.text.includes(text));

describe("agentbus pdf | parse | transcript", () => {
  it("waits for a job quietly: one line naming the job on stderr, none per poll", async () => {
    const file = join(dir, "quiet.txt");
    await writeFile(file, POSTING_TEXT);
    // The model answers only when the test lets it, so the job is still running across several polls.
    const release = world.llm.hold();
    const parse = cli(["parse", file]);
    await until(() => world.llm.requests.length > 0);
    release();
    const r = await parse.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr.trimEnd().split("\n")).toEqual([expect.stringMatching(/^job \d+ submitted$/)]);
  }, 30_000);

  it("parse reads the posting's text from a file", async () => {
    const file = join(dir, "posting.txt");
    await writeFile(file, POSTING_TEXT);
    const r = await cli(["parse", file]).done;
    expect(r.code, r.stderr).toBe(0);
    expect(modelSaw(POSTING_TEXT)).toBe(true);
  }, 30_000);

  it("parse - reads the posting's text from stdin", async () => {
    const r = await cli(["parse", "-"], POSTING_TEXT).done;
    expect(r.code, r.stderr).toBe(0);
    expect(modelSaw(POSTING_TEXT)).toBe(true);
  }, 30_000);

  it("transcript -o writes the transcript's JSON to the file and prints the file's name", async () => {
    const out = join(dir, "transcript.json");
    const r = await cli(["transcript", `https://www.youtube.com/watch?v=${VIDEOS.english}`, "-o", out]).done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${out}\n`);
    expect(JSON.parse(await readFile(out, "utf8"))).toEqual({ video_id: VIDEOS.english, ...ENGLISH_TRANSCRIPT });
  }, 30_000);

  it("pdf - renders what comes on stdin, in the --format given", async () => {
    const out = join(dir, "stdin.pdf");
    const r = await cli(["pdf", "-", "-o", out, "--format", "markdown"], "# From stdin\n\nRendered as Markdown.\n").done;
    expect(r.code, r.stderr).toBe(0);
    const text = await pdfText(await readFile(out));
    expect(text).toContain("From stdin");
    expect(text).not.toContain("#");
  }, 60_000);
});
