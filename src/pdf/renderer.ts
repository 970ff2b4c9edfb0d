/**
 * HTML → PDF with one headless Chromium per process (docs/decisions.md#pdf-jobs), driven
 * by puppeteer-core. Which Chromium, and its fonts: chromium.ts.
 *
 * Lifecycle: prepare() (called at start, off the request path) unpacks and
 * checks the Chromium once; a failure there leaves the renderer down with
 * its reason (reported by /health, PDF submissions answer 503) instead of
 * stopping the service. The browser itself starts on the first render (a
 * process that never renders a PDF never runs it), is shared by every
 * render, started again on the next render after it died (crash, OOM kill),
 * and closed by close() at shutdown (killed if it does not close in time).
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
import type { Browser, HTTPRequest, Page, PuppeteerNode, TimeoutError } from "puppeteer-core";
import type { Config } from "../platform/config.js";
import { JobFailure } from "../model/job-failure.js";
import { RESERVED_RUN_SLOTS } from "../model/jobs.js";
import type { Logger } from "../platform/logger.js";
import { chromiumSource, prepareChromium, type ChromiumOptions, type ChromiumSetup } from "./chromium.js";
import { MarkdownConverter } from "./markdown.js";

/**
 * puppeteer-core takes about half a second to load, so it is loaded with the
 * first launch of Chromium rather than at start-up (prepare() does not need
 * it). Kept once loaded: renderPage() tells its TimeoutError apart.
 */
let puppeteerModule: { launch: PuppeteerNode["launch"]; TimeoutError: typeof TimeoutError } | undefined;
async function loadPuppeteer(): Promise<NonNullable<typeof puppeteerModule>> {
  // The package's top-level launch is PuppeteerNode.launch, bound to its default instance.
  const { launch, TimeoutError } = await import("puppeteer-core");
  puppeteerModule ??= { launch, TimeoutError };
  return puppeteerModule;
}

/** Whether `err` is puppeteer's TimeoutError (never true before puppeteer is loaded: nothing could have thrown one). */
function isPuppeteerTimeout(err: unknown): boolean {
  return puppeteerModule !== undefined && err instanceof puppeteerModule.TimeoutError;
}

/** A rendered PDF larger than this fails the job (pdf_too_large): it is kept in the database for 24 hours. */
export const MAX_PDF_BYTES = 64 * 1024 * 1024;
/** How long close() waits for Chromium to exit before killing it. */
const CLOSE_TIMEOUT_MS = 3_000;

/** Only what the document itself may use. */
export const DOCUMENT_CSP =
  "default-src 'none'; style-src 'unsafe-inline' data:; img-src data:; font-src data:; media-src 'none'; " +
  "frame-src 'none'; form-action 'none'; base-uri 'none'; sandbox";

/**
 * Flags beyond puppeteer's defaults (which already disable background
 * networking, extensions, sync, component updates, default apps and more).
 */
const CHROMIUM_FLAGS = [
  // /dev/shm is small in containers; Debian's wrapper adds it below 3.8 GB anyway.
  "--disable-dev-shm-usage",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-domain-reliability",
  "--disable-breakpad",
  "--disable-gpu",
  "--no-first-run",
  "--no-default-browser-check",
  "--no-pings",
  "--mute-audio",
  "--hide-scrollbars",
  // Glyph positions independent of the screen's hinting: the same PDF on every machine.
  "--font-render-hinting=none",
  // Beneath the request interception: no host name resolves.
  "--host-resolver-rules=MAP * ~NOTFOUND",
];

export interface PdfRendererOptions {
  chromium: ChromiumOptions;
  concurrency: number;
  timeoutMs: number;
  logger: Logger;
}

/** The renderer as /health and the start-up line see it. */
export type RendererStatus =
  | { state: "starting"; source: string }
  | { state: "ready"; setup: ChromiumSetup }
  | { state: "down"; reason: string };

export class PdfRenderer {
  private launching: Promise<Browser> | undefined;
  private preparing: Promise<ChromiumSetup> | undefined;
  private state: RendererStatus;
  private browser: Browser | undefined;
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

  /** The running browser's process id, if one is running. */
  get browserPid(): number | undefined {
    return this.browser?.process()?.pid ?? undefined;
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
    try {
      if (this.closed) throw new JobFailure("pdf_renderer_unavailable", "The PDF renderer is shutting down", true);
      return await this.renderPage(html, signal, owner);
    } finally {
      release();
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
    await this.markdown.close();
    const browser = await this.launching?.catch(() => undefined);
    this.launching = undefined;
    this.browser = undefined;
    if (!browser) return;
    const closed = browser.close().then(() => true, () => false);
    const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), CLOSE_TIMEOUT_MS).unref());
    if (!(await Promise.race([closed, timer]))) browser.process()?.kill("SIGKILL");
    this.logger.info("chromium closed");
  }

  private async renderPage(html: string, outer: AbortSignal | undefined, owner: string): Promise<Uint8Array> {
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
      browser = await (outer ? untilAborted(this.start(), outer) : this.start());
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
        if (page === undefined && browser !== undefined) this.kill(browser, "did not open a page in time");
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
        this.kill(browser, "did not close a page in time");
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

  /** The running browser, or a new one. */
  private start(): Promise<Browser> {
    if (this.closed) return Promise.reject(new Error("the renderer is closed"));
    this.launching ??= this.launch();
    return this.launching;
  }

  private async launch(): Promise<Browser> {
    const asRoot = process.getuid?.() === 0;
    try {
      // Unpacking is not part of the launch's timeout (it takes seconds the first time).
      const setup = await this.chromium();
      const { launch } = await loadPuppeteer();
      const started = performance.now();
      const browser = await launch({
        executablePath: setup.executablePath,
        env: { ...process.env, ...setup.env },
        headless: true,
        // CDP over stdin/stdout-like pipes: no DevTools port another local user could reach.
        pipe: true,
        // Chromium refuses to run as root with its sandbox on.
        args: asRoot ? [...CHROMIUM_FLAGS, "--no-sandbox"] : CHROMIUM_FLAGS,
        // Our own shutdown closes it.
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
        timeout: 30_000,
        protocolTimeout: Math.max(60_000, 2 * this.options.timeoutMs),
      });
      browser.once("disconnected", () => {
        if (this.browser !== browser) return;
        this.browser = undefined;
        this.launching = undefined;
        if (!this.closed) this.logger.warn("chromium exited; the next render starts a new one");
      });
      if (this.closed) {
        await browser.close().catch(() => {});
        throw new Error("the renderer is closed");
      }
      this.browser = browser;
      this.logger.info(
        { pid: browser.process()?.pid, version: await browser.version(), sandbox: !asRoot, ms: Math.round(performance.now() - started) },
        "chromium started",
      );
      return browser;
    } catch (err) {
      this.launching = undefined;
      throw err;
    }
  }

  private kill(browser: Browser, why: string): void {
    this.logger.warn({ why }, "killing chromium");
    if (this.browser === browser) {
      this.browser = undefined;
      this.launching = undefined;
    }
    browser.process()?.kill("SIGKILL");
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
