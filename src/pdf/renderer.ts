/**
 * HTML → PDF with headless Chromium (docs/decisions.md#pdf-jobs), driven by
 * puppeteer-core: one browser per process, and a spare one for a second key
 * while two keys render (see Lane). Which Chromium, and its fonts:
 * chromium.ts; one browser's launch, restarts and shutdown: browser.ts.
 *
 * Lifecycle: prepare() (called at start, off the request path) unpacks and
 * checks the Chromium once; a failure there leaves the renderer down with
 * its reason (reported by /health, PDF submissions answer 503) instead of
 * stopping the service. The browser itself starts on the first render (a
 * process that never renders a PDF never runs it), is shared by the renders
 * of its lane, started again on the next render after it died (crash, OOM
 * kill), and closed by close() at shutdown (killed if it does not close in
 * time).
 *
 * Concurrency: at most `concurrency` + RESERVED_RUN_SLOTS renders at once;
 * the rest wait their turn. That is as many pdf jobs as the job runner runs
 * in this process, the reserved one only for a key with no pdf job running
 * (docs/decisions.md#job-fairness), so a job never waits here for a slot the
 * runner gave it. Each render gets a page of its own, closed afterwards.
 * (Not a browser context of its own: that costs about 110 ms, 40 % of a
 * one-page render, and isolates nothing here: with no JavaScript and no
 * network a document can neither write nor read cookies or storage, and
 * request interception turns the cache off.)
 *
 * The page is a sandbox of its own, not only Chromium's: Chromium's sandbox
 * is off when running as root (--no-sandbox is required there), so the page
 * must not be able to do anything worth sandboxing:
 * - JavaScript is disabled before the document loads.
 * - Every request is intercepted. The document itself is answered from
 *   memory (a made-up URL under .invalid, which never resolves); data: URLs
 *   (inline images and fonts) are allowed; everything else (http(s), file:,
 *   ftp:, ws:) is aborted before it leaves the browser.
 * - The document is served with a Content-Security-Policy that allows only
 *   inline styles and data: images, fonts and stylesheets, so a request the
 *   interception missed would still be refused by the page.
 * - The document cannot navigate away: with JavaScript off its only way is a
 *   meta refresh (to any URL, about:blank and itself included), which
 *   Chromium refuses in a sandboxed document (the CSP's `sandbox`, which also
 *   refuses forms, popups and top-level navigation). A navigation request
 *   that still arrives is cancelled so that the document stays. Either way
 *   the page prints as written, instead of failing on a vanished page.
 * - --host-resolver-rules resolves no host name at all, and CDP runs over a
 *   pipe (no DevTools port on localhost).
 * - A render has a deadline (`timeoutMs`): past it, its context is closed
 *   and the job fails with pdf_render_timeout; a browser that did not even
 *   open a page in that time is killed and restarted.
 */
import type { Browser, HTTPRequest, Page } from "puppeteer-core";
import type { Config } from "../platform/config.js";
import { JobFailure } from "../model/job-failure.js";
import { RESERVED_RUN_SLOTS } from "../model/jobs.js";
import type { Logger } from "../platform/logger.js";
import { ChromiumBrowser, CLOSE_TIMEOUT_MS, isPuppeteerTimeout } from "./browser.js";
import { chromiumSource, prepareChromium, type ChromiumOptions, type ChromiumSetup } from "./chromium.js";
import { MarkdownConverter } from "./markdown.js";

/** A rendered PDF larger than this fails the job (pdf_too_large): it is kept in the database for 24 hours. */
export const MAX_PDF_BYTES = 64 * 1024 * 1024;
/** How long the spare browser outlives the last render (see Lane). */
const SPARE_IDLE_MS = 60_000;

/** Only what the document itself may use. */
export const DOCUMENT_CSP =
  "default-src 'none'; style-src 'unsafe-inline' data:; img-src data:; font-src data:; media-src 'none'; " +
  "frame-src 'none'; form-action 'none'; base-uri 'none'; sandbox";

/**
 * A browser and the keys rendering in it now (with their page counts).
 *
 * Every page of one Chromium shares its browser process, which composes and
 * streams each printed PDF one at a time: one key's 60-page table then held
 * another key's one-line page behind it, and throttling the key's renderer
 * (weigh()) cannot reach that queue. So there are two browsers: a key's
 * renders go to the browser already rendering for it, else to the one
 * rendering for fewer keys. A lone key renders in the first; a second key
 * arriving while the first renders gets a browser to itself. The second
 * (spare) browser is started as soon as the first renders, and a render
 * never waits for it to start (1–2 s; the first browser takes the page
 * meanwhile); it is closed once nothing has rendered for SPARE_IDLE_MS
 * (about 250 MB it does not need to keep).
 */
interface Lane {
  browser: ChromiumBrowser;
  owners: Map<string, number>;
}

export interface PdfRendererOptions {
  chromium: ChromiumOptions;
  concurrency: number;
  timeoutMs: number;
  logger: Logger;
  /** How long the spare browser outlives the last render; SPARE_IDLE_MS unless set (tests). */
  spareIdleMs?: number;
}

/** The renderer as /health and the start-up line see it. */
export type RendererStatus =
  | { state: "starting"; source: string }
  | { state: "ready"; setup: ChromiumSetup }
  | { state: "down"; reason: string };

export class PdfRenderer {
  private preparing: Promise<ChromiumSetup> | undefined;
  private state: RendererStatus;
  private readonly lanes: readonly [Lane, Lane];
  private spareTimer: NodeJS.Timeout | undefined;
  private readonly slots: Semaphore;
  private closed = false;
  private documents = 0;
  /** The pages rendering now, each with the key it renders for (see weigh()). */
  private readonly rendering = new Map<Page, string>();
  /** The CPU throttling rate each of those pages runs at now. */
  private readonly rates = new WeakMap<Page, number>();
  private readonly logger: Logger;
  /** Markdown → sanitised HTML off the event loop, shut down with the browser. */
  readonly markdown: MarkdownConverter;

  /** The renderer of a worker process, as configured (AGENTBUS_CHROMIUM_PATH, AGENTBUS_PDF_*). */
  static fromConfig(config: Config, logger: Logger): PdfRenderer {
    return new PdfRenderer({
      chromium: { executablePath: config.chromiumPath },
      concurrency: config.pdfConcurrency,
      timeoutMs: config.pdfTimeoutMs,
      logger,
    });
  }

  constructor(private readonly options: PdfRendererOptions) {
    this.slots = new Semaphore(options.concurrency + RESERVED_RUN_SLOTS);
    this.markdown = new MarkdownConverter(options.timeoutMs);
    this.logger = options.logger.child({ component: "pdf-renderer" });
    this.state = { state: "starting", source: chromiumSource(options.chromium.executablePath) };
    const lane = (): Lane => ({
      browser: new ChromiumBrowser({ setup: () => this.chromium(), protocolTimeoutMs: Math.max(60_000, 2 * options.timeoutMs), logger: this.logger }),
      owners: new Map(),
    });
    this.lanes = [lane(), lane()];
  }

  /**
   * Unpacks and checks the Chromium (once; later calls share the outcome).
   * Never throws: a failure is the renderer's state, and each render then
   * fails as pdf_renderer_unavailable.
   */
  prepare(): Promise<RendererStatus> {
    return this.chromium().then(() => this.state, () => this.state);
  }

  private chromium(): Promise<ChromiumSetup> {
    this.preparing ??= prepareChromium(this.options.chromium).then(
      (setup) => {
        this.state = { state: "ready", setup };
        return setup;
      },
      (err: unknown) => {
        this.state = { state: "down", reason: messageOf(err) };
        throw err;
      },
    );
    return this.preparing;
  }

  /** Starting (unpacking), ready, or down with the reason. */
  get status(): RendererStatus {
    return this.state;
  }

  /** Renders at once per process for keys already rendering (AGENTBUS_PDF_CONCURRENCY); the reserve comes on top. */
  get concurrency(): number {
    return this.options.concurrency;
  }

  /** The first browser's process id, if it runs. */
  get browserPid(): number | undefined {
    return this.lanes[0].browser.pid;
  }

  /** The spare browser's process id, if it runs (see Lane). */
  get spareBrowserPid(): number | undefined {
    return this.lanes[1].browser.pid;
  }

  /**
   * Renders a complete HTML document to PDF (A4 unless its CSS says otherwise).
   * Throws JobFailure (pdf_render_timeout, pdf_too_large; pdf_render_failed
   * and pdf_renderer_unavailable are retryable) or, when `signal` aborts,
   * its reason.
   */
  /** Renders `html` for the key `owner` (whose renders share the machine as one; see weigh()). */
  async render(html: string, signal?: AbortSignal, owner = ""): Promise<Uint8Array> {
    const release = await this.slots.acquire(signal);
    const lane = this.enter(owner);
    try {
      if (this.closed) throw new JobFailure("pdf_renderer_unavailable", "The PDF renderer is shutting down", true);
      return await this.renderPage(lane.browser, html, signal, owner);
    } finally {
      this.leave(lane, owner);
      release();
    }
  }

  /** The lane `owner` renders in (see Lane), counted in; the spare is started if it is not running. */
  private enter(owner: string): Lane {
    clearTimeout(this.spareTimer);
    const [first, spare] = this.lanes;
    // A spare still starting is not waited for: the first browser renders now rather than a launch later.
    const spareUp = spare.browser.pid !== undefined;
    const lane = spare.owners.has(owner) || (spareUp && !first.owners.has(owner) && spare.owners.size < first.owners.size) ? spare : first;
    lane.owners.set(owner, (lane.owners.get(owner) ?? 0) + 1);
    // Failing to start is the next render's in it to report.
    if (!spare.browser.running && !this.closed) spare.browser.start().catch(() => {});
    return lane;
  }

  private leave(lane: Lane, owner: string): void {
    const n = lane.owners.get(owner)! - 1;
    if (n > 0) lane.owners.set(owner, n);
    else lane.owners.delete(owner);
    if (this.lanes.every((l) => l.owners.size === 0)) {
      this.spareTimer = setTimeout(() => void this.lanes[1].browser.close(false), this.options.spareIdleMs ?? SPARE_IDLE_MS).unref();
    }
  }

  /**
   * Renders share the cores by key, not by page (issue 26): while other keys
   * render fewer pages at once, each page of a key with n renders running is
   * slowed 2n times (Chromium's own CPU throttling, CDP
   * Emulation.setCPUThrottlingRate), so a key holding every render slot
   * yields to another key's one page instead of taking two thirds of the
   * cores from it. Keys rendering as many pages as each other, or alone, run
   * at full speed: throttling them all would only leave cores idle.
   */
  private weigh(): void {
    const perOwner = new Map<string, number>();
    for (const owner of this.rendering.values()) perOwner.set(owner, (perOwner.get(owner) ?? 0) + 1);
    const fewest = Math.min(...perOwner.values());
    for (const [page, owner] of this.rendering) {
      const n = perOwner.get(owner)!;
      const rate = n > fewest ? 2 * n : 1;
      if ((this.rates.get(page) ?? 1) === rate) continue;
      this.rates.set(page, rate);
      // A page closing meanwhile refuses; nothing to slow then.
      page.emulateCPUThrottling(rate > 1 ? rate : null).catch(() => {});
    }
  }

  /** Closes the browser (killed after CLOSE_TIMEOUT_MS); later renders fail. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.spareTimer);
    await this.markdown.close();
    await Promise.all(this.lanes.map((lane) => lane.browser.close()));
  }

  private async renderPage(chromium: ChromiumBrowser, html: string, outer: AbortSignal | undefined, owner: string): Promise<Uint8Array> {
    let browser: Browser | undefined;
    let page: Page | undefined;
    // Starting Chromium is not the document's time (puppeteer's launch timeout bounds it).
    let deadline: AbortSignal | undefined;
    // Chromium dying mid-render does not reliably reject every pending CDP
    // call (a navigation can wait on for ever), so its exit ends the render
    // itself, as a retryable failure rather than a deadline miss.
    const exited = new AbortController();
    const onExit = () => exited.abort(new Error("Chromium exited while rendering"));
    try {
      browser = await (outer ? untilAborted(chromium.start(), outer) : chromium.start());
      browser.once("disconnected", onExit);
      if (!browser.connected) onExit();
      deadline = AbortSignal.timeout(this.options.timeoutMs);
      const signal = AbortSignal.any(outer ? [outer, deadline, exited.signal] : [deadline, exited.signal]);
      const opening = browser.newPage();
      // A page that arrives after the abort is closed by the finally below or, if later still, here.
      void opening.then((p) => {
        page = p;
        if (signal.aborted) void p.close().catch(() => {});
      }, () => {});
      page = await untilAborted(opening, signal);
      this.rendering.set(page, owner);
      this.weigh();
      // Every step may hang on a wedged browser, so the whole of it races the deadline.
      const printing = this.print(page, html);
      printing.catch(() => {});
      const pdf = await untilAborted(printing, signal);
      if (pdf.byteLength > MAX_PDF_BYTES) {
        throw new JobFailure("pdf_too_large", `The PDF would be ${pdf.byteLength} bytes; at most ${MAX_PDF_BYTES} are kept`);
      }
      return pdf;
    } catch (err) {
      if (err instanceof JobFailure) throw err;
      if (outer?.aborted) throw outer.reason;
      if (exited.signal.aborted) {
        throw new JobFailure("pdf_render_failed", "Chromium exited while rendering", true, { cause: err });
      }
      if (deadline?.aborted || (browser !== undefined && isPuppeteerTimeout(err))) {
        // A browser that could not even open a page in time is stuck: start over.
        if (page === undefined && browser !== undefined) chromium.kill(browser, "did not open a page in time");
        throw new JobFailure("pdf_render_timeout", `Rendering took longer than ${this.options.timeoutMs} ms`);
      }
      if (browser === undefined) {
        throw new JobFailure("pdf_renderer_unavailable", `Chromium could not be started: ${messageOf(err)}`, true, { cause: err });
      }
      throw new JobFailure("pdf_render_failed", `Chromium failed while rendering: ${messageOf(err)}`, true, { cause: err });
    } finally {
      if (page !== undefined && this.rendering.delete(page)) this.weigh();
      browser?.off("disconnected", onExit);
      // Closing the page ends whatever it was still doing; a browser that
      // cannot even do that in time is killed (the next render starts a new one).
      if (page && browser && !(await settlesWithin(page.close(), CLOSE_TIMEOUT_MS))) {
        chromium.kill(browser, "did not close a page in time");
      }
    }
  }

  /** Loads the document into `page` (no JavaScript, no network) and prints it. */
  private async print(page: Page, html: string): Promise<Uint8Array> {
    page.setDefaultTimeout(this.options.timeoutMs);
    await page.setJavaScriptEnabled(false);
    await page.setRequestInterception(true);
    const url = `http://document.agentbus.invalid/${++this.documents}`;
    let served = false;
    let blocked = 0;
    let navigations = 0;
    page.on("request", (request: HTTPRequest) => {
      const target = request.url();
      let handled: Promise<void>;
      if (!served && target === url && request.isNavigationRequest()) {
        served = true;
        handled = request.respond({
          status: 200,
          contentType: "text/html; charset=utf-8",
          headers: { "Content-Security-Policy": DOCUMENT_CSP },
          body: html,
        });
      } else if (request.isNavigationRequest()) {
        // Any navigation the document starts itself (meta refresh, to any
        // URL, data: and its own included): "aborted" is the one error
        // Chromium cancels a navigation with without committing an error
        // page, so the document stays and prints as if it had not asked.
        navigations++;
        handled = request.abort("aborted");
      } else if (target.startsWith("data:")) {
        handled = request.continue();
      } else {
        blocked++;
        handled = request.abort("blockedbyclient");
      }
      // Fails only when the page is already gone.
      handled.catch(() => {});
    });
    await page.goto(url, { waitUntil: "load" });
    const pdf = await page.pdf({
      format: "a4",
      printBackground: true,
      preferCSSPageSize: true,
      margin: { top: "15mm", bottom: "15mm", left: "15mm", right: "15mm" },
      timeout: this.options.timeoutMs,
    });
    if (blocked > 0 || navigations > 0) this.logger.debug({ blocked, navigations }, "requests of a document blocked");
    return pdf;
  }
}

/** True when the promise settles (either way) within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true, () => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The promise's outcome, or the signal's reason if it aborts first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err as Error);
      },
    );
  });
}

/** A counting semaphore whose waiters may give up (abort). */
class Semaphore {
  private readonly waiters: Array<() => void> = [];
  private free: number;

  constructor(size: number) {
    this.free = size;
  }

  acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve(this.releaser());
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(grant);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(grant);
    });
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.free++;
    };
  }
}
