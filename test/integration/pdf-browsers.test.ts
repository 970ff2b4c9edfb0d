/**
 * The renderer's two browsers (src/pdf/renderer.ts, Lane): a key renders in
 * the browser already rendering for it, a second key in the other one, so
 * that one key's long print does not hold another key's page in the same
 * browser process. Which browser a page is in shows when a browser is
 * killed: the renders in it fail (retryable), the others finish.
 */
import { readFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { JobFailure } from "../../src/model/job-failure.js";
import { createLogger } from "../../src/platform/logger.js";
import { PdfRenderer } from "../../src/pdf/renderer.js";
import { pdfText } from "../support/pdf.js";

/** A document Chromium takes seconds to lay out and print. */
const LONG = `<!doctype html><table>${"<tr><td>cell</td><td>cell</td><td>cell</td></tr>".repeat(20_000)}</table>`;

let renderer: PdfRenderer | undefined;
afterEach(async () => {
  await renderer?.close();
  renderer = undefined;
});

function newRenderer(spareIdleMs?: number): PdfRenderer {
  renderer = new PdfRenderer({ chromium: { executablePath: undefined }, concurrency: 2, timeoutMs: 60_000, logger: createLogger("silent"), ...(spareIdleMs === undefined ? {} : { spareIdleMs }) });
  return renderer;
}

/** Resolves once `read` returns something other than undefined (real time: real Chromium processes). */
async function until<T>(read: () => T | undefined, ms = 20_000): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const value = read();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether the process has exited (gone, or a zombie its parent has not reaped yet). */
function exited(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.startsWith("Z");
  } catch {
    return true;
  }
}

/**
 * Renders one page after another until `read` returns something: a spare
 * still starting when the renders stop is closed as it comes up, so the
 * renders go on until it is.
 */
async function renderingUntil<T>(r: PdfRenderer, read: () => T | undefined): Promise<T> {
  for (let i = 0; i < 200; i++) {
    await r.render("<p>one</p>", undefined, "a-key");
    const value = read();
    if (value !== undefined) return value;
  }
  throw new Error("timed out");
}

const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (err: unknown) => err);

describe("the PDF renderer's browsers", () => {
  it("renders a second key's page in a browser of its own while the first key renders", async () => {
    const r = newRenderer();
    // Both browsers up (the spare starts with the first render, so that a second key does not wait for a launch).
    await r.render("<p>warm</p>", undefined, "busy-key");
    const firstPid = await until(() => r.browserPid);
    await until(() => r.spareBrowserPid);
    const first = failure(r.render(LONG, undefined, "busy-key"));
    // Well into the long document (seconds of layout and printing).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const other = r.render("<p>another key's page</p>", undefined, "other-key");
    process.kill(firstPid, "SIGKILL");
    expect(await pdfText(Buffer.from(await other))).toContain("another key's page");
    const err = await first;
    expect(err).toBeInstanceOf(JobFailure);
    expect(err).toMatchObject({ code: "pdf_render_failed", retryable: true });
  }, 60_000);

  it("keeps one key's renders in the browser already rendering for it", async () => {
    const r = newRenderer();
    await r.render("<p>warm</p>", undefined, "busy-key");
    const firstPid = await until(() => r.browserPid);
    await until(() => r.spareBrowserPid);
    const one = failure(r.render(LONG, undefined, "busy-key"));
    const two = failure(r.render(LONG, undefined, "busy-key"));
    // Both well into their documents.
    await new Promise((resolve) => setTimeout(resolve, 300));
    process.kill(firstPid, "SIGKILL");
    expect(await one).toMatchObject({ code: "pdf_render_failed" });
    expect(await two).toMatchObject({ code: "pdf_render_failed" });
  }, 60_000);

  it("closes the spare browser once nothing has rendered for a while, and keeps the first", async () => {
    const r = newRenderer(300);
    const spare = await renderingUntil(r, () => r.spareBrowserPid);
    await until(() => (r.spareBrowserPid === undefined ? true : undefined));
    await until(() => (exited(spare) ? true : undefined), 5_000);
    expect(r.browserPid).toBeTypeOf("number");
    // And it comes back with the next render.
    expect(await renderingUntil(r, () => r.spareBrowserPid)).not.toBe(spare);
  }, 60_000);
});
