// `npm start` runs this first: it builds (tsc + copy-assets) only when an
// input of the build changed since the last successful one, so a restart
// with nothing changed costs a few stat calls instead of a 10 s compile.
//
// The fingerprint is every input file's path, size and mtime (not only the
// newest mtime): a `git pull`, an edit, a deleted file or a checkout that
// restores an older file all change it. It is written after a successful
// build only, so a failed build is retried at the next start.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

const STAMP = "dist/.build-stamp";
// What the build reads: tsconfig.build.json compiles src and gen, and
// copy-assets.mjs copies the .sql under src/store (walked with the rest of
// src, so an edited function file triggers a build too); build-console.mjs
// bundles console/ with the browser client; the
// scripts and the npm files decide how (and with which compiler).
const INPUTS = [
  "src",
  "gen",
  "console",
  "clients/typescript/src",
  "tsconfig.json",
  "tsconfig.build.json",
  "package.json",
  "package-lock.json",
  "scripts/copy-assets.mjs",
  "scripts/build-console.mjs",
  "scripts/build-if-changed.mjs",
];

function fingerprint() {
  const hash = createHash("sha256");
  const visit = (p) => {
    let s;
    try {
      s = statSync(p);
    } catch {
      hash.update(`${p}\0missing\n`);
      return;
    }
    if (s.isDirectory()) {
      for (const name of readdirSync(p).sort()) visit(path.join(p, name));
    } else {
      hash.update(`${p}\0${s.size}\0${s.mtimeMs}\n`);
    }
  };
  for (const input of INPUTS) visit(input);
  return hash.digest("hex");
}

if (process.argv[2] === "--stamp") {
  // The end of `npm run build`: a manual build counts as well.
  writeFileSync(STAMP, `${fingerprint()}\n`);
  process.exit(0);
}

const before = fingerprint();
const upToDate = existsSync("dist/src/cli.js") && existsSync(STAMP) && readFileSync(STAMP, "utf8").trim() === before;
// --check: only say (exit 0 current, 1 not), for bin/agentbus.mjs.
if (process.argv[2] === "--check") process.exit(upToDate ? 0 : 1);
if (upToDate && process.env.AGENTBUS_FORCE_BUILD !== "1") process.exit(0);

process.stderr.write("agentbus: sources changed since the last build; building (npm run build)…\n");
try {
  execFileSync(process.platform === "win32" ? "npm.cmd" : "npm", ["run", "--silent", "build"], { stdio: "inherit" });
} catch {
  process.stderr.write("agentbus: the build failed; fix the errors above and run npm start again.\n");
  process.exit(1);
}
// The fingerprint taken before the build (the build stamped the one after):
// a file edited during the build triggers another build next time rather
// than being taken as built.
writeFileSync(STAMP, `${before}\n`);
