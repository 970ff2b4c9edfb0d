/**
 * `npm start` rebuilds only when an input of the build changed
 * (scripts/build-if-changed.mjs), and always when one did: an edit, a new or
 * deleted file, a checkout that restores an older file. Run in a scratch
 * project whose `build` script only counts its runs.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const script = fileURLToPath(new URL("../../scripts/build-if-changed.mjs", import.meta.url));
let dir: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "agentbus-build-if-changed-"));
  for (const d of ["src", "gen", "dist/src"]) mkdirSync(path.join(dir, d), { recursive: true });
  writeFileSync(path.join(dir, "src/a.ts"), "export const a = 1;\n");
  writeFileSync(path.join(dir, "gen/b.ts"), "export const b = 1;\n");
  writeFileSync(path.join(dir, "tsconfig.json"), "{}\n");
  writeFileSync(path.join(dir, "tsconfig.build.json"), "{}\n");
  const build = `node -e "require('fs').appendFileSync('builds.txt','x')" && node -e "require('fs').writeFileSync('dist/src/cli.js','')" && node ${JSON.stringify(script)} --stamp`;
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "scratch", private: true, scripts: { build } }));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function start(): number {
  execFileSync(process.execPath, [script], { cwd: dir, stdio: "pipe" });
  try {
    return readFileSync(path.join(dir, "builds.txt"), "utf8").length;
  } catch {
    return 0;
  }
}

describe("build only when sources changed", () => {
  it("builds the first time and not again while nothing changed", () => {
    expect(start()).toBe(1);
    expect(start()).toBe(1);
    expect(start()).toBe(1);
  });

  it("builds again after an edit, a new file, a deleted file and an older file restored", () => {
    expect(start()).toBe(1);
    writeFileSync(path.join(dir, "src/a.ts"), "export const a = 2;\n");
    expect(start()).toBe(2);
    writeFileSync(path.join(dir, "gen/c.ts"), "export const c = 1;\n");
    expect(start()).toBe(3);
    unlinkSync(path.join(dir, "gen/c.ts"));
    expect(start()).toBe(4);
    utimesSync(path.join(dir, "src/a.ts"), new Date(2020, 0, 1), new Date(2020, 0, 1));
    expect(start()).toBe(5);
    expect(start()).toBe(5);
  });

  it("builds when the build output or its stamp is gone (a build that failed writes no stamp)", () => {
    expect(start()).toBe(1);
    rmSync(path.join(dir, "dist"), { recursive: true });
    mkdirSync(path.join(dir, "dist/src"), { recursive: true });
    expect(start()).toBe(2);
    writeFileSync(path.join(dir, "tsconfig.json"), '{"x":1}\n');
    rmSync(path.join(dir, "dist/.build-stamp"));
    expect(start()).toBe(3);
  });
});
