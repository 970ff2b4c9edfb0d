/**
 * One headless Chromium, started on first use and started again on the next
 * use after it died (crash, OOM kill, or killed by the renderer for hanging).
 * The renderer (renderer.ts) keeps one per lane; this file knows how to
 * launch, watch, kill and close one, and nothing of documents or keys.
 */
import type { Browser, PuppeteerNode, TimeoutError } from "puppeteer-core";
import type { Logger } from "../platform/logger.js";
import type { ChromiumSetup } from "./chromium.js";

/**
 * puppeteer-core takes about half a second to load, so it is loaded with the
 * first launch of Chromium rather than at start-up (prepare() does not need
 * it). Kept once loaded: isPuppeteerTimeout() tells its TimeoutError apart.
 */
let puppeteerModule: { launch: PuppeteerNode["launch"]; TimeoutError: typeof TimeoutError } | undefined;
async function loadPuppeteer(): Promise<NonNullable<typeof puppeteerModule>> {
  // The package's top-level launch is PuppeteerNode.launch, bound to its default instance.
  const { launch, TimeoutError } = await import("puppeteer-core");
  puppeteerModule ??= { launch, TimeoutError };
  return puppeteerModule;
}

/** Whether `err` is puppeteer's TimeoutError (never true before puppeteer is loaded: nothing could have thrown one). */
export function isPuppeteerTimeout(err: unknown): boolean {
  return puppeteerModule !== undefined && err instanceof puppeteerModule.TimeoutError;
}

/** How long close() waits for Chromium to exit before killing it. */
export const CLOSE_TIMEOUT_MS = 3_000;

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

export interface ChromiumBrowserOptions {
  /** Resolves to the Chromium to launch (unpacked and checked once, by the renderer). */
  setup: () => Promise<ChromiumSetup>;
  /** CDP calls' own timeout (puppeteer's protocolTimeout). */
  protocolTimeoutMs: number;
  logger: Logger;
}

export class ChromiumBrowser {
  private launching: Promise<Browser> | undefined;
  private browser: Browser | undefined;
  private closed = false;
  /** Moves on at every close: a launch that finishes after one closes what it started. */
  private generation = 0;

  constructor(private readonly options: ChromiumBrowserOptions) {}

  /** The running browser's process id, if one is running. */
  get pid(): number | undefined {
    return this.browser?.process()?.pid ?? undefined;
  }

  /** Whether a browser runs or is starting. */
  get running(): boolean {
    return this.launching !== undefined;
  }

  /** The running browser, or a new one. */
  start(): Promise<Browser> {
    if (this.closed) return Promise.reject(new Error("the renderer is closed"));
    this.launching ??= this.launch(this.generation);
    return this.launching;
  }

  /** Kills `browser` if it is this one's (a hung browser: the next start() launches a new one). */
  kill(browser: Browser, why: string): void {
    this.options.logger.warn({ why }, "killing chromium");
    if (this.browser === browser) {
      this.browser = undefined;
      this.launching = undefined;
    }
    browser.process()?.kill("SIGKILL");
  }

  /**
   * Closes the browser (killed after CLOSE_TIMEOUT_MS). With `forGood`, later
   * start() calls fail; without, the next start() launches a new one.
   */
  async close(forGood = true): Promise<void> {
    if (forGood) this.closed = true;
    this.generation++;
    const launching = this.launching;
    this.launching = undefined;
    this.browser = undefined;
    const browser = await launching?.catch(() => undefined);
    if (!browser) return;
    const closed = browser.close().then(() => true, () => false);
    const timer = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), CLOSE_TIMEOUT_MS).unref());
    if (!(await Promise.race([closed, timer]))) browser.process()?.kill("SIGKILL");
    this.options.logger.info("chromium closed");
  }

  private async launch(generation: number): Promise<Browser> {
    const asRoot = process.getuid?.() === 0;
    try {
      // Unpacking is not part of the launch's timeout (it takes seconds the first time).
      const setup = await this.options.setup();
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
        protocolTimeout: this.options.protocolTimeoutMs,
      });
      browser.once("disconnected", () => {
        if (this.browser !== browser) return;
        this.browser = undefined;
        this.launching = undefined;
        if (!this.closed) this.options.logger.warn("chromium exited; the next render starts a new one");
      });
      if (this.closed || generation !== this.generation) {
        await browser.close().catch(() => {});
        throw new Error("the renderer is closed");
      }
      this.browser = browser;
      this.options.logger.info(
        { pid: browser.process()?.pid, version: await browser.version(), sandbox: !asRoot, ms: Math.round(performance.now() - started) },
        "chromium started",
      );
      return browser;
    } catch (err) {
      if (generation === this.generation) this.launching = undefined;
      throw err;
    }
  }
}
