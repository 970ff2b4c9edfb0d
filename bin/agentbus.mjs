#!/usr/bin/env node
// `npx agentbus …` in this repository (`npm install` links it into
// node_modules/.bin; see scripts/link-bin.mjs). It runs the built CLI when the
// build is current, else the sources through tsx (a dev install), else it
// builds first. Nothing but the CLI's own output reaches stdout: `agentbus
// mcp` speaks its protocol there.
import { execFileSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const script = path.join(root, "scripts/build-if-changed.mjs");
const run = (args) => execFileSync(process.execPath, [script, ...args], { cwd: root, stdio: ["ignore", 2, 2] });

let current = true;
try {
  run(["--check"]);
} catch {
  current = false;
}
if (!current) {
  let tsx;
  try {
    tsx = await import("tsx/esm/api");
  } catch {
    // A production install has no tsx: build (its output goes to stderr).
    run([]);
    current = true;
  }
  if (tsx) {
    tsx.register();
    await import(pathToFileURL(path.join(root, "src/cli.ts")).href);
  }
}
if (current) await import(pathToFileURL(path.join(root, "dist/src/cli.js")).href);
