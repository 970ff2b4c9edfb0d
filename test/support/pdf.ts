/**
 * Helpers for the async-job tests: submit and poll over REST, download, and
 * read PDFs back with poppler (pdfinfo, pdftotext).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { rest, type JsonResponse } from "./server.js";

const run = promisify(execFile);

export interface JobJson {
  job_id: number;
  kind: string;
  status: "queued" | "processing" | "completed" | "failed";
  result: Record<string, unknown> | null;
  error: { error: string; message: string } | null;
  created_at: string;
  updated_at: string;
  completed_at: string | null;
  expires_at: string | null;
}

export async function submitPdf(base: string, key: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return rest(base, "POST", "/v1/pdf/generate", { key, body, headers });
}

/** Submits and returns the job id; fails the test unless the answer is 202. */
export async function submitPdfJob(base: string, key: string, body: Record<string, unknown>): Promise<number> {
  const res = await submitPdf(base, key, body);
  if (res.status !== 202) throw new Error(`submission answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.job_id as number;
}

export async function getJob(base: string, key: string, id: number | string): Promise<JsonResponse<JobJson>> {
  return rest<JobJson>(base, "GET", `/jobs/${id}`, { key });
}

/** Polls GET /jobs/{id} until the job ended (completed or failed). */
export async function waitForJob(base: string, key: string, id: number, timeoutMs = 25_000): Promise<JobJson> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await getJob(base, key, id);
    if (res.status !== 200) throw new Error(`GET /jobs/${id} answered ${res.status}: ${JSON.stringify(res.body)}`);
    if (res.body.status === "completed" || res.body.status === "failed") return res.body;
    if (performance.now() > deadline) throw new Error(`job ${id} still ${res.body.status} after ${timeoutMs} ms`);
    // Real time: polls a job that a real runner and a real Chromium render.
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Download {
  status: number;
  headers: Headers;
  bytes: Buffer;
  /** The parsed error body when the answer is JSON. */
  json: Record<string, unknown> | undefined;
}

export async function download(base: string, key: string, id: number | string, prefix = "/v1"): Promise<Download> {
  const res = await fetch(`${base}${prefix}/pdf/${id}`, { headers: { "X-API-Key": key } });
  const bytes = Buffer.from(await res.arrayBuffer());
  const json = res.headers.get("content-type")?.startsWith("application/json") ? (JSON.parse(bytes.toString("utf8")) as Record<string, unknown>) : undefined;
  return { status: res.status, headers: res.headers, bytes, json };
}

/** Submits, waits for completion and downloads; returns the PDF. */
export async function renderPdf(base: string, key: string, body: Record<string, unknown>): Promise<Buffer> {
  const id = await submitPdfJob(base, key, body);
  const job = await waitForJob(base, key, id);
  if (job.status !== "completed") throw new Error(`job ${id} failed: ${JSON.stringify(job.error)}`);
  const pdf = await download(base, key, id);
  if (pdf.status !== 200) throw new Error(`download answered ${pdf.status}: ${pdf.bytes.toString("utf8")}`);
  return pdf.bytes;
}

async function withFile<T>(pdf: Buffer, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), "agentbus-pdf-"));
  try {
    const file = path.join(dir, "doc.pdf");
    await writeFile(file, pdf);
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** pdfinfo's page count. */
export async function pageCount(pdf: Buffer): Promise<number> {
  return withFile(pdf, async (file) => {
    const { stdout } = await run("pdfinfo", [file]);
    const match = /^Pages:\s+(\d+)$/m.exec(stdout);
    if (!match) throw new Error(`pdfinfo printed no page count:\n${stdout}`);
    return Number(match[1]);
  });
}

/** pdftotext's text of the whole document, or of pages first..last. */
export async function pdfText(pdf: Buffer, pages?: { first: number; last: number }): Promise<string> {
  return withFile(pdf, async (file) => {
    const range = pages ? ["-f", String(pages.first), "-l", String(pages.last)] : [];
    const { stdout } = await run("pdftotext", ["-layout", ...range, file, "-"]);
    return stdout;
  });
}
