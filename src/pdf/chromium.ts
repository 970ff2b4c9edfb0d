/**
 * Which Chromium prints PDFs, and what it needs to run (docs/decisions.md#pdf-jobs).
 *
 * By default the Chromium shipped in the @sparticuz/chromium npm package
 * (a chrome-headless-shell build, brotli-compressed in node_modules), not
 * Debian's /usr/bin/chromium: `npm install` is then all a machine needs (no
 * apt step), every machine prints with the same Chromium and the same fonts,
 * and it measured faster here (launch 1–2 s against 2.4–4.2 s, a one-page
 * print 0.03–0.25 s against 2–8 s for Debian's 156). AGENTBUS_CHROMIUM_PATH
 * names another Chromium instead (e.g. /usr/bin/chromium).
 *
 * The npm Chromium is unpacked once per package version into a folder of
 * this user's own under the temporary directory (about 190 MB; 7–14 s cold,
 * then instant), with the NSS/NSPR/expat libraries it links against (shipped
 * in the same package for Amazon Linux, and absent from a bare Debian) next
 * to it, found through LD_LIBRARY_PATH. Those libraries are only given to
 * the npm Chromium: another Chromium was built against its system's own.
 *
 * Every Chromium gets the same private fontconfig file (fonts.ts).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { constants, createReadStream, createWriteStream } from "node:fs";
import { access, chmod, lstat, mkdir, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { createBrotliDecompress } from "node:zlib";
import { extract } from "tar-fs";
import { FONTS_SUMMARY, prepareFonts } from "./fonts.js";
import { npmPackage } from "./npm-package.js";

const run = promisify(execFile);
const NPM_PACKAGE = "@sparticuz/chromium";

/** A Chromium ready to launch. */
export interface ChromiumSetup {
  executablePath: string;
  /** Where it comes from: the npm package and version, or the configured path. */
  source: string;
  /** As the executable reports it, e.g. "Chromium 143.0.7499.0". */
  version: string;
  /** Added to the environment Chromium is launched with. */
  env: Record<string, string>;
  fonts: string;
  /** Milliseconds spent unpacking the npm Chromium; 0 when it already was. */
  unpackedMs: number;
}

export interface ChromiumOptions {
  /** AGENTBUS_CHROMIUM_PATH; undefined: the npm Chromium. */
  executablePath: string | undefined;
  /** Where the npm Chromium and the fonts are unpacked; defaults to a folder of this user's under the temporary directory. */
  cacheDir?: string;
}

/** The default place of the unpacked Chromium and fonts. */
export function defaultCacheDir(): string {
  return path.join(tmpdir(), `agentbus-${process.getuid?.() ?? "user"}`);
}

/** Describes the configured Chromium without unpacking or running anything (for a process that does not render). */
export function chromiumSource(executablePath: string | undefined): string {
  return executablePath ?? `${NPM_PACKAGE} ${npmPackageVersion()}`;
}

/**
 * Whether the configured Chromium is there, without running it: a path must
 * be an executable file; the npm Chromium is a dependency, so always there
 * (whether it runs on this machine is prepareChromium's to find out).
 */
export async function chromiumInstalled(executablePath: string | undefined): Promise<boolean> {
  if (executablePath === undefined) return true;
  return access(executablePath, constants.X_OK).then(() => true, () => false);
}

/**
 * Unpacks (if needed) and checks the configured Chromium: it must run and
 * report its version. Throws with a message saying what is wrong.
 */
export async function prepareChromium(options: ChromiumOptions): Promise<ChromiumSetup> {
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  await ownPrivateDir(cacheDir);
  const fontsDir = path.join(cacheDir, "fonts");
  await mkdir(fontsDir, { recursive: true, mode: 0o700 });
  const fontconfig = prepareFonts(fontsDir);
  let executablePath: string;
  let source: string;
  const env: Record<string, string> = {};
  let unpackedMs = 0;
  if (options.executablePath !== undefined) {
    executablePath = options.executablePath;
    source = executablePath;
    try {
      await access(executablePath, constants.X_OK);
    } catch (err) {
      throw new Error(`AGENTBUS_CHROMIUM_PATH=${executablePath} is not an executable file (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
    }
  } else {
    const version = npmPackageVersion();
    source = `${NPM_PACKAGE} ${version}`;
    const started = performance.now();
    const dir = await unpackNpmChromium(path.join(cacheDir, `chromium-${version}`));
    if (dir.unpacked) unpackedMs = Math.round(performance.now() - started);
    executablePath = path.join(dir.path, "chromium");
    env.LD_LIBRARY_PATH = [path.join(dir.path, "lib"), process.env.LD_LIBRARY_PATH].filter((p) => p !== undefined && p !== "").join(":");
  }
  env.FONTCONFIG_FILE = await fontconfig;
  // Proves that it runs here (libraries found) before the first job needs it.
  const { stdout } = await run(executablePath, ["--version"], { env: { ...process.env, ...env }, timeout: 30_000 }).catch((err: unknown) => {
    throw new Error(`${executablePath} --version failed: ${firstLine(err)}`);
  });
  return { executablePath, source, version: stdout.trim(), env, fonts: FONTS_SUMMARY, unpackedMs };
}

function npmPackageVersion(): string {
  return npmPackage(NPM_PACKAGE).version;
}

/**
 * `target` holding the npm Chromium and its libraries. Unpacked under a
 * temporary name and renamed into place, so a folder under `target`'s name
 * is always complete, and two processes unpacking at once both end up with
 * one of them (the loser's copy is removed).
 */
async function unpackNpmChromium(target: string): Promise<{ path: string; unpacked: boolean }> {
  if (await isDirectory(target)) return { path: target, unpacked: false };
  const bin = path.join(npmPackage(NPM_PACKAGE).dir, "bin");
  const temporary = `${target}.${process.pid}-${randomBytes(4).toString("hex")}.tmp`;
  await mkdir(temporary, { mode: 0o700 });
  try {
    await Promise.all([
      pipeline(createReadStream(path.join(bin, "chromium.br")), createBrotliDecompress(), createWriteStream(path.join(temporary, "chromium"), { mode: 0o700 })),
      pipeline(createReadStream(path.join(bin, "al2023.tar.br")), createBrotliDecompress(), extract(temporary)),
    ]);
    await chmod(path.join(temporary, "chromium"), 0o700);
    try {
      await rename(temporary, target);
      return { path: target, unpacked: true };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if ((code === "ENOTEMPTY" || code === "EEXIST") && (await isDirectory(target))) return { path: target, unpacked: false };
      throw err;
    }
  } finally {
    await rm(temporary, { recursive: true, force: true });
  }
}

/**
 * Creates `dir` (mode 0700) or checks that an existing one is this user's
 * and writable by no one else: under a shared /tmp, another user could
 * otherwise have put a Chromium of their choosing there first.
 */
async function ownPrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  const uid = process.getuid?.();
  if (!info.isDirectory() || (uid !== undefined && info.uid !== uid) || (info.mode & 0o022) !== 0) {
    throw new Error(`${dir} is not a private folder of this user (owner ${info.uid}, mode ${(info.mode & 0o777).toString(8)}); remove it`);
  }
}

async function isDirectory(dir: string): Promise<boolean> {
  return stat(dir).then((s) => s.isDirectory(), () => false);
}

function firstLine(err: unknown): string {
  const e = err as { stderr?: string; message?: string; code?: string | number };
  const text = (e.stderr?.trim() || e.message || String(err)).split("\n")[0] ?? "";
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}
