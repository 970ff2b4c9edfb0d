// What a newcomer does after `npm install`: `npm start`, wait for /health,
// mint a key, render a small Markdown PDF, then Ctrl-C. Proves the README's
// two commands serve PDFs with nothing installed beside them. Node, not curl:
// a fresh machine has node and npm, not necessarily curl.
import { spawn } from "node:child_process";

const START_TIMEOUT_MS = 120_000; // a first start builds the TypeScript and runs initdb
const JOB_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

const say = (line) => console.log(`[smoke] ${line}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Its own process group, so the SIGINT below reaches npm, node and what they
// started together, as Ctrl-C in a terminal does.
const server = spawn("npm", ["start"], { detached: true, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, PORT: "0" } });
let output = "";
let exited;
const exit = new Promise((resolve) => {
  server.once("exit", (code, signal) => {
    exited = { code, signal };
    resolve(exited);
  });
});
for (const stream of [server.stdout, server.stderr]) {
  stream.setEncoding("utf8");
  stream.on("data", (chunk) => {
    output += chunk;
  });
}

async function within(ms, what, attempt) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (exited) throw new Error(`npm start exited (${exited.signal ?? `code ${exited.code}`}) while waiting for ${what}`);
    const value = await attempt().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms / 1000} s`);
    await sleep(250);
  }
}

async function json(url, init) {
  const res = await fetch(url, { ...init, headers: { "content-type": "application/json", ...init?.headers } });
  return { status: res.status, body: await res.json().catch(() => null) };
}

async function main() {
  const started = Date.now();
  const base = await within(START_TIMEOUT_MS, "'listening on' line", async () => output.match(/listening on (http:\/\/[^\s"]+)/)?.[1]);
  await within(START_TIMEOUT_MS, "200 from /health", async () => ((await fetch(`${base}/health`)).status === 200 ? true : undefined));
  say(`${base}/health answered 200, ${((Date.now() - started) / 1000).toFixed(1)} s after npm start`);

  const minted = await json(`${base}/v1/keys`, { method: "POST", body: JSON.stringify({ agent_label: `ci-smoke-${process.pid}-${Date.now()}` }) });
  if (minted.status !== 201 && minted.status !== 200) throw new Error(`POST /v1/keys answered ${minted.status}: ${JSON.stringify(minted.body)}`);
  const headers = { "x-api-key": minted.body.key };

  const submitted = await json(`${base}/v1/pdf/generate`, {
    method: "POST",
    headers,
    body: JSON.stringify({ format: "markdown", content: "# Hello\n\nLatin, 中文, 한국어 and 🎉 in one PDF." }),
  });
  if (submitted.status !== 202) throw new Error(`POST /v1/pdf/generate answered ${submitted.status}: ${JSON.stringify(submitted.body)}`);
  const id = submitted.body.job_id;
  const job = await within(JOB_TIMEOUT_MS, `end of PDF job ${id}`, async () => {
    const res = await json(`${base}/jobs/${id}`, { headers });
    return res.body?.status === "completed" || res.body?.status === "failed" ? res.body : undefined;
  });
  if (job.status !== "completed") throw new Error(`PDF job ${id} ${job.status}: ${JSON.stringify(job.error)}`);
  const pdf = Buffer.from(await (await fetch(`${base}/v1/pdf/${id}`, { headers })).arrayBuffer());
  if (pdf.subarray(0, 5).toString("latin1") !== "%PDF-") throw new Error(`GET /v1/pdf/${id} did not answer a PDF`);
  say(`PDF job ${id} completed: ${pdf.length} bytes`);
}

let failure;
try {
  await main();
} catch (err) {
  failure = err;
}
if (!exited) {
  say("Ctrl-C (SIGINT to the process group)");
  process.kill(-server.pid, "SIGINT");
  const stopped = await Promise.race([exit, sleep(STOP_TIMEOUT_MS).then(() => undefined)]);
  if (!stopped) {
    process.kill(-server.pid, "SIGKILL");
    failure ??= new Error(`npm start did not stop within ${STOP_TIMEOUT_MS / 1000} s of SIGINT`);
  } else {
    // npm itself dies of the SIGINT (a shell shows 130), as in a terminal; the service must have said it stopped.
    const afterSigint = output.slice(output.search(/shutting down/));
    if (!/\bstopped\b/.test(afterSigint)) failure ??= new Error(`npm start exited (${stopped.signal ?? `code ${stopped.code}`}) without the service's 'stopped' line`);
    else if (/^\s+at /m.test(afterSigint)) failure ??= new Error("stack traces while stopping after SIGINT");
    else say(`stopped cleanly after SIGINT (npm: ${stopped.signal ?? `exit ${stopped.code}`})`);
  }
}
// The service's own lines, less one per polled request (all of them when something failed).
const shown = failure ? output : output.split("\n").filter((line) => !line.includes('"msg":"request"')).join("\n");
process.stdout.write(`[smoke] npm start's output${failure ? "" : " (request lines left out)"}:\n${shown.replace(/^(?=.)/gm, "  | ")}\n`);
if (failure) {
  console.error(`[smoke] FAILED: ${failure.message}`);
  process.exitCode = 1;
}
