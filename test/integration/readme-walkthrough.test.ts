/**
 * The README's "Walk-through with curl", run as a person would: the shell
 * block exactly as written, with bash, against a real server. It must pass
 * twice in a row, and a failing step must stop it with the service's error
 * body in sight (not cascade into "Malformed API key" further down).
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/server.js";

const README = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

function walkthrough(): string {
  const section = README.split(/^## Walk-through with curl$/m)[1]?.split(/^## /m)[0];
  const block = section && /^```bash\n([\s\S]*?)^```$/m.exec(section)?.[1];
  if (!block) throw new Error("README.md has no ```bash block under '## Walk-through with curl'");
  return block;
}

interface Run {
  code: number | null;
  output: string;
}

/** Runs the script with bash (asynchronously: the server answers from this process). */
function runBash(script: string, base: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile("bash", ["-c", script], { env: { ...process.env, B: base }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, output: `${stdout}\n${stderr}` });
    });
    child.stdin?.end();
  });
}

let server: TestServer;
let limited: TestServer;
beforeAll(async () => {
  for (const tool of ["curl", "jq"]) {
    const found = await runBash(`command -v ${tool}`, "");
    if (found.code !== 0) throw new Error(`the README walk-through needs ${tool}; install it (apt-get install ${tool})`);
  }
  [server, limited] = await Promise.all([startTestServer(), startTestServer({ AGENTBUS_KEY_MINT_LIMIT: "1", AGENTBUS_TRUST_PROXY: "true" })]);
});
afterAll(async () => {
  await Promise.all([server?.close(), limited?.close()]);
});

describe("README walk-through with curl", () => {
  it("passes twice in a row against the same server", async () => {
    const script = walkthrough();
    for (const attempt of [1, 2]) {
      const run = await runBash(script, server.url);
      expect(run.code, `run ${attempt}:\n${run.output}`).toBe(0);
      expect(run.output, `run ${attempt}`).toContain('"status":"acknowledged"');
    }
  });

  it("stops at a refused mint with the error body visible, running no later step", async () => {
    const script = walkthrough();
    expect((await runBash(script, limited.url)).code).toBe(0);
    const run = await runBash(script, limited.url);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('"error":"rate_limit_exceeded"');
    expect(run.output).not.toContain("Malformed API key");
    expect(run.output).not.toContain('"mode":"claimable"');
  });

  it("stops at a failing later step with the error body visible", async () => {
    const broken = walkthrough().replace('"mode":"claimable"', '"mode":"queue"');
    expect(broken).not.toBe(walkthrough());
    const run = await runBash(broken, server.url);
    expect(run.code).not.toBe(0);
    expect(run.output).toContain('"error":"invalid_mode"');
    expect(run.output).not.toContain("resize image 42");
  });
});
