/**
 * The async jobs from the shell (`agentbus pdf|parse|transcript`) and through
 * MCP (submit_*, get_job), against a service with job workers, real Chromium,
 * and local stand-ins for the language model, the job board and the video
 * host.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENGLISH_TRANSCRIPT, VIDEOS } from "../fakes/video-host.js";
import { startJobWorld, type JobWorld } from "../support/job-fakes.js";
import { pdfText } from "../support/pdf.js";
import { mintKey, type TestServer } from "../support/server.js";
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

let world: JobWorld;
let server: TestServer;
let key: string;
let dir: string;

beforeAll(async () => {
  world = await startJobWorld();
  server = world.server;
  key = await mintKey(server.url);
  dir = await mkdtemp(join(tmpdir(), "agentbus-jobs-cli-"));
}, 60_000);
afterAll(async () => {
  await world?.close();
  await rm(dir, { recursive: true, force: true });
});

const cli = (args: string[]) =>
  spawnShell(args, { env: { HOME: dir, AGENTBUS_URL: server.url, AGENTBUS_API_KEY: key, AGENTBUS_PROFILE: join(dir, "profile.json") } }).done;

describe("agentbus pdf | parse | transcript", () => {
  it("pdf renders a Markdown file to the named PDF, showing progress on stderr", async () => {
    const source = join(dir, "report.md");
    await writeFile(source, "# Quarterly report\n\nRevenue went up.\n");
    const out = join(dir, "report.pdf");
    const r = await cli(["pdf", source, "-o", out]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/job \d+ submitted/);
    const pdf = await readFile(out);
    expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-");
    expect(await pdfText(pdf)).toContain("Quarterly report");
  }, 60_000);

  it("pdf without -o is bad usage (exit 2)", async () => {
    expect((await cli(["pdf", join(dir, "missing.md")])).code).toBe(2);
  });

  it("transcript prints the video's timestamped transcript as JSON", async () => {
    const r = await cli(["transcript", `https://www.youtube.com/watch?v=${VIDEOS.english}`]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ video_id: VIDEOS.english, ...ENGLISH_TRANSCRIPT });
  }, 30_000);

  it("parse prints the posting's fields; a job that fails exits 1 with its error", async () => {
    world.llm.answer = POSTING;
    const r = await cli(["parse", world.board.url("/jobs/senior-backend-engineer")]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ title: "Baker", company: "Boulangerie Lyon" });
    const gone = await cli(["parse", world.board.url("/no-such-posting")]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/failed: page_fetch_failed/);
  }, 30_000);
});

describe("jobs through MCP", () => {
  it("submits a PDF job and gets the finished PDF from get_job as an embedded application/pdf resource", async () => {
    const client = new Client({ name: "jobs-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
    try {
      let last: CallToolResult | undefined;
      const call = async (name: string, args: Record<string, unknown>) => {
        last = (await client.callTool({ name, arguments: args })) as CallToolResult;
        expect(last.isError, JSON.stringify(last.structuredContent)).toBeFalsy();
        return last.structuredContent as Record<string, unknown>;
      };
      const { job_id: jobId } = await call("submit_pdf_job", { content: "<h1>Hello from MCP</h1>", format: "html" });
      let job = await call("get_job", { job_id: jobId });
      for (let i = 0; i < 100 && job.status !== "completed" && job.status !== "failed"; i++) {
        await new Promise((r) => setTimeout(r, 200));
        job = await call("get_job", { job_id: jobId });
      }
      // An absolute link, where this client reached the service.
      expect(job).toMatchObject({ status: "completed", result: { url: `${server.url}/v1/pdf/${String(jobId)}` }, pdf: { embedded: true, uri: `agentbus://jobs/${String(jobId)}/pdf` } });
      const embedded = last!.content.find((c) => c.type === "resource");
      expect(embedded).toMatchObject({ type: "resource", resource: { uri: `agentbus://jobs/${String(jobId)}/pdf`, mimeType: "application/pdf", blob: expect.any(String) } });
      const pdf = Buffer.from((embedded as { resource: { blob: string } }).resource.blob, "base64");
      expect(pdf.subarray(0, 5).toString("latin1")).toBe("%PDF-");
      expect(await pdfText(pdf)).toContain("Hello from MCP");
      expect(job.pdf).toMatchObject({ size_bytes: pdf.byteLength });
    } finally {
      await client.close();
    }
  }, 60_000);

  it("runs submit_pdf_job as an MCP task whose result is the finished job with the PDF", async () => {
    const client = new Client({ name: "jobs-test", version: "1.0.0" }, { capabilities: { tasks: {} } });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", server.url), { requestInit: { headers: { "X-API-Key": key } } }));
    try {
      let result: CallToolResult | undefined;
      for await (const m of client.experimental.tasks.callToolStream({ name: "submit_pdf_job", arguments: { content: "<h1>As a task</h1>", format: "html" } }, CallToolResultSchema, { task: { ttl: 60_000 } })) {
        if (m.type === "result") result = m.result as CallToolResult;
        if (m.type === "error") throw m.error;
      }
      expect(result?.structuredContent).toMatchObject({ status: "completed", pdf: { embedded: true } });
      const embedded = result!.content.find((c) => c.type === "resource") as { resource: { blob: string } } | undefined;
      expect(await pdfText(Buffer.from(embedded!.resource.blob, "base64"))).toContain("As a task");
    } finally {
      await client.close();
    }
  }, 60_000);
});
