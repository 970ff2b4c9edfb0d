/**
 * Start-up time (issue 12): these packages take 0.05–0.6 s each to load and
 * are needed only by some jobs or only with REDIS_URL, so loading the
 * service must not load them; they are imported on first use.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, test } from "vitest";

const LOADED_ON_FIRST_USE = ["puppeteer-core", "openai", "linkedom", "@mozilla/readability", "marked", "sanitize-html", "ioredis"];

/** Reports, on stderr, the package of every module the process resolves. */
const HOOK = `
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const m = resolved.url.match(/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//);
  if (m) process.stderr.write("package " + m[1] + "\\n");
  return resolved;
}`;

test("loading the service (src/app.ts) loads none of the packages only some jobs or REDIS_URL need", async () => {
  const root = fileURLToPath(new URL("../..", import.meta.url));
  const script = `
    import { register } from "node:module";
    register("data:text/javascript," + encodeURIComponent(${JSON.stringify(HOOK)}));
    await import("./src/app.ts");
  `;
  const { stderr } = await promisify(execFile)(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: root });
  const packages = new Set(stderr.split("\n").filter((l) => l.startsWith("package ")).map((l) => l.slice("package ".length)));
  expect(packages.has("pg")).toBe(true); // the hook saw the service's own dependencies
  expect(LOADED_ON_FIRST_USE.filter((p) => packages.has(p))).toEqual([]);
});
