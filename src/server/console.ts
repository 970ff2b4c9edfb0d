/**
 * The web console (console/, built into dist/console by scripts/build-console.mjs):
 * its page at / for browsers and its two assets under /console/. Read once at
 * start-up, served from memory. A checkout that was never built has no
 * console; / then keeps the plain landing page.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface ConsoleAsset {
  type: string;
  body: Buffer;
  etag: string;
}

export interface ConsoleAssets {
  page: ConsoleAsset;
  /** By request path: /console/app.js, /console/app.css. */
  files: ReadonlyMap<string, ConsoleAsset>;
}

/**
 * Strict: scripts and styles from this origin only (no inline code at all),
 * API calls to this origin, the PDF preview from a blob the page made, and
 * no framing by anyone (clickjacking).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "frame-src blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

// From dist/src/server (the build) the console is dist/console; from src/server (tsx), dist/console too.
const CANDIDATES = ["../../console/", "../../dist/console/"].map((p) => fileURLToPath(new URL(p, import.meta.url)));

const asset = (type: string, body: Buffer): ConsoleAsset => ({
  type,
  body,
  etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
});

/** The built console, or undefined when there is none. `dir` overrides where it is looked for. */
export function loadConsoleAssets(dir?: string): ConsoleAssets | undefined {
  const found = dir !== undefined ? dir : CANDIDATES.find((d) => existsSync(`${d}index.html`) && existsSync(`${d}app.js`));
  if (found === undefined || !existsSync(`${found}/index.html`)) return undefined;
  const read = (name: string) => readFileSync(`${found}/${name}`);
  return {
    page: asset("text/html; charset=utf-8", read("index.html")),
    files: new Map([
      ["/console/app.js", asset("text/javascript; charset=utf-8", read("app.js"))],
      ["/console/app.css", asset("text/css; charset=utf-8", read("app.css"))],
    ]),
  };
}
