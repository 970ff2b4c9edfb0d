/**
 * PDF jobs end to end (docs/decisions.md#pdf-jobs) with the real worker and the real
 * Chromium: HTML and Markdown in, a PDF out, read back with poppler. Also
 * what the page must never do (run scripts, load anything), the browser
 * coming back after it was killed, and a render that runs out of time.
 */
import { createServer, type Server } from "node:http";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { systemClock } from "../../src/model/time.js";
import { pdfJob } from "../../src/jobs/pdf.js";
import { JobRunner } from "../../src/jobs/runner.js";
import { createLogger } from "../../src/platform/logger.js";
import { PdfRenderer } from "../../src/pdf/renderer.js";
import { agendaBackend } from "../../src/store/agenda.js";
import { Db } from "../../src/store/db.js";
import { PgJobStore } from "../../src/store/jobs.js";
import { PgPurgeStore } from "../../src/store/purge.js";
import { download, getJob, pageCount, pdfText, renderPdf, submitPdfJob, waitForJob } from "../support/pdf.js";
import { mintKey, useTestServer } from "../support/server.js";

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

/** Quiet maintenance: these tests only need the pdf worker (whose retry after a killed browser is due at once). */
const jobs = { processEveryMs: 1_000, retryDelayScale: 0.05, intervals: { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } };

const server = useTestServer({ AGENTBUS_WORKERS: "true" }, { jobs });
let key: string;
beforeAll(async () => {
  key = await mintKey(server.url);
});

/** Whitespace-normalised text (pdftotext -layout spaces columns out). */
const squash = (text: string) => text.replace(/\s+/g, " ");

describe("PDF from HTML", () => {
  it("answers 202 {job_id}, completes with the job-record shape, and serves the PDF at both download paths", async () => {
    const res = await fetch(`${server.url}/v1/pdf/generate`, {
      method: "POST",
      headers: { "X-API-Key": key, "Content-Type": "application/json" },
      body: JSON.stringify({ content: "<!DOCTYPE html><html><body><h1>Invoice 4711</h1><p>Total: 42 EUR</p></body></html>" }),
    });
    expect(res.status).toBe(202);
    const submitted = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(submitted)).toEqual(["job_id"]);
    expect(Number.isInteger(submitted.job_id)).toBe(true);
    const id = submitted.job_id as number;

    const job = await waitForJob(server.url, key, id);
    expect(Object.keys(job)).toEqual(["job_id", "kind", "status", "result", "error", "created_at", "updated_at", "completed_at", "expires_at", "trace"]);
    expect(job).toMatchObject({ job_id: id, kind: "pdf", status: "completed", result: { url: `/v1/pdf/${id}` }, error: null });
    for (const field of ["created_at", "updated_at", "completed_at", "expires_at"] as const) expect(job[field]).toMatch(TIMESTAMP);
    // Kept 24 hours after completion.
    expect(Date.parse(job.expires_at!) - Date.parse(job.completed_at!)).toBe(24 * 3600 * 1000);

    const v1 = await download(server.url, key, id);
    expect(v1.status).toBe(200);
    expect(v1.headers.get("content-type")).toBe("application/pdf");
    expect(v1.headers.get("content-disposition")).toBe(`inline; filename="job-${id}.pdf"`);
    expect(v1.bytes.subarray(0, 5).toString("latin1")).toBe("%PDF-");
    const api = await download(server.url, key, id, "/api/v1");
    expect(api.status).toBe(200);
    expect(api.bytes.equals(v1.bytes)).toBe(true);

    expect(await pageCount(v1.bytes)).toBe(1);
    const text = squash(await pdfText(v1.bytes));
    expect(text).toContain("Invoice 4711");
    expect(text).toContain("Total: 42 EUR");
  });

  it("breaks pages where the CSS says (break-before / page-break-before)", async () => {
    const pdf = await renderPdf(server.url, key, {
      content:
        "<!DOCTYPE html><html><head><style>.next { page-break-before: always; }</style></head><body>" +
        "<p>First page only</p><p class=\"next\">Second page starts here</p>" +
        "<p style=\"break-before: page\">Third page starts here</p></body></html>",
    });
    expect(await pageCount(pdf)).toBe(3);
    expect(squash(await pdfText(pdf, { first: 1, last: 1 }))).toContain("First page only");
    const second = squash(await pdfText(pdf, { first: 2, last: 2 }));
    expect(second).toContain("Second page starts here");
    expect(second).not.toContain("First page only");
    expect(second).not.toContain("Third page");
    expect(squash(await pdfText(pdf, { first: 3, last: 3 }))).toContain("Third page starts here");
  });

  it("applies the extra css after the document's own styles (display:none hides text)", async () => {
    const pdf = await renderPdf(server.url, key, {
      format: "html",
      content: "<html><head><style>.secret { display: block; }</style></head><body><p class=\"secret\">Hidden words</p><p>Visible words</p></body></html>",
      css: ".secret { display: none; }",
    });
    const text = squash(await pdfText(pdf));
    expect(text).toContain("Visible words");
    expect(text).not.toContain("Hidden words");
  });

  it("repeats a long table's header on every page", async () => {
    const rows = Array.from({ length: 120 }, (_, i) => `<tr><td>row-${i + 1}</td><td>${(i + 1) * 3}</td></tr>`).join("");
    const pdf = await renderPdf(server.url, key, {
      content: `<table><thead><tr><th>Item name</th><th>Quantity</th></tr></thead><tbody>${rows}</tbody></table>`,
    });
    const pages = await pageCount(pdf);
    expect(pages).toBeGreaterThanOrEqual(3);
    const second = squash(await pdfText(pdf, { first: 2, last: 2 }));
    expect(second).toContain("Item name");
    expect(second).toMatch(/row-\d+/);
    expect(second).not.toContain("row-1 ");
    expect(squash(await pdfText(pdf, { first: pages, last: pages }))).toContain("row-120");
  });
});

describe("PDF from Markdown", () => {
  it("renders headings, a table, CJK and emoji text, and an HTML page break on page 2", async () => {
    const markdown = [
      "# Quarterly report 四半期報告書",
      "",
      "| Region | Revenue |",
      "|---|---:|",
      "| North | 1200 |",
      "| 東京 | 3400 |",
      "",
      "日本語のテキストと中文测试 😀",
      "",
      '<div style="break-before: page"></div>',
      "",
      "## Appendix on page two",
      "",
      "- item one",
      "- item two",
    ].join("\n");
    const pdf = await renderPdf(server.url, key, { content: markdown, format: "markdown" });
    expect(await pageCount(pdf)).toBe(2);
    const first = squash(await pdfText(pdf, { first: 1, last: 1 }));
    expect(first).toContain("Quarterly report 四半期報告書");
    expect(first).toMatch(/North\s+1200/);
    expect(first).toMatch(/東京\s+3400/);
    expect(first).toContain("日本語のテキストと中文测试 😀");
    expect(first).not.toContain("Appendix");
    const second = squash(await pdfText(pdf, { first: 2, last: 2 }));
    expect(second).toContain("Appendix on page two");
    expect(second).toContain("item two");
  });

  it("applies the extra css to Markdown (it comes after the default stylesheet)", async () => {
    const pdf = await renderPdf(server.url, key, {
      format: "markdown",
      content: "# Title stays\n\n## Subtitle goes\n\nBody text stays",
      css: "h2 { display: none }",
    });
    const text = squash(await pdfText(pdf));
    expect(text).toContain("Title stays");
    expect(text).toContain("Body text stays");
    expect(text).not.toContain("Subtitle goes");
  });

  it("splits a long Markdown table across pages", async () => {
    const rows = Array.from({ length: 150 }, (_, i) => `| sku-${i + 1} | ${i + 1} |`);
    const pdf = await renderPdf(server.url, key, { format: "markdown", content: ["| Product | Units |", "|---|---|", ...rows].join("\n") });
    const pages = await pageCount(pdf);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(squash(await pdfText(pdf, { first: 2, last: 2 }))).toContain("Product");
    expect(squash(await pdfText(pdf, { first: pages, last: pages }))).toContain("sku-150");
  });
});

describe("the page's sandbox", () => {
  let trap: Server;
  let trapUrl: string;
  const hits: string[] = [];
  let secretDir: string;
  let secretFile: string;
  const SECRET = `local-secret-${Math.random().toString(36).slice(2)}`;

  beforeAll(async () => {
    trap = createServer((req, res) => {
      hits.push(req.url ?? "");
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.end("TRAP-CONTENT");
    });
    await new Promise<void>((resolve) => trap.listen(0, "127.0.0.1", resolve));
    trapUrl = `http://127.0.0.1:${(trap.address() as AddressInfo).port}`;
    secretDir = await mkdtemp(path.join(tmpdir(), "agentbus-secret-"));
    secretFile = path.join(secretDir, "secret.txt");
    await writeFile(secretFile, SECRET);
  });
  afterAll(async () => {
    await new Promise((resolve) => trap?.close(resolve));
    await rm(secretDir, { recursive: true, force: true });
  });

  it("runs no script and fetches nothing from Markdown's raw HTML", async () => {
    const markdown = [
      "# Safe heading",
      "",
      "<script>document.write('SCRIPT-RAN')</script>",
      `<script src="${trapUrl}/md-script.js"></script>`,
      `<img src="${trapUrl}/md-img.png" onerror="document.body.append('ONERROR-RAN')">`,
      `<link rel="stylesheet" href="${trapUrl}/md-link.css">`,
      `<iframe src="${trapUrl}/md-frame"></iframe>`,
      `<div style="background-image: url(${trapUrl}/md-inline-bg.png)">styled block</div>`,
      `<a href="javascript:alert(1)">bad link</a>`,
      "",
      `![remote image](${trapUrl}/md-markdown-img.png)`,
      "",
      "Plain paragraph after the attempts.",
    ].join("\n");
    const pdf = await renderPdf(server.url, key, {
      format: "markdown",
      content: markdown,
      css: `@import url("${trapUrl}/md-import.css"); body { background: url(${trapUrl}/md-css-bg.png); }`,
    });
    const text = squash(await pdfText(pdf));
    expect(text).toContain("Safe heading");
    expect(text).toContain("styled block");
    expect(text).toContain("Plain paragraph after the attempts.");
    expect(text).not.toContain("SCRIPT-RAN");
    expect(text).not.toContain("ONERROR-RAN");
    expect(text).not.toContain("TRAP-CONTENT");
    expect(hits).toEqual([]);
  });

  it("runs no script and fetches nothing (not even file: URLs) from an HTML document", async () => {
    const html = `<!DOCTYPE html><html><head>
      <link rel="stylesheet" href="${trapUrl}/html-link.css">
      <link rel="preload" as="image" href="${trapUrl}/html-preload.png">
      <style>@import url("${trapUrl}/html-import.css"); @font-face { font-family: X; src: url(${trapUrl}/html-font.woff2); } body { font-family: X, sans-serif; }</style>
      <script src="${trapUrl}/html-script.js"></script>
      </head><body>
      <p>Document body</p>
      <script>document.body.append('SCRIPT-RAN'); fetch('${trapUrl}/html-fetch');</script>
      <img src="${trapUrl}/html-img.png" onerror="document.body.append('ONERROR-RAN')">
      <img srcset="${trapUrl}/html-srcset.png 2x">
      <iframe src="${trapUrl}/html-frame"></iframe>
      <iframe src="file://${secretFile}"></iframe>
      <object data="file://${secretFile}" type="text/plain"></object>
      <embed src="${trapUrl}/html-embed">
      <video poster="${trapUrl}/html-poster.png" src="${trapUrl}/html-video.mp4"></video>
      <svg><image href="${trapUrl}/html-svg.png" width="10" height="10"/></svg>
      <noscript>noscript shows when scripts are off</noscript>
      </body></html>`;
    const pdf = await renderPdf(server.url, key, { content: html });
    const text = squash(await pdfText(pdf));
    expect(text).toContain("Document body");
    expect(text).not.toContain("SCRIPT-RAN");
    expect(text).not.toContain("ONERROR-RAN");
    expect(text).not.toContain("TRAP-CONTENT");
    expect(text).not.toContain(SECRET);
    expect(hits).toEqual([]);
  });

  // JavaScript is off, so the only navigation a document can start on its
  // own is a meta refresh (to any URL, its own included, after any delay).
  // The page renders as written, every time: no retried render error, no
  // error page, no wait for the refresh.
  const refreshes: Array<[string, (trap: string) => string]> = [
    ["to a remote URL at once", (trap) => `<meta http-equiv="refresh" content="0; url=${trap}/refresh-now">`],
    ["to a remote URL after a delay", (trap) => `<meta http-equiv="refresh" content="1; url=${trap}/refresh-later">`],
    ["to a data: URL", () => `<meta http-equiv="refresh" content="0;url=data:text/html,<p>NAVIGATED-AWAY</p>">`],
    ["of the document itself (no URL)", () => `<meta http-equiv="refresh" content="0">`],
    ["to about:blank (no request to intercept)", () => `<meta http-equiv="refresh" content="0;url=about:blank">`],
    ["in upper case, unquoted", (trap) => `<META HTTP-EQUIV=REFRESH CONTENT=0;URL=${trap}/refresh-upper>`],
    ["with odd spacing and quoting", (trap) => `<meta  http-equiv = 'Refresh'  content = " 0 ;  URL = '${trap}/refresh-spaced' ">`],
    ["in a srcdoc frame", (trap) => `<iframe srcdoc="<meta http-equiv='refresh' content='0;url=${trap}/refresh-frame'>"></iframe>`],
  ];
  /** Renders on the first attempt (a retried render error would pass on a later one) and returns the text. */
  const renderFirstTime = async (body: Record<string, unknown>) => {
    const id = await submitPdfJob(server.url, key, body);
    const job = await waitForJob(server.url, key, id);
    expect(job.error).toBeNull();
    const { rows } = await server.app.pool.query<{ attempts: number }>("SELECT attempts FROM jobs WHERE id = $1", [id]);
    expect(rows[0]!.attempts).toBe(1);
    return squash(await pdfText((await download(server.url, key, id)).bytes));
  };
  it.each(refreshes)("renders a document with a meta refresh %s as written, on the first attempt", async (_, meta) => {
    const html = `<!DOCTYPE html><html><head>${meta(trapUrl)}</head><body><p>Document that wants to leave</p></body></html>`;
    const text = await renderFirstTime({ content: html });
    expect(text).toContain("Document that wants to leave");
    expect(text).not.toContain("NAVIGATED-AWAY");
    expect(text).not.toContain("TRAP-CONTENT");
    expect(hits).toEqual([]);
  });

  it("renders Markdown whose raw HTML carries a meta refresh as written, on the first attempt", async () => {
    const markdown = `<meta http-equiv="refresh" content="0; url=${trapUrl}/refresh-md">\n\n# Markdown that wants to leave`;
    expect(await renderFirstTime({ format: "markdown", content: markdown })).toContain("Markdown that wants to leave");
    expect(hits).toEqual([]);
  });

  it("still renders inline data: images and fonts", async () => {
    // A 1×1 red PNG.
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
    const pdf = await renderPdf(server.url, key, {
      format: "markdown",
      content: `Before the image\n\n![pixel](data:image/png;base64,${png})\n\nAfter the image`,
    });
    const text = squash(await pdfText(pdf));
    expect(text).toContain("Before the image");
    expect(text).toContain("After the image");
    expect(hits).toEqual([]);
  });
});

describe("the shared browser", () => {
  it("is started again on the next job after it was killed", async () => {
    await renderPdf(server.url, key, { content: "<p>warm up</p>" });
    const renderer = server.app.pdf!;
    const first = renderer.browserPid;
    expect(first).toBeTypeOf("number");
    process.kill(first!, "SIGKILL");
    const deadline = performance.now() + 10_000;
    // Real time: the renderer learns of the killed Chromium process over its pipe.
    while (renderer.browserPid === first && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(renderer.browserPid).toBeUndefined();

    const pdf = await renderPdf(server.url, key, { content: "<p>after the crash</p>" });
    expect(squash(await pdfText(pdf))).toContain("after the crash");
    expect(renderer.browserPid).toBeTypeOf("number");
    expect(renderer.browserPid).not.toBe(first);
  });

  it("retries a job whose browser died while it rendered", async () => {
    const renderer = server.app.pdf!;
    await renderPdf(server.url, key, { content: "<p>warm</p>" });
    // Long enough to be caught mid-render.
    const rows = Array.from({ length: 3000 }, (_, i) => `<tr><td>line ${i}</td><td>${"x".repeat(40)}</td></tr>`).join("");
    const id = await submitPdfJob(server.url, key, { content: `<table>${rows}</table><p>end of the long table</p>` });
    const deadline = performance.now() + 10_000;
    while ((await getJob(server.url, key, id)).body.status !== "processing" && performance.now() < deadline) {
      // Real time: the job is picked up by the real job runner and a real Chromium.
      await new Promise((r) => setTimeout(r, 10));
    }
    const pid = renderer.browserPid!;
    process.kill(pid, "SIGKILL");
    const job = await waitForJob(server.url, key, id, 60_000);
    expect(job.status, JSON.stringify(job)).toBe("completed");
    const text = squash(await pdfText((await download(server.url, key, id)).bytes));
    expect(text).toContain("end of the long table");
    expect(renderer.browserPid).not.toBe(pid);
    // The run the kill interrupted counted, and the retry finished the job.
    const attempts = await server.app.pool.query<{ attempts: number }>("SELECT attempts FROM jobs WHERE id = $1", [id]);
    expect(attempts.rows[0]!.attempts).toBe(2);
  }, 90_000);
});

describe("a render past its deadline", () => {
  const slow = useTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_PDF_TIMEOUT_MS: "1500" }, { jobs });

  it("fails the job with pdf_render_timeout, and the download says it failed", async () => {
    const owner = await mintKey(slow.url);
    const rows = Array.from({ length: 20_000 }, (_, i) => `<tr><td>${i}</td><td>${"word ".repeat(12)}</td></tr>`).join("");
    const id = await submitPdfJob(slow.url, owner, { content: `<table>${rows}</table>` });
    const job = await waitForJob(slow.url, owner, id, 30_000);
    expect(job.status).toBe("failed");
    expect(job.error).toEqual({ error: "pdf_render_timeout", message: "Rendering took longer than 1500 ms" });
    expect(job.result).toBeNull();
    expect(job.completed_at).toBeNull();
    expect(job.expires_at).toMatch(TIMESTAMP);
    const res = await download(slow.url, owner, id);
    expect(res.status).toBe(409);
    expect(res.json).toMatchObject({ error: "job_failed" });
    expect(res.json?.suggestion).toBeTruthy();

    // The renderer is still usable for documents within the deadline.
    const pdf = await renderPdf(slow.url, owner, { content: "<p>small</p>" });
    expect(squash(await pdfText(pdf))).toContain("small");
  }, 60_000);
});

describe("a worker that stops while it renders", () => {
  const stopping = useTestServer({ AGENTBUS_WORKERS: "true" }, { jobs });

  it("hands its job over: queued again with a fresh Agenda job, which another worker completes", async () => {
    const owner = await mintKey(stopping.url);
    const rows = Array.from({ length: 5000 }, (_, i) => `<tr><td>${i}</td><td>${"word ".repeat(12)}</td></tr>`).join("");
    const id = await submitPdfJob(stopping.url, owner, { content: `<table>${rows}</table><p>handed over</p>` });
    const deadline = performance.now() + 15_000;
    while ((await getJob(stopping.url, owner, id)).body.status !== "processing" && performance.now() < deadline) {
      // Real time: the job is picked up by the real job runner and a real Chromium.
      await new Promise((r) => setTimeout(r, 10));
    }
    await stopping.app.jobs!.stop();

    const pool = stopping.app.pool;
    const job = await pool.query<{ status: string; attempts: number }>("SELECT status, attempts FROM jobs WHERE id = $1", [id]);
    expect(job.rows).toEqual([{ status: "queued", attempts: 1 }]);
    // Agenda removes the interrupted run's row asynchronously after stop(); give it a moment (bounded).
    const agendaRows = () =>
      pool.query<{ locked: boolean; due: boolean }>(
        "SELECT locked_at IS NOT NULL AS locked, next_run_at IS NOT NULL AS due FROM agenda_jobs WHERE data->>'job_id' = $1",
        [String(id)],
      );
    let queued = await agendaRows();
    for (let i = 0; i < 40 && queued.rows.length > 1; i++) {
      // Real time: Agenda deletes the row after stop(), on its own schedule.
      await new Promise((r) => setTimeout(r, 50));
      queued = await agendaRows();
    }
    expect(queued.rows).toEqual([{ locked: false, due: true }]);

    // Another worker process (here: a second runner with its own Chromium) takes it.
    const logger = createLogger("silent");
    const renderer = new PdfRenderer({ chromium: { executablePath: undefined }, concurrency: 1, timeoutMs: 30_000, logger });
    const runner = await JobRunner.start({ backend: agendaBackend(pool), deps: { jobs: new PgJobStore(new Db(pool), "test"), purge: new PgPurgeStore(new Db(pool)), clock: systemClock, logger, pdf: renderer }, kinds: [pdfJob], processEveryMs: 500 });
    try {
      const done = await waitForJob(stopping.url, owner, id, 30_000);
      expect(done.status).toBe("completed");
      expect(squash(await pdfText((await download(stopping.url, owner, id)).bytes))).toContain("handed over");
      const attempts = await pool.query<{ attempts: number }>("SELECT attempts FROM jobs WHERE id = $1", [id]);
      expect(attempts.rows[0]!.attempts).toBe(2);
    } finally {
      await runner.stop();
      await renderer.close();
    }
  }, 60_000);
});
