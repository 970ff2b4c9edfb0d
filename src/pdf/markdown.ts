/**
 * Markdown → sanitised HTML on a worker thread. marked and sanitize-html are
 * synchronous and take about half a second per MiB of Markdown (seconds for
 * the 10 MiB a submission may carry); on the event loop that would stall
 * every API request of `agentbus serve` meanwhile. One thread per process,
 * started with the first Markdown document and kept (unref'd, so it never
 * holds the process open); documents take turns. A conversion that runs
 * past its deadline (pathological input) terminates the thread, which the
 * next document starts again.
 *
 * The thread runs the same two calls as markdownToSafeHtml() (document.ts),
 * with the same options, passed as workerData (RegExps clone fine). Its code
 * is plain JavaScript evaluated from a string, so it runs the same from
 * source (tsx, vitest) and from the build, without a file to ship.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { JobFailure } from "../model/job-failure.js";
import type { MARKED_OPTIONS, SANITIZE_OPTIONS } from "./document.js";

interface ThreadOptions {
  markedOptions: typeof MARKED_OPTIONS;
  sanitizeOptions: typeof SANITIZE_OPTIONS;
}

const WORKER_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
Promise.all([import(workerData.marked), import(workerData.sanitize)]).then(([markedModule, sanitizeModule]) => {
  const marked = new markedModule.Marked(workerData.markedOptions);
  const sanitize = sanitizeModule.default;
  parentPort.on("message", ({ id, markdown }) => {
    try {
      parentPort.postMessage({ id, html: sanitize(marked.parse(markdown), workerData.sanitizeOptions) });
    } catch (err) {
      parentPort.postMessage({ id, error: String(err && err.stack || err) });
    }
  });
});
`;

const require = createRequire(import.meta.url);

interface Pending {
  resolve: (html: string) => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
}

export class MarkdownConverter {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  private closed = false;

  constructor(private readonly timeoutMs: number) {}

  /** The sanitised HTML of `markdown`; JobFailure pdf_render_timeout past the deadline. */
  async convert(markdown: string, timeoutMs = this.timeoutMs): Promise<string> {
    // document.ts loads marked and sanitize-html (~0.4 s): with the first document, not at start-up.
    const { MARKED_OPTIONS, SANITIZE_OPTIONS } = await import("./document.js");
    if (this.closed) throw new JobFailure("pdf_renderer_unavailable", "The PDF renderer is shutting down", true);
    const worker = this.start({ markedOptions: MARKED_OPTIONS, sanitizeOptions: SANITIZE_OPTIONS });
    const id = ++this.next;
    return new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        // The thread is stuck in this document: end it (and whatever waited behind it, retried by their jobs).
        this.fail(new JobFailure("pdf_render_timeout", `Converting the Markdown took longer than ${timeoutMs} ms`), id);
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      worker.postMessage({ id, markdown });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const worker = this.worker;
    this.fail(new JobFailure("pdf_renderer_unavailable", "The PDF renderer is shutting down", true));
    await worker?.terminate();
  }

  private start(options: ThreadOptions): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_CODE, {
      eval: true,
      workerData: {
        marked: pathToFileURL(require.resolve("marked")).href,
        sanitize: pathToFileURL(require.resolve("sanitize-html")).href,
        ...options,
      },
    });
    worker.unref();
    worker.on("message", ({ id, html, error }: { id: number; html?: string; error?: string }) => {
      const job = this.pending.get(id);
      if (!job) return;
      this.pending.delete(id);
      clearTimeout(job.timer);
      if (error !== undefined) job.reject(new JobFailure("pdf_render_failed", `Converting the Markdown failed: ${error.split("\n")[0]}`));
      else job.resolve(html ?? "");
    });
    const lost = (err: unknown) => {
      if (this.worker !== worker) return;
      this.fail(new JobFailure("pdf_render_failed", `The Markdown thread stopped: ${String(err)}`, true));
    };
    worker.on("error", lost);
    worker.on("exit", (code) => lost(`exit code ${code}`));
    this.worker = worker;
    return worker;
  }

  /**
   * Rejects `culprit` with `err`, and every other pending conversion with a
   * retryable failure; the thread is ended and started again on the next document.
   */
  private fail(err: JobFailure, culprit?: number): void {
    const worker = this.worker;
    this.worker = undefined;
    for (const [id, job] of this.pending) {
      clearTimeout(job.timer);
      job.reject(culprit === undefined || id === culprit ? err : new JobFailure("pdf_render_failed", "The Markdown thread was restarted", true));
    }
    this.pending.clear();
    void worker?.terminate();
  }
}
