/**
 * The pdf scenario (BENCH_SCENARIOS=pdf): PDF jobs end to end through the
 * worker and its shared Chromium, for a one-page and a ten-page Markdown
 * document. Per document:
 *
 * - latency: one client at a time (closed loop: submit, poll GET /jobs/{id}
 *   every BENCH_PDF_POLL_MS until completed, submit the next), warm browser:
 *   p50/p99 of submit → completed as the client saw it, and of
 *   created_at → completed_at as the service recorded it (no polling error);
 * - throughput: BENCH_PDF_CLIENTS clients in closed loops (default 4, twice
 *   the default AGENTBUS_PDF_CONCURRENCY, so the queue never runs dry): jobs
 *   completed per second, and the same latencies under that load.
 *
 * Every job must complete; a failed job counts as an error. The first
 * document of each kind is downloaded and its page count checked.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { Api, Key } from "./api.js";
import { cpuWindow, type CpuSplit } from "./cpu.js";
import type { Settings } from "./scenarios.js";
import { Latencies, round, type ErrorTally } from "./stats.js";

export interface PdfOptions {
  clients: number;
  pollMs: number;
  baseUrl: string;
}

interface Phase {
  clients: number;
  jobs: number;
  jobs_per_s: number;
  /** Submit → the poll that saw `completed`, at the client. */
  latency: ReturnType<Latencies["summary"]>;
  /** created_at → completed_at, as the service recorded them. */
  service_latency: ReturnType<Latencies["summary"]>;
  /** Children of the service (postgres_pct) include Chromium's processes here. */
  cpu: CpuSplit;
}

export interface PdfDocumentReport {
  pages: number;
  pdf_bytes: number;
  source_bytes: number;
  sequential: Phase;
  loaded: Phase;
}

export interface PdfReport {
  one_page: PdfDocumentReport;
  ten_pages: PdfDocumentReport;
}

interface JobJson {
  status: string;
  created_at: string;
  completed_at: string | null;
  error: { error: string; message: string } | null;
}

/** About one A4 page of Markdown: a heading, prose, a list and a 12-row table. */
function section(n: number): string {
  const rows = Array.from({ length: 12 }, (_, i) => `| ${n}.${i + 1} | Item ${i + 1} of section ${n} | ${(i + 1) * 17} | ${((i + 1) * 3.5).toFixed(2)} |`);
  return [
    `## Section ${n}: quarterly figures`,
    "",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. ".repeat(3),
    "",
    "- first point, with **bold** and `code`",
    "- second point, with a [link](https://example.com)",
    "- third point",
    "",
    "| # | Description | Units | Price |",
    "|---|---|---:|---:|",
    ...rows,
    "",
    "Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.",
  ].join("\n");
}

export const ONE_PAGE = `# Benchmark report\n\n${section(1)}\n`;
export const TEN_PAGES = `# Benchmark report\n\n${Array.from({ length: 10 }, (_, i) => section(i + 1)).join('\n\n<div style="break-before: page"></div>\n\n')}\n`;

/** Pages of a PDF (Chromium writes one /Type /Page object per page). */
function countPages(pdf: Buffer): number {
  return pdf.toString("latin1").match(/\/Type\s*\/Page(?![a-zA-Z])/g)?.length ?? 0;
}

const micros = (ts: string) => Date.parse(ts) * 1000 + Number(/\.\d{3}(\d{3})Z$/.exec(ts)?.[1] ?? 0);

class PdfLoad {
  constructor(
    private readonly api: Api,
    private readonly errors: ErrorTally,
    private readonly options: PdfOptions,
  ) {}

  /** One job: submit, poll until it ends. Undefined (and an error counted) unless it completed. */
  async job(key: Key, body: string): Promise<{ id: number; ms: number; serviceMs: number } | undefined> {
    const started = performance.now();
    const submitted = await this.api.call("POST", "/v1/pdf/generate", "/v1/pdf/generate", key.key, body);
    if (!submitted.ok) return undefined;
    const id = (JSON.parse(submitted.body) as { job_id: number }).job_id;
    for (;;) {
      const polled = await this.api.call("GET", `/jobs/${id}`, "/jobs/{job_id}", key.key);
      if (!polled.ok) return undefined;
      const job = JSON.parse(polled.body) as JobJson;
      if (job.status === "completed") {
        return { id, ms: performance.now() - started, serviceMs: (micros(job.completed_at!) - micros(job.created_at)) / 1000 };
      }
      if (job.status === "failed") {
        this.errors.add("pdf job failed", JSON.stringify(job.error));
        return undefined;
      }
      await sleep(this.options.pollMs);
    }
  }

  /** Closed loops of `keys.length` clients: warm-up, then the measured window. */
  async phase(keys: Key[], body: string, s: Settings, label: string): Promise<Phase> {
    const latency = new Latencies();
    const service = new Latencies();
    let measuring = false;
    let stopping = false;
    let jobs = 0;
    const loops = keys.map(async (key) => {
      while (!stopping) {
        const done = await this.job(key, body);
        if (done && measuring) {
          latency.add(done.ms);
          service.add(done.serviceMs);
          jobs++;
        }
      }
    });
    s.log(`${label}: warming up for ${s.warmupMs / 1000} s`);
    await sleep(s.warmupMs);
    const cpu = cpuWindow(s.serverPid);
    const t0 = performance.now();
    measuring = true;
    s.log(`${label}: measuring for ${s.durationMs / 1000} s`);
    await sleep(s.durationMs);
    measuring = false;
    const seconds = (performance.now() - t0) / 1000;
    const split = cpu();
    stopping = true;
    await Promise.all(loops);
    return {
      clients: keys.length,
      jobs,
      jobs_per_s: round(jobs / seconds),
      latency: latency.summary(),
      service_latency: service.summary(),
      cpu: split,
    };
  }

  /** The first job of a document, downloaded: its page count and size. */
  async sample(key: Key, body: string): Promise<{ pages: number; bytes: number }> {
    const done = await this.job(key, body);
    if (!done) throw new Error("the sample pdf job did not complete");
    const res = await fetch(`${this.options.baseUrl}/v1/pdf/${done.id}`, { headers: { "X-API-Key": key.key } });
    if (res.status !== 200) throw new Error(`GET /v1/pdf/${done.id} answered ${res.status}`);
    const pdf = Buffer.from(await res.arrayBuffer());
    return { pages: countPages(pdf), bytes: pdf.length };
  }
}

export async function pdfJobs(api: Api, keys: Key[], s: Settings, options: PdfOptions): Promise<PdfReport> {
  const load = new PdfLoad(api, s.errors, options);
  const report = async (label: string, markdown: string, pages: number): Promise<PdfDocumentReport> => {
    const body = JSON.stringify({ content: markdown, format: "markdown" });
    const sample = await load.sample(keys[0]!, body);
    if (sample.pages !== pages) throw new Error(`${label}: the document has ${sample.pages} pages, expected ${pages}`);
    const sequential = await load.phase(keys.slice(0, 1), body, s, `pdf ${label}, 1 client`);
    const loaded = await load.phase(keys.slice(0, options.clients), body, s, `pdf ${label}, ${options.clients} clients`);
    return { pages: sample.pages, pdf_bytes: sample.bytes, source_bytes: Buffer.byteLength(body), sequential, loaded };
  };
  // The first job starts the browser; sample() takes it, so every window is warm.
  return { one_page: await report("1 page", ONE_PAGE, 1), ten_pages: await report("10 pages", TEN_PAGES, 10) };
}

/** One progress line with the headline figures. */
export function pdfLog(r: PdfReport): string {
  const doc = (name: string, d: PdfDocumentReport) =>
    `${name}: 1 client p50 ${d.sequential.latency.p50_ms} ms, p99 ${d.sequential.latency.p99_ms} ms (service ${d.sequential.service_latency.p50_ms}/${d.sequential.service_latency.p99_ms} ms), ` +
    `${d.loaded.clients} clients ${d.loaded.jobs_per_s} jobs/s, p50 ${d.loaded.latency.p50_ms} ms, p99 ${d.loaded.latency.p99_ms} ms`;
  return `pdf ${doc("1 page", r.one_page)}; ${doc("10 pages", r.ten_pages)}`;
}
