/**
 * The web console (issue 18) in a real browser: the Chromium the PDF jobs
 * use, driven with puppeteer-core, against a real service. Every test fails
 * on any error the page logs or throws. Screenshots of the main views go to
 * test-artifacts/console/ (not committed).
 */
import { mkdirSync } from "node:fs";
import { launch, type Browser, type BrowserContext, type Page } from "puppeteer-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { prepareChromium } from "../../src/pdf/chromium.js";
import { freshAddress } from "../support/membership.js";
import { mintKey, rest, startTestServer, type TestServer } from "../support/server.js";

const ARTIFACTS = "test-artifacts/console";
const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 8)}`;

let server: TestServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
/** What each page logged as an error or threw, by page. */
const pageErrors = new Map<Page, string[]>();

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startTestServer({ AGENTBUS_WORKERS: "true" });
  const chromium = await prepareChromium({ executablePath: process.env.AGENTBUS_CHROMIUM_PATH });
  browser = await launch({
    executablePath: chromium.executablePath,
    env: { ...process.env, ...chromium.env },
    headless: true,
    pipe: true,
    args: process.getuid?.() === 0 ? ["--no-sandbox"] : [],
  });
}, 120_000);

afterEach(async ({ task }) => {
  if (task.result?.state === "fail") {
    // What each page showed when the test failed: a step that waited for ever says why.
    for (const [page, errors] of pageErrors) {
      if (page.isClosed()) continue;
      const shown = await page.$$eval(".problem", (els) => els.map((el) => el.textContent ?? "")).catch(() => []);
      console.error(`[console test] ${page.url()}\n  problems shown: ${JSON.stringify(shown)}\n  page errors: ${JSON.stringify(errors)}`);
      await page.screenshot({ path: `${ARTIFACTS}/failed-${task.name.replace(/\W+/g, "-").slice(0, 80)}.png` }).catch(() => undefined);
    }
  }
  pageErrors.clear();
  await Promise.all(contexts.splice(0).map((c) => c.close()));
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

interface OpenOptions {
  viewport?: { width: number; height: number };
  /**
   * The page's setInterval never fires: no poll can move anything, so what
   * still moves is moved by events (the watch, the page's own actions).
   */
  withoutPolls?: boolean;
  /** The service whose console is opened (default: the suite's). */
  service?: TestServer;
  /**
   * Sent as X-Forwarded-For with every request: on a service that trusts it,
   * per-address limits count this page's requests alone.
   */
  clientAddress?: string;
}

/** A fresh browser profile (its own sessionStorage) on the console, watched for errors. */
async function openConsole(hash = "", { viewport = { width: 1200, height: 900 }, withoutPolls = false, service = server, clientAddress }: OpenOptions = {}): Promise<Page> {
  const context = await browser.createBrowserContext();
  contexts.push(context);
  const page = await context.newPage();
  // Below the test's 30 s: a step that waits too long fails naming itself.
  page.setDefaultTimeout(20_000);
  await page.setViewport(viewport);
  if (withoutPolls) await page.evaluateOnNewDocument("window.setInterval = () => 0;");
  if (clientAddress !== undefined) await page.setExtraHTTPHeaders({ "X-Forwarded-For": clientAddress });
  const errors: string[] = [];
  pageErrors.set(page, errors);
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(`console: ${msg.text()}`);
  });
  page.on("pageerror", (err) => errors.push(`page: ${err instanceof Error ? err.message : String(err)}`));
  await page.goto(`${service.url}/${hash}`, { waitUntil: "networkidle0" });
  return page;
}

function expectNoPageErrors(page: Page): void {
  expect(pageErrors.get(page) ?? []).toEqual([]);
}

/** For a test of a refusal: Chromium logs the refused request itself, and nothing else may go wrong. */
function expectOnlyRefusalsLogged(page: Page): void {
  const errors = pageErrors.get(page) ?? [];
  expect(errors.length).toBeGreaterThan(0);
  for (const error of errors) expect(error).toMatch(/^console: Failed to load resource: the server responded with a status of 4\d\d /);
}

/**
 * Waits until `expression` is true in the page. The page's code is given as
 * text: this suite is compiled for Node, without the DOM's types.
 */
async function until(page: Page, expression: string, timeout = 5_000): Promise<void> {
  await page.waitForFunction(expression, { timeout });
}

const bodyHas = (text: string) => `document.body.textContent.includes(${JSON.stringify(text)})`;

async function signIn(page: Page, key: string): Promise<void> {
  await page.locator('input[name="api-key"]').fill(key);
  await page.locator("button[type=submit]").click();
  await page.waitForSelector("header.top");
}

async function textOf(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (el) => el.textContent ?? "");
}

async function createRestricted(key: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: unique("work"), mode: "claimable", access: "restricted", ...extra } });
  expect(res.status).toBe(201);
  return res.body.id;
}

const keyIdOf = (key: string): string => key.split(".")[0] as string;

async function post(key: string, channel: string, body: Record<string, unknown>): Promise<string> {
  const res = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, { key, body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.message.id;
}

interface MessageJson {
  claimed_by_key_id: string | null;
  acknowledged_by: Array<{ id: string }>;
  result: string | null;
  available_at: string;
}

async function messageOf(key: string, id: string): Promise<MessageJson> {
  const res = await rest<MessageJson>(server.url, "GET", `/v1/messages/${id}`, { key });
  expect(res.status).toBe(200);
  return res.body;
}

/** A claimable channel of a new key with one task, the task already claimed by that key when `held`. */
async function taskOf(held: boolean): Promise<{ owner: string; label: string; channel: string; item: string; id: string }> {
  const label = unique("operator");
  const owner = await mintKey(server.url, label);
  const channel = await createRestricted(owner);
  const id = await post(owner, channel, { content: "convert report.docx" });
  if (held) expect((await rest(server.url, "POST", `/v1/messages/${id}/claim`, { key: owner, body: {} })).status).toBe(200);
  return { owner, label, channel, id, item: `[data-message-id="${id}"]` };
}

const figure = (page: Page, kind: string) => textOf(page, `.figure-${kind} .figure-value`);

describe("the console", () => {
  it("mints a key, creates a channel and shows a message posted through the API within a second", async () => {
    const page = await openConsole();
    await page.screenshot({ path: `${ARTIFACTS}/sign-in.png` });
    await page.locator('input[name="agent-label"]').fill(unique("person"));
    await page.locator("button ::-p-text(Mint a key)").click();
    const key = await (await page.waitForSelector("code.secret"))!.evaluate((el) => el.textContent ?? "");
    expect(key).toMatch(/^ak_[\w-]+\.[\w-]+$/);
    await page.locator("button ::-p-text(Continue with this key)").click();
    await page.waitForSelector("header.top");
    await until(page, bodyHas("You have no channels yet"));

    await page.locator("button ::-p-text(New channel)").click();
    const name = unique("queue");
    await page.locator('input[name="channel-name"]').fill(name);
    await page.locator("button ::-p-text(Create channel)").click();
    await until(page, `document.querySelector("h1")?.textContent === ${JSON.stringify(name)}`);
    const channelId = decodeURIComponent(new URL(page.url()).hash.split("/")[2] ?? "");
    await page.waitForSelector("h2 .live");

    const posted = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channelId}/messages`, { key, body: { content: "<b>not bold</b> hello" } });
    expect(posted.status).toBe(201);
    const started = Date.now();
    await page.waitForSelector(`[data-message-id="${posted.body.message.id}"]`, { timeout: 1_000 });
    expect(Date.now() - started).toBeLessThan(1_000);
    // Content is text, never markup.
    expect(await textOf(page, `[data-message-id="${posted.body.message.id}"] .content`)).toBe("<b>not bold</b> hello");
    expect(await page.$(`[data-message-id="${posted.body.message.id}"] .content b`)).toBeNull();
    // The key is in neither the address nor the server's logs.
    expect(page.url()).not.toContain(key.split(".")[1]);
    expect(server.rawLogs.some((line) => line.includes(key.split(".")[1] as string))).toBe(false);
    expectNoPageErrors(page);
  });

  it("follows a task from ready through in flight to acknowledged, with its worker and result", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const worker = await mintKey(server.url, unique("worker"));
    const channel = await createRestricted(owner);
    await rest(server.url, "POST", `/v1/channels/${channel}/members`, { key: owner, body: { key_id: worker.split(".")[0] } });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector("section.queue");
    const posted = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "resize the images" } });
    const item = `[data-message-id="${posted.body.message.id}"]`;
    await page.waitForSelector(`${item}.state-ready`, { timeout: 3_000 });

    const received = await rest<{ data: Array<{ message: { id: string }; lease_token: string }> }>(server.url, "POST", `/v1/channels/${channel}/messages:receive`, {
      key: worker,
      body: { max_messages: 1, lease_seconds: 60 },
    });
    expect(received.body.data[0]?.message.id).toBe(posted.body.message.id);
    await page.waitForSelector(`${item}.state-in-flight`, { timeout: 5_000 });
    expect(await textOf(page, item)).toContain("lease ends");
    await page.screenshot({ path: `${ARTIFACTS}/channel-in-flight.png`, fullPage: true });

    const acked = await rest(server.url, "POST", `/v1/messages/${posted.body.message.id}/ack`, { key: worker, body: { result: "42 images resized" } });
    expect(acked.status).toBe(200);
    await page.waitForSelector(`${item}.state-acknowledged`, { timeout: 5_000 });
    expect(await textOf(page, item)).toContain("42 images resized");
    await until(page, `document.querySelector(".figure-acknowledged .figure-value")?.textContent === "1"`);
    await page.screenshot({ path: `${ARTIFACTS}/channel.png`, fullPage: true });
    expectNoPageErrors(page);
  });

  it("shows a busy queue at a glance: ready, delayed, in flight and acknowledged work with its figures", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const worker = await mintKey(server.url, unique("resizer"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "image-resize", mode: "claimable", description: "Thumbnails for the product catalogue" } })).body.id;
    const post = (content: string, extra: Record<string, unknown> = {}) => rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content, ...extra } });
    for (const sku of ["sku-1041", "sku-1042", "sku-1043"]) await post(`Resize ${sku}.jpg to 640×480`, { actor_label: "planner" });
    await post("Resize sku-1044.jpg after the import", { actor_label: "planner", delay_seconds: 600 });
    await post("Resize sku-1045.jpg to 640×480", { actor_label: "planner" });
    const received = await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${channel}/messages:receive`, {
      key: worker,
      body: { max_messages: 2, lease_seconds: 120 },
    });
    const [first] = received.body.data;
    await rest(server.url, "POST", `/v1/messages/${first!.message.id}/ack`, { key: worker, body: { result: "sku-1041.jpg: 640×480, 38 KB" } });
    const page = await openConsole(`#/channels/${channel}`, { viewport: { width: 1100, height: 780 } });
    await signIn(page, owner);
    await until(page, `document.querySelector(".figure-acknowledged .figure-value")?.textContent === "1"`);
    await page.waitForSelector(".message.state-acknowledged");
    await page.screenshot({ path: `${ARTIFACTS}/overview.png` });
    expect(await page.$$eval(".message.state-ready", (els) => els.length)).toBe(2);
    expect(await page.$$eval(".message.state-delayed", (els) => els.length)).toBe(1);
    expect(await page.$$eval(".message.state-in-flight", (els) => els.length)).toBe(1);
    expectNoPageErrors(page);
  });

  it("shows a task that used up its deliveries as dead-lettered, in the list and in the figures", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "flaky-jobs", mode: "claimable", max_deliveries: 1 } })).body.id;
    await rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "Convert report.docx" } });
    const received = await rest<{ data: Array<{ message: { id: string } }> }>(server.url, "POST", `/v1/channels/${channel}/messages:receive`, { key: owner, body: {} });
    await rest(server.url, "POST", `/v1/messages/${received.body.data[0]!.message.id}/release`, { key: owner, body: {} });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(".message.state-dead-lettered");
    expect(await page.$eval(".message.state-dead-lettered .badge", (el) => el.textContent)).toBe("dead-lettered");
    await until(page, `document.querySelector(".figure-dead .figure-value")?.textContent === "1"`);
    expectNoPageErrors(page);
  });

  it("lets a task's author cancel it, after which it shows as cancelled and is never handed out", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "reports", mode: "claimable" } })).body.id;
    const posted = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "Write the weekly report" } });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(".message.state-ready");
    await page.locator(`[data-message-id="${posted.body.message.id}"] button ::-p-text(Cancel)`).click();
    await page.waitForSelector(".message.state-cancelled");
    expect(await page.$eval(".message.state-cancelled .badge", (el) => el.textContent)).toBe("cancelled");
    const received = await rest<{ data: unknown[] }>(server.url, "POST", `/v1/channels/${channel}/messages:receive`, { key: owner, body: {} });
    expect(received.body.data).toEqual([]);
    expectNoPageErrors(page);
  });

  it("shows the progress a worker reported on its task", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "translations", mode: "claimable" } })).body.id;
    await rest(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "Translate the manual" } });
    const leased = await rest<{ data: Array<{ message: { id: string }; lease_token: string }> }>(server.url, "POST", `/v1/channels/${channel}/messages:receive`, { key: owner, body: {} });
    const [task] = leased.body.data;
    await rest(server.url, "POST", `/v1/messages/${task!.message.id}/progress`, { key: owner, body: { lease_token: task!.lease_token, data: { chapter: 3 }, text: "chapter 3 of 12" } });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(".progress-text");
    expect(await page.$eval(".progress-text", (el) => el.textContent)).toBe("chapter 3 of 12");
    expect(await page.$eval(".progress-data", (el) => el.textContent)).toBe('{"chapter":3}');
    expectNoPageErrors(page);
  });

  it("shows what a task waits for and how many wait for it, and a blocked task as blocked", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "pipeline", mode: "claimable" } })).body.id;
    const parent = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "Fetch the data" } });
    const child = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, {
      key: owner,
      body: { content: "Plot the data", depends_on: [parent.body.message.id] },
    });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`[data-message-id="${child.body.message.id}"].state-blocked`);
    expect(await page.$eval(`[data-message-id="${child.body.message.id}"] .depends-on code`, (el) => el.getAttribute("title"))).toBe(parent.body.message.id);
    expect(await page.$eval(`[data-message-id="${parent.body.message.id}"] .dependents`, (el) => el.textContent)).toBe("1");
    // The small tree: opened on the parent, it shows the task waiting for it, with its state.
    await page.locator(`[data-message-id="${parent.body.message.id}"] .message-tree summary`).click();
    const dependent = `[data-message-id="${parent.body.message.id}"] .tree-dependents [data-tree-message-id="${child.body.message.id}"]`;
    await page.waitForSelector(dependent);
    expect(await page.$eval(dependent, (el) => el.textContent)).toMatch(/blocked.*Plot the data/);
    await page.locator(`[data-message-id="${child.body.message.id}"] .message-tree summary`).click();
    const parentLine = `[data-message-id="${child.body.message.id}"] .tree-parents [data-tree-message-id="${parent.body.message.id}"]`;
    await page.waitForSelector(parentLine);
    expect(await page.$eval(parentLine, (el) => el.textContent)).toMatch(/ready.*Fetch the data/);
    expectNoPageErrors(page);
  });

  it("shows a message's timeline and the other messages of its trace, linking to their channels", async () => {
    const owner = await mintKey(server.url, unique("tracer"));
    const first = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("plan"), mode: "claimable" } })).body.id;
    const second = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("do"), mode: "claimable" } })).body.id;
    const traceparent = "00-1234567890abcdef1234567890abcdef-00f067aa0ba902b7-01";
    const postTraced = async (channel: string, content: string) => {
      const res = await fetch(`${server.url}/v1/channels/${channel}/messages`, { method: "POST", headers: { "Content-Type": "application/json", "X-API-Key": owner, traceparent }, body: JSON.stringify({ content }) });
      return ((await res.json()) as { message: { id: string } }).message.id;
    };
    const planned = await postTraced(first, "Plan the trip");
    const booked = await postTraced(second, "Book the train");
    const got = await rest<{ data: Array<{ lease_token: string }> }>(server.url, "POST", `/v1/channels/${first}/messages:receive`, { key: owner, body: { lease_seconds: 60 } });
    await rest(server.url, "POST", `/v1/messages/${planned}/ack`, { key: owner, body: { lease_token: got.body.data[0]!.lease_token, result: "two days" } });
    const page = await openConsole(`#/channels/${first}`);
    await signIn(page, owner);
    const item = `[data-message-id="${planned}"]`;
    await page.waitForSelector(`${item} .message-timeline summary`);
    await page.locator(`${item} .message-timeline summary`).click();
    expect(await page.$$eval(`${item} .timeline li`, (els) => els.map((el) => el.getAttribute("data-step")))).toEqual(["posted", "delivered", "acknowledged", "result"]);
    expect(await page.$eval(`${item} .timeline [data-step="result"]`, (el) => el.textContent)).toContain("two days");
    await page.locator(`${item} .message-trace summary`).click();
    await page.waitForSelector(`${item} .trace-messages [data-trace-message-id="${booked}"]`);
    expect(await page.$eval(`${item} .trace-messages [data-trace-message-id="${booked}"] a`, (el) => el.getAttribute("href"))).toBe(`#/channels/${encodeURIComponent(second)}`);
    expect(await page.$$eval(`${item} .trace-messages li`, (els) => els.length)).toBe(2);
    expectNoPageErrors(page);
  });

  it("approves a waitpoint on the Approvals page, after which the task waiting for it is ready again with the answer", async () => {
    const owner = await mintKey(server.url, unique("approver"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "spend", mode: "claimable" } })).body.id;
    const posted = await rest<{ message: { id: string } }>(server.url, "POST", `/v1/channels/${channel}/messages`, { key: owner, body: { content: "Buy 40 GPU hours" } });
    const id = posted.body.message.id;
    await rest(server.url, "POST", `/v1/channels/${channel}/messages:receive`, { key: owner, body: {} });
    const waitpoint = await rest<{ id: string }>(server.url, "POST", "/v1/waitpoints", { key: owner, body: { timeout_seconds: 3600, description: "Spend $40 on GPUs?" } });
    await rest(server.url, "POST", `/v1/messages/${id}/release`, { key: owner, body: { until_waitpoint: waitpoint.body.id } });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`[data-message-id="${id}"].state-waiting`);
    await page.locator("a ::-p-text(Approvals)").click();
    await page.waitForSelector(`[data-waitpoint-id="${waitpoint.body.id}"]`);
    expect(await page.$eval(`[data-waitpoint-id="${waitpoint.body.id}"] .question`, (el) => el.textContent)).toContain("Spend $40 on GPUs?");
    await page.locator(`[data-waitpoint-id="${waitpoint.body.id}"] button ::-p-text(Approve)`).click();
    await page.waitForSelector(`[data-waitpoint-id="${waitpoint.body.id}"]`, { hidden: true });
    await page.goto(`${server.url}/#/channels/${channel}`);
    await page.waitForSelector(`[data-message-id="${id}"].state-ready`);
    expect(await page.$eval(`[data-message-id="${id}"] .waitpoint-data`, (el) => el.textContent)).toContain('"approved":true');
    const message = await rest<{ state: string; waitpoint: { data: Record<string, unknown> } }>(server.url, "GET", `/v1/messages/${id}`, { key: owner });
    expect(message.body).toMatchObject({ state: "ready", waitpoint: { data: { approved: true } } });
    expectNoPageErrors(page);
  });

  it("creates a schedule on a channel's Schedules page and pauses it", async () => {
    const owner = await mintKey(server.url, unique("scheduler"));
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: "reports", mode: "claimable" } })).body.id;
    const page = await openConsole(`#/channels/${channel}/schedules`);
    await signIn(page, owner);
    await page.waitForSelector('form[aria-label="New schedule"]');
    await page.type('input[name="schedule-cron"]', "0 9 * * 1-5");
    // Select what the field holds (the browser's own zone), so typing replaces it.
    await page.click('input[name="schedule-timezone"]', { clickCount: 3 });
    await page.type('input[name="schedule-timezone"]', "Europe/Berlin");
    await page.type('input[name="schedule-content"]', "Write the standup notes");
    await page.locator("button ::-p-text(Create schedule)").click();
    await page.waitForSelector("[data-schedule-id]");
    const listed = await rest<{ data: Array<{ id: string; cron: string; timezone: string; paused: boolean }> }>(server.url, "GET", `/v1/schedules?channel=${channel}`, { key: owner });
    expect(listed.body.data).toMatchObject([{ cron: "0 9 * * 1-5", timezone: "Europe/Berlin", paused: false }]);
    const id = listed.body.data[0]!.id;
    await page.locator(`[data-schedule-id="${id}"] button ::-p-text(Pause)`).click();
    await page.waitForSelector(`[data-schedule-id="${id}"] button ::-p-text(Resume)`);
    expect((await rest<{ paused: boolean }>(server.url, "GET", `/v1/schedules/${id}`, { key: owner })).body.paused).toBe(true);
    expectNoPageErrors(page);
  });

  it("lets the owner approve an access request, after which the requester is a member", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const requesterLabel = unique("asker");
    const requester = await mintKey(server.url, requesterLabel);
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/people`);
    await signIn(page, owner);
    await page.waitForSelector("#requests-heading");
    const asked = await rest(server.url, "POST", `/v1/channels/${channel}/access-requests`, { key: requester, body: { reason: "I run the nightly build" } });
    expect(asked.status).toBe(202);
    const approve = `button[aria-label="Approve ${requesterLabel}"]`;
    await page.waitForSelector(approve, { timeout: 5_000 });
    expect(await page.$eval("body", (el) => el.textContent)).toContain("I run the nightly build");
    await page.screenshot({ path: `${ARTIFACTS}/people.png`, fullPage: true });
    await page.locator(approve).click();
    await until(page, bodyHas("No one is waiting for access"));
    const read = await rest(server.url, "GET", `/v1/channels/${channel}`, { key: requester });
    expect(read.status).toBe(200);
    expectNoPageErrors(page);
  });

  it("brings a person without a key from an invitation link to the channel, named again once they joined", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const name = unique("nightly-builds");
    const channel = await createRestricted(owner, { name, description: "Builds to verify overnight" });
    const invitation = await rest<{ id: string }>(server.url, "POST", `/v1/channels/${channel}/invitations`, { key: owner, body: {} });
    // Without a key the API answers 401 and points a person at the console.
    const keyless = await rest<{ error: string; redirect_to: string }>(server.url, "GET", `/v1/channel-invitations/${invitation.body.id}`);
    expect(keyless.status).toBe(401);
    expect(keyless.body).toMatchObject({ error: "api_key_required", redirect_to: `${server.url}/#/invitations/${invitation.body.id}` });

    const page = await openConsole(new URL(keyless.body.redirect_to).hash);
    expect(await page.$eval("body", (el) => el.textContent)).toContain("You were invited to a channel");
    await page.locator('input[name="agent-label"]').fill(unique("guest"));
    await page.locator("button ::-p-text(Mint a key)").click();
    await page.locator("button ::-p-text(Continue with this key)").click();
    // Joining is asked for, never done by opening a link.
    await page.locator(`button ::-p-text(Join ${name})`).click();
    await until(page, `document.querySelector("h1")?.textContent === ${JSON.stringify(`You joined ${name}`)}`);
    expect(await textOf(page, "main")).toContain("Builds to verify overnight");
    await page.locator(`a ::-p-text(Open ${name})`).click();
    await until(page, `location.hash === ${JSON.stringify(`#/channels/${channel}`)}`);
    await page.waitForSelector("h2 .live");
    expectNoPageErrors(page);
  });

  it("saves changed settings through the update mask and leaves the others alone", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector('input[name="max-deliveries"]');
    await page.locator('input[name="description"]').fill("Images to resize");
    await page.locator('input[name="max-deliveries"]').fill("3");
    await page.locator("button ::-p-text(Save settings)").click();
    await page.waitForSelector(".ok");
    const read = await rest<{ description: string; max_deliveries: number; access: string }>(server.url, "GET", `/v1/channels/${channel}`, { key: owner });
    expect(read.body).toMatchObject({ description: "Images to resize", max_deliveries: 3, access: "restricted" });
    await page.screenshot({ path: `${ARTIFACTS}/settings.png`, fullPage: true });
    await page.goto(`${server.url}/#/channels/${channel}/deliveries`, { waitUntil: "networkidle0" });
    await until(page, bodyHas("No deliveries yet"));
    expectNoPageErrors(page);
  });

  it("asks for access to a restricted channel found under Discover", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const created = await rest<{ id: string; name: string }>(server.url, "POST", "/v1/channels", {
      key: owner,
      body: { name: unique("public-work"), mode: "claimable", access: "restricted", discoverable: true },
    });
    const visitor = await mintKey(server.url, unique("visitor"));
    const page = await openConsole("#/discover");
    await signIn(page, visitor);
    await page.waitForSelector("table.list");
    const row = `::-p-xpath(//tr[.//a[text()=${JSON.stringify(created.body.name)}]]//button)`;
    await page.locator(row).click();
    await until(page, bodyHas("Requested: the owner decides."));
    const pending = await rest<{ data: Array<{ requester_key_id: string }> }>(server.url, "GET", `/v1/channels/${created.body.id}/access-requests`, { key: owner });
    expect(pending.body.data.map((r) => r.requester_key_id)).toEqual([visitor.split(".")[0]]);
    expectNoPageErrors(page);
  });

  it("makes a PDF from Markdown, previews it and offers it for download", async () => {
    const key = await mintKey(server.url, unique("writer"));
    const page = await openConsole("#/pdf");
    await signIn(page, key);
    await page.locator('textarea[name="markdown"]').fill("# Weekly report\n\n- 42 tasks done");
    await page.locator("button ::-p-text(Make PDF)").click();
    await page.waitForSelector("a[download]", { timeout: 60_000 });
    expect(await page.$eval("a[download]", (a) => a.getAttribute("href"))).toMatch(/^blob:/);
    expect(await page.$("iframe.pdf-preview")).not.toBeNull();
    await page.screenshot({ path: `${ARTIFACTS}/pdf.png` });
    expectNoPageErrors(page);
  }, 90_000);

  it("lists my channels and discoverable ones, and fits a narrow window", async () => {
    const key = await mintKey(server.url, unique("narrow"));
    for (const name of ["alpha", "beta"]) await rest(server.url, "POST", "/v1/channels", { key, body: { name: unique(name), mode: "broadcast" } });
    const page = await openConsole("", { viewport: { width: 380, height: 800 } });
    await signIn(page, key);
    await page.waitForSelector("table.list");
    expect(await page.$$eval("table.list tbody tr", (rows) => rows.length)).toBe(2);
    expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")).toBe(true);
    await page.screenshot({ path: `${ARTIFACTS}/channels-narrow.png`, fullPage: true });
    await page.goto(`${server.url}/#/discover`, { waitUntil: "networkidle0" });
    await page.waitForSelector("table.list");
    expectNoPageErrors(page);
  });
});

describe("the console names people", () => {
  it("shows a message's author by agent label, and the actor the poster named, with the key id on hover", async () => {
    const label = unique("night-shift");
    const key = await mintKey(server.url, label);
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key, body: { name: unique("log"), mode: "broadcast" } })).body.id;
    const id = await post(key, channel, { content: "deploy finished", actor_label: "release bot" });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, key);
    const item = `[data-message-id="${id}"]`;
    await page.waitForSelector(item);
    expect(await textOf(page, `${item} .author`)).toBe(label);
    expect(await page.$eval(`${item} .author`, (el) => el.getAttribute("title"))).toContain(keyIdOf(key));
    expect(await textOf(page, `${item} .actor`)).toBe("as release bot");
    expect(await textOf(page, item)).not.toContain("no actor");
    expectNoPageErrors(page);
  });

  it("lists members by agent label, with the key id on hover", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const memberLabel = unique("builder");
    const member = await mintKey(server.url, memberLabel);
    const channel = await createRestricted(owner);
    expect((await rest(server.url, "POST", `/v1/channels/${channel}/members`, { key: owner, body: { key_id: keyIdOf(member) } })).status).toBe(201);
    const page = await openConsole(`#/channels/${channel}/people`);
    await signIn(page, owner);
    const row = `::-p-xpath(//span[@class="member-label" and text()=${JSON.stringify(memberLabel)}])`;
    const cell = await page.waitForSelector(row);
    expect(await cell!.evaluate((el) => el.getAttribute("title"))).toBe(`Key ${keyIdOf(member)}`);
    expectNoPageErrors(page);
  });
});

describe("the console names access requesters", () => {
  it("shows who asked for access by agent label, with the key id on hover", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const askerLabel = unique("night-builder");
    const asker = await mintKey(server.url, askerLabel);
    const channel = await createRestricted(owner);
    expect((await rest(server.url, "POST", `/v1/channels/${channel}/access-requests`, { key: asker, body: {} })).status).toBe(202);
    const page = await openConsole(`#/channels/${channel}/people`);
    await signIn(page, owner);
    const shown = await page.waitForSelector(".request .requester-label");
    expect(await shown!.evaluate((el) => el.textContent)).toBe(askerLabel);
    expect(await shown!.evaluate((el) => el.getAttribute("title"))).toBe(`Key ${keyIdOf(asker)}`);
    expectNoPageErrors(page);
  });
});

describe("the console operates a work queue", () => {
  it("claims a ready task for the signed-in key, which then holds it", async () => {
    const { owner, label, channel, id, item } = await taskOf(false);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-ready`);
    await page.locator(`${item} button ::-p-text(Claim)`).click();
    await page.waitForSelector(`${item}.state-in-flight`);
    expect(await textOf(page, `${item} .holder`)).toBe(`${label} (you)`);
    expect((await messageOf(owner, id)).claimed_by_key_id).toBe(keyIdOf(owner));
    expectNoPageErrors(page);
  });

  it("keeps a claimed task in flight when a re-read of the list sent before the claim answers after it", async () => {
    const { owner, channel, item } = await taskOf(false);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-ready`);
    // A re-read's answer while the task is ready: what a re-read sent before the claim carries.
    const before = await page.waitForResponse((response) => response.url().endsWith("/ListMessages") && response.ok());
    const stale = { status: before.status(), headers: before.headers(), body: await before.buffer() };
    // The page's next re-read is answered with it, once the claim has answered.
    let answer: (() => void) | undefined;
    const held = new Promise<void>((resolve) => {
      page.on("request", (request) => {
        if (request.isInterceptResolutionHandled()) return;
        if (answer === undefined && request.url().endsWith("/ListMessages")) {
          answer = () => void request.respond(stale);
          resolve();
          return;
        }
        void request.continue();
      });
    });
    await page.setRequestInterception(true);
    await held;
    await page.locator(`${item} button ::-p-text(Claim)`).click();
    await page.waitForSelector(`${item}.state-in-flight`);
    const answered = page.waitForResponse((response) => response.url().endsWith("/ListMessages"));
    answer!();
    await answered;
    // Two frames: the answer is merged and rendered.
    await page.evaluate("new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))");
    expect(await page.$(`${item}.state-in-flight`)).not.toBeNull();
    expectNoPageErrors(page);
  });

  it("acknowledges a task the key holds, with the result typed in", async () => {
    const { owner, channel, id, item } = await taskOf(true);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-in-flight`);
    await page.locator(`${item} input[name="ack-result"]`).fill("report.pdf, 12 pages");
    await page.locator(`${item} button ::-p-text(Acknowledge)`).click();
    await page.waitForSelector(`${item}.state-acknowledged`);
    expect(await textOf(page, `${item} .result`)).toBe("report.pdf, 12 pages");
    expect((await messageOf(owner, id)).result).toBe("report.pdf, 12 pages");
    expectNoPageErrors(page);
  });

  it("releases a task the key holds, which is ready work again at once", async () => {
    const { owner, channel, id, item } = await taskOf(true);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-in-flight`);
    await page.locator(`${item} button ::-p-text(Release)`).click();
    await page.waitForSelector(`${item}.state-ready`);
    expect((await messageOf(owner, id)).claimed_by_key_id).toBeNull();
    expectNoPageErrors(page);
  });

  it("requeues a task the key holds: released with a delay, it is open work again only after it", async () => {
    const { owner, channel, id, item } = await taskOf(true);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-in-flight`);
    await page.locator(`${item} input[name="requeue-delay"]`).fill("600");
    const before = Date.now();
    await page.locator(`${item} button ::-p-text(Requeue in)`).click();
    await page.waitForSelector(`${item}.state-delayed`);
    const task = await messageOf(owner, id);
    expect(task.claimed_by_key_id).toBeNull();
    expect(Date.parse(task.available_at)).toBeGreaterThanOrEqual(before + 600_000 - 1_000);
    expectNoPageErrors(page);
  });

  it("offers each action only where it applies: Claim on ready work, Cancel to its author on work not done, nothing more on work another key holds, nothing on work that is done", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const worker = await mintKey(server.url, unique("worker"));
    const channel = await createRestricted(owner);
    await rest(server.url, "POST", `/v1/channels/${channel}/members`, { key: owner, body: { key_id: keyIdOf(worker) } });
    const theirs = await post(owner, channel, { content: "held by the worker" });
    const done = await post(owner, channel, { content: "finished" });
    const ready = await post(owner, channel, { content: "waiting" });
    expect((await rest(server.url, "POST", `/v1/messages/${theirs}/claim`, { key: worker, body: {} })).status).toBe(200);
    expect((await rest(server.url, "POST", `/v1/messages/${done}/ack`, { key: worker, body: {} })).status).toBe(200);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`[data-message-id="${theirs}"].state-in-flight`);
    await page.waitForSelector(`[data-message-id="${done}"].state-acknowledged`);
    await page.waitForSelector(`[data-message-id="${ready}"].state-ready`);
    const buttons = (id: string) => page.$$eval(`[data-message-id="${id}"] .message-actions button`, (els) => els.map((el) => el.textContent));
    expect(await buttons(ready)).toEqual(["Claim", "Cancel"]);
    expect(await buttons(theirs)).toEqual(["Cancel"]);
    expect(await buttons(done)).toEqual([]);
    expectNoPageErrors(page);
  });

  it("shows the service's message and suggestion when an action is refused", async () => {
    const { owner, channel, id, item } = await taskOf(true);
    // What the API answers for a delay past the channel's TTL (the message stays held).
    const refused = await rest<{ error: string; message: string; suggestion: string }>(server.url, "POST", `/v1/messages/${id}/release`, { key: owner, body: { delay_seconds: 999_999 } });
    expect(refused.status).toBe(422);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`${item}.state-in-flight`);
    await page.locator(`${item} input[name="requeue-delay"]`).fill("999999");
    await page.locator(`${item} button ::-p-text(Requeue in)`).click();
    await page.waitForSelector(`${item} .problem`);
    const shown = await textOf(page, `${item} .problem`);
    expect(shown).toContain(refused.body.message);
    expect(shown).toContain(refused.body.suggestion);
    expect(shown).toContain(refused.body.error);
    expect(await page.$(`${item}.state-in-flight`)).not.toBeNull();
    expectOnlyRefusalsLogged(page);
  });
});

describe("the console's queue figures", () => {
  it("count a message as soon as it arrives in the list, with no poll to wait for", async () => {
    const { owner, channel } = await taskOf(false);
    const page = await openConsole(`#/channels/${channel}`, { withoutPolls: true });
    await signIn(page, owner);
    await until(page, `document.querySelector(".figure-ready .figure-value")?.textContent === "1"`);
    const id = await post(owner, channel, { content: "one more" });
    await page.waitForSelector(`[data-message-id="${id}"]`);
    await until(page, `document.querySelector(".figure-ready .figure-value")?.textContent === "2"`);
    expectNoPageErrors(page);
  });

  it("move a task from ready to in flight as soon as the console claims it", async () => {
    const { owner, channel, item } = await taskOf(false);
    const page = await openConsole(`#/channels/${channel}`, { withoutPolls: true });
    await signIn(page, owner);
    await until(page, `document.querySelector(".figure-ready .figure-value")?.textContent === "1"`);
    await page.locator(`${item} button ::-p-text(Claim)`).click();
    await until(page, `document.querySelector(".figure-in-flight .figure-value")?.textContent === "1"`);
    expect(await figure(page, "ready")).toBe("0");
    expectNoPageErrors(page);
  });
});

describe("the console's other pages", () => {
  it("shows why a loopback webhook URL is refused when the settings are saved", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.locator('input[name="webhook-url"]').fill("http://127.0.0.1:9/hook");
    await page.locator("button ::-p-text(Save settings)").click();
    await page.waitForSelector("form.settings .problem");
    const shown = await textOf(page, "form.settings .problem");
    expect(shown).toContain("invalid_webhook_url");
    expect(shown).toContain("'webhook_url' points at 127.0.0.1 (loopback)");
    expect(await page.$("form.settings .ok")).toBeNull();
    expectOnlyRefusalsLogged(page);
  });

  it("opens the PDF box empty, with a placeholder that shows what to write", async () => {
    const key = await mintKey(server.url, unique("writer"));
    const page = await openConsole("#/pdf");
    await signIn(page, key);
    const box = await page.waitForSelector('textarea[name="markdown"]');
    expect(await box!.evaluate((el) => (el as unknown as { value: string }).value)).toBe("");
    expect(await box!.evaluate((el) => el.getAttribute("placeholder"))).toBe("# Title\n\nMarkdown or HTML…");
    expectNoPageErrors(page);
  });
});

/** The text of the channel list's cell for `channel` that `selector` picks, or null when the row has none. */
function countIn(page: Page, channel: string, selector: string): Promise<string | null> {
  return page.$eval(`tr[data-channel-id="${channel}"]`, (row, sel) => row.querySelector(sel)?.textContent ?? null, selector);
}

describe("the console's channel lists", () => {
  it("count each channel's live messages and, on a work queue, its open work", async () => {
    const owner = await mintKey(server.url, unique("counter"));
    const worker = await mintKey(server.url, unique("worker"));
    const queue = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("queue"), mode: "claimable" } })).body.id;
    for (const content of ["a", "b", "c"]) await post(owner, queue, { content });
    const received = await rest(server.url, "POST", `/v1/channels/${queue}/messages:receive`, { key: worker, body: { max_messages: 1 } });
    expect(received.status).toBe(200);
    const news = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("news"), mode: "broadcast" } })).body.id;
    await post(owner, news, { content: "shipped" });
    const page = await openConsole();
    await signIn(page, owner);
    await page.waitForSelector(`tr[data-channel-id="${queue}"]`);
    expect(await countIn(page, queue, ".count-live")).toBe("3 live");
    expect(await countIn(page, queue, ".count-open")).toBe("2 open");
    expect(await countIn(page, news, ".count-live")).toBe("1 live");
    expect(await countIn(page, news, ".count-open")).toBeNull();
    await page.screenshot({ path: `${ARTIFACTS}/channels.png` });
    expectNoPageErrors(page);
  });

  it("show 1000+ for a channel holding more messages than the service counts", async () => {
    const owner = await mintKey(server.url, unique("busy"));
    const queue = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("backlog"), mode: "claimable" } })).body.id;
    const drafts = Array.from({ length: 100 }, (_, i) => ({ content: `task ${i}` }));
    for (let batch = 0; batch < 10; batch++) {
      expect((await rest(server.url, "POST", `/v1/channels/${queue}/messages:batchCreate`, { key: owner, body: { messages: drafts } })).status).toBe(201);
    }
    const page = await openConsole();
    await signIn(page, owner);
    await page.waitForSelector(`tr[data-channel-id="${queue}"]`);
    expect(await countIn(page, queue, ".count-live")).toBe("1000+ live");
    expect(await countIn(page, queue, ".count-open")).toBe("1000+ open");
    expectNoPageErrors(page);
  });

  it("name each discoverable channel's owner under Discover", async () => {
    const ownerLabel = unique("publisher");
    const owner = await mintKey(server.url, ownerLabel);
    const channel = (await rest<{ id: string }>(server.url, "POST", "/v1/channels", { key: owner, body: { name: unique("public"), mode: "broadcast", discoverable: true } })).body.id;
    const visitor = await mintKey(server.url, unique("visitor"));
    const page = await openConsole("#/discover");
    await signIn(page, visitor);
    await page.waitForSelector(`tr[data-channel-id="${channel}"]`);
    expect(await countIn(page, channel, ".owner")).toBe(ownerLabel);
    expectNoPageErrors(page);
  });
});

describe("the console's channel settings", () => {
  it("show the owner where the webhook goes, and never its secret", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const hook = "https://hooks.example.com/agentbus?token=t0p";
    const channel = await createRestricted(owner, { webhook_url: hook, webhook_secret: "s3cret-never-shown" });
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector(".webhook-current");
    expect(await textOf(page, ".webhook-current code")).toBe(hook);
    expect(await page.content()).not.toContain("s3cret-never-shown");
    expectNoPageErrors(page);
  });

  it("say there is no webhook when none is set", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector(".webhook-current");
    expect(await textOf(page, ".webhook-current")).toBe("Webhook: no webhook");
    expectNoPageErrors(page);
  });
});

describe("the console shows groups, priorities and shared limits (issue 28)", () => {
  async function limitOf(key: string, body: Record<string, unknown>): Promise<string> {
    const res = await rest<{ name: string }>(server.url, "POST", "/v1/limits", { key, body });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.name;
  }

  it("shows each task's priority and group, and the queue's ready work by priority and its largest groups", async () => {
    const owner = await mintKey(server.url, unique("planner"));
    const channel = await createRestricted(owner);
    const urgent = await post(owner, channel, { content: "review PR 7", priority: 1, group_key: "repo:agentbus" });
    const plain = await post(owner, channel, { content: "tidy the wiki" });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`[data-message-id="${urgent}"] .priority`);
    expect(await textOf(page, `[data-message-id="${urgent}"] .priority`)).toBe("P1");
    expect(await page.$eval(`[data-message-id="${urgent}"] .priority`, (el) => el.getAttribute("title"))).toContain("most urgent");
    expect(await textOf(page, `[data-message-id="${urgent}"] .group code`)).toBe("repo:agentbus");
    expect(await textOf(page, `[data-message-id="${plain}"] .priority`)).toBe("P3");
    expect(await page.$(`[data-message-id="${plain}"] .group`)).toBeNull();
    await until(page, `document.querySelector(".ready-priority-1 strong")?.textContent === "1"`);
    expect(await textOf(page, ".ready-priority-3 strong")).toBe("1");
    expect(await textOf(page, ".ready-priority-5 strong")).toBe("0");
    await page.waitForSelector('.top-groups tr[data-group-key="repo:agentbus"]');
    await page.screenshot({ path: `${ARTIFACTS}/groups.png`, fullPage: true });
    expectNoPageErrors(page);
  });

  it("takes the next task in the channel's order on a channel that bounds its groups, offering no Claim on a chosen one", async () => {
    const owner = await mintKey(server.url, unique("taker"));
    const channel = await createRestricted(owner, { group_concurrency: 1 });
    const later = await post(owner, channel, { content: "batch job", priority: 4, group_key: "batch" });
    const first = await post(owner, channel, { content: "interactive turn", priority: 1, group_key: "chat-7" });
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector(`[data-message-id="${later}"].state-ready`);
    expect(await page.$("li.message button ::-p-text(Claim)")).toBeNull();
    await page.locator("button ::-p-text(Take the next task)").click();
    await page.waitForSelector(`[data-message-id="${first}"].state-in-flight`);
    expect(await textOf(page, `[data-message-id="${first}"] .holder`)).toContain("(you)");
    await page.waitForSelector(`[data-message-id="${first}"] form[aria-label="Acknowledge"]`);
    expect(await page.$(`[data-message-id="${later}"].state-ready`)).not.toBeNull();
    expectNoPageErrors(page);
  });

  it("posts a task with the priority and group chosen in the form", async () => {
    const owner = await mintKey(server.url, unique("poster"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}`);
    await signIn(page, owner);
    await page.waitForSelector('select[name="message-priority"]');
    await page.locator('textarea[name="message-content"]').fill("hotfix");
    await page.select('select[name="message-priority"]', "1");
    await page.locator('input[name="message-group"]').fill("incident-42");
    await page.locator("button ::-p-text(Post)").click();
    await page.waitForSelector("li.message .group code");
    const listed = await rest<{ data: Array<{ content: string; priority: number; group_key: string | null }> }>(server.url, "GET", `/v1/channels/${channel}/messages?since=0`, { key: owner });
    expect(listed.body.data.map((m) => [m.content, m.priority, m.group_key])).toEqual([["hotfix", 1, "incident-42"]]);
    expectNoPageErrors(page);
  });

  it("shows the owner a channel's group concurrency, dispatch, aging and limits, and saves changes to them", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const openai = await limitOf(owner, { name: unique("openai"), max_in_flight: 4 });
    const anthropic = await limitOf(owner, { name: unique("anthropic"), rate: { count: 100, per_seconds: 60 } });
    const channel = await createRestricted(owner, { group_concurrency: 2, priority_aging_seconds: 30, limits: [openai] });
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector(`input[name="limit"][value="${anthropic}"]`);
    expect(await page.$eval('input[name="group-concurrency"]', (el) => (el as unknown as { value: string }).value)).toBe("2");
    expect(await page.$eval('input[name="priority-aging"]', (el) => (el as unknown as { value: string }).value)).toBe("30");
    expect(await page.$eval('select[name="dispatch"] option:checked', (el) => el.textContent)).toBe("fifo");
    expect(await page.$eval(`input[name="limit"][value="${openai}"]`, (el) => (el as unknown as { checked: boolean }).checked)).toBe(true);
    expect(await page.$eval(`input[name="limit"][value="${anthropic}"]`, (el) => (el as unknown as { checked: boolean }).checked)).toBe(false);

    await page.locator('input[name="group-concurrency"]').fill("1");
    // Emptied as a person does (select all, delete): the form sends it in the mask without a value, which clears it.
    await page.click('input[name="priority-aging"]', { count: 3 });
    await page.keyboard.press("Backspace");
    await page.select('select[name="dispatch"]', await page.$eval('select[name="dispatch"] option:last-child', (el) => (el as unknown as { value: string }).value));
    await page.locator(`input[name="limit"][value="${openai}"]`).click();
    await page.locator(`input[name="limit"][value="${anthropic}"]`).click();
    await page.locator("button ::-p-text(Save settings)").click();
    await page.waitForSelector(".ok");
    const read = await rest(server.url, "GET", `/v1/channels/${channel}`, { key: owner });
    expect(read.body).toMatchObject({ group_concurrency: 1, dispatch: "fair", priority_aging_seconds: null, limits: [anthropic], max_deliveries: null });
    await page.screenshot({ path: `${ARTIFACTS}/settings-groups.png`, fullPage: true });
    expectNoPageErrors(page);
  });

  it("publishes a claimable channel as an A2A agent with its skills, and links its card", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector('input[name="a2a-enabled"]');
    await page.locator('input[name="a2a-enabled"]').click();
    await page.locator('input[name="a2a-name"]').fill("Resizer");
    await page.locator('textarea[name="a2a-skills"]').fill("resize=Resize: shrinks images\nthumb=Thumbnail");
    await page.locator("button ::-p-text(Save agent)").click();
    await page.waitForSelector(".a2a-card a");
    const card = await rest<{ name: string; skills: Array<{ id: string; name: string }> }>(server.url, "GET", `/a2a/${channel}/.well-known/agent-card.json`);
    expect(card.status).toBe(200);
    expect(card.body.name).toBe("Resizer");
    expect(card.body.skills.map((s) => [s.id, s.name])).toEqual([["resize", "Resize"], ["thumb", "Thumbnail"]]);
    expect(await page.$eval(".a2a-card a", (el) => el.getAttribute("href"))).toBe(`${server.url}/a2a/${channel}/.well-known/agent-card.json`);
    expectNoPageErrors(page);
  });

  it("forwards a claimable channel's work to an A2A agent, showing the header's name and never its value", async () => {
    const owner = await mintKey(server.url, unique("owner"));
    const channel = await createRestricted(owner);
    const page = await openConsole(`#/channels/${channel}/settings`);
    await signIn(page, owner);
    await page.waitForSelector('input[name="a2a-forward-url"]');
    await page.locator('input[name="a2a-forward-url"]').fill("https://agent.example.com");
    await page.locator('input[name="a2a-forward-header-name"]').fill("Authorization");
    await page.locator('input[name="a2a-forward-header-value"]').fill("Bearer hidden");
    await page.locator("button ::-p-text(Save forwarding)").click();
    await page.waitForSelector(".a2a-forward-current code");
    expect(await textOf(page, ".a2a-forward-current")).toContain("Forwarded to https://agent.example.com with the header Authorization");
    expect(await textOf(page, "main")).not.toContain("Bearer hidden");
    const read = await rest(server.url, "GET", `/v1/channels/${channel}`, { key: owner });
    expect(read.body).toMatchObject({ a2a_forward: { url: "https://agent.example.com", auth_header: { name: "Authorization" } } });
    await page.locator("button ::-p-text(Stop forwarding)").click();
    await until(page, `document.querySelector(".a2a-forward-current")?.textContent?.includes("Not forwarded")`);
    expectNoPageErrors(page);
  });

  it("lists the key's limits, creates one and deletes one, from the navigation", async () => {
    const owner = await mintKey(server.url, unique("quota"));
    const model = await limitOf(owner, { name: unique("model"), max_in_flight: 2, rate: { count: 100, per_seconds: 60 } });
    const page = await openConsole();
    await signIn(page, owner);
    await page.locator("nav a ::-p-text(Limits)").click();
    await until(page, `location.hash === "#/limits"`);
    await page.waitForSelector(`tr[data-limit-name="${model}"]`);
    expect(await textOf(page, `tr[data-limit-name="${model}"] .in-flight`)).toBe("0 of 2");
    expect(await textOf(page, `tr[data-limit-name="${model}"] .window`)).toBe("0 of 100 per 60 s");

    const extra = unique("batch");
    await page.locator('input[name="limit-name"]').fill(extra);
    await page.locator('input[name="limit-rate-count"]').fill("10");
    await page.locator("button ::-p-text(Create limit)").click();
    await page.waitForSelector(`tr[data-limit-name="${extra}"]`);
    expect(await textOf(page, `tr[data-limit-name="${extra}"] .in-flight`)).toBe("0 (no bound)");
    expect(await textOf(page, `tr[data-limit-name="${extra}"] .window`)).toBe("0 of 10 per 60 s");
    expect((await rest(server.url, "GET", `/v1/limits/${extra}`, { key: owner })).body).toMatchObject({ name: extra, max_in_flight: null, rate: { count: 10, per_seconds: 60 } });
    await page.screenshot({ path: `${ARTIFACTS}/limits.png`, fullPage: true });
    await page.locator(`button[aria-label="Delete ${extra}"]`).click();
    await until(page, `document.querySelector(${JSON.stringify(`tr[data-limit-name="${extra}"]`)}) === null`);
    expect((await rest(server.url, "GET", `/v1/limits/${extra}`, { key: owner })).status).toBe(404);
    expectNoPageErrors(page);
  });

  it("shows what a limit holds in flight and used in its window, live, as workers take deliveries", async () => {
    const owner = await mintKey(server.url, unique("quota"));
    const model = await limitOf(owner, { name: unique("model"), max_in_flight: 2, rate: { count: 100, per_seconds: 60 } });
    const channel = await createRestricted(owner, { limits: [model] });
    await post(owner, channel, { content: "one" });
    await post(owner, channel, { content: "two" });
    const receiveOne = () => rest(server.url, "POST", `/v1/channels/${channel}/messages:receive`, { key: owner, body: { max_messages: 1 } });
    expect((await receiveOne()).status).toBe(200);
    const page = await openConsole("#/limits");
    await signIn(page, owner);
    const row = `tr[data-limit-name="${model}"]`;
    await page.waitForSelector(row);
    expect(await textOf(page, `${row} .in-flight`)).toBe("1 of 2");
    expect(await textOf(page, `${row} .window`)).toBe("1 of 100 per 60 s");
    // The second delivery shows without a reload.
    expect((await receiveOne()).status).toBe(200);
    await until(page, `document.querySelector(${JSON.stringify(`${row} .in-flight`)})?.textContent === "2 of 2"`);
    expect(await textOf(page, `${row} .window`)).toBe("2 of 100 per 60 s");
    expectNoPageErrors(page);
  });
});

describe("the console points newcomers at the sandbox channel", () => {
  it("offers it on the sign-in page, and opens it once the person has a key", async () => {
    const page = await openConsole();
    await page.locator("a ::-p-text(Try the public sandbox channel)").click();
    await until(page, `location.hash === "#/channels/sandbox"`);
    await until(page, bodyHas("Sign in or mint a key to open the public sandbox channel."));
    await page.locator('input[name="agent-label"]').fill(unique("newcomer"));
    await page.locator("button ::-p-text(Mint a key)").click();
    await page.locator("button ::-p-text(Continue with this key)").click();
    await until(page, `document.querySelector("h1")?.textContent === "sandbox"`);
    await page.waitForSelector("h2 .live");
    expectNoPageErrors(page);
  });

  it("offers it when the signed-in key has no channels yet", async () => {
    const key = await mintKey(server.url, unique("empty-handed"));
    const page = await openConsole();
    await signIn(page, key);
    await until(page, bodyHas("You have no channels yet"));
    const link = await page.waitForSelector("main a ::-p-text(Try the public sandbox channel)");
    expect(await link!.evaluate((el) => el.getAttribute("href"))).toBe("#/channels/sandbox");
    expectNoPageErrors(page);
  });
});

describe("on a service without the sandbox channel or the workers", () => {
  // No workers, so no purge: it deletes revoked and expired invitations
  // within a minute, after which a preview answers "not found" instead.
  let quiet: TestServer;
  beforeAll(async () => {
    quiet = await startTestServer({ AGENTBUS_SANDBOX: "false", AGENTBUS_TRUST_PROXY: "true" });
  });
  afterAll(async () => {
    await quiet?.close();
  });

  /** A restricted channel with that name and description, and an invitation to it. */
  async function invitationTo(name: string, description = ""): Promise<{ owner: string; channel: string; invitation: string }> {
    const owner = await mintKey(quiet.url, unique("host"));
    const created = await rest<{ id: string }>(quiet.url, "POST", "/v1/channels", { key: owner, body: { name, mode: "claimable", access: "restricted", description } });
    expect(created.status).toBe(201);
    const invitation = await rest<{ id: string }>(quiet.url, "POST", `/v1/channels/${created.body.id}/invitations`, { key: owner, body: {} });
    expect(invitation.status).toBe(201);
    return { owner, channel: created.body.id, invitation: invitation.body.id };
  }

  /** The invitation page for a new key, from an address of its own (the preview counts against a per-address limit). */
  async function openInvitation(invitation: string, clientAddress = freshAddress()): Promise<{ page: Page; guest: string }> {
    const guest = await mintKey(quiet.url, unique("guest"));
    const page = await openConsole(`#/invitations/${invitation}`, { service: quiet, clientAddress });
    await signIn(page, guest);
    return { page, guest };
  }

  it("offers no sandbox on the sign-in page", async () => {
    const page = await openConsole("", { service: quiet });
    // openConsole waited for the network to go quiet: the landing document was read and answered without a sandbox.
    await page.waitForSelector("#mint-heading");
    expect(await page.$("p.sandbox")).toBeNull();
    expectNoPageErrors(page);
  });

  it("names the invited channel before the person joins, and joins no one by showing it", async () => {
    const name = unique("war-room");
    const { channel, invitation } = await invitationTo(name, "Incident 42");
    const { page, guest } = await openInvitation(invitation);
    await until(page, `document.querySelector("h1")?.textContent === ${JSON.stringify(`You were invited to ${name}`)}`);
    expect(await textOf(page, "main")).toContain("Incident 42");
    expect(await page.$(`::-p-text(Join ${name})`)).not.toBeNull();
    expect((await rest(quiet.url, "GET", `/v1/channels/${channel}`, { key: guest })).status).toBe(403);
    await page.screenshot({ path: `${ARTIFACTS}/invitation.png` });
    expectNoPageErrors(page);
  });

  it.each([
    ["revoked", "The invitation was revoked", (invitation: string, owner: string) => rest(quiet.url, "DELETE", `/v1/channel-invitations/${invitation}`, { key: owner })],
    ["expired", "The invitation has expired", (invitation: string) => quiet.app.pool.query("UPDATE channel_invitations SET expires_at = now() - interval '1 second' WHERE id = $1", [invitation])],
  ] as const)("says why an invitation cannot be used (%s), and what to do, offering no Join", async (_state, message, end) => {
    const name = unique("closed");
    const { owner, invitation } = await invitationTo(name);
    await end(invitation, owner);
    const { page } = await openInvitation(invitation);
    await page.waitForSelector("main .problem");
    expect(await textOf(page, "h1")).toBe(`You were invited to ${name}`);
    const shown = await textOf(page, "main .problem");
    expect(shown).toContain(message);
    expect(shown).toContain("Ask the channel owner for a new invitation.");
    expect(await page.$("main button")).toBeNull();
    expectNoPageErrors(page);
  });

  it("shows the service's message and suggestion for an invitation that does not exist", async () => {
    const answer = await rest<{ error: string; message: string; suggestion: string }>(quiet.url, "GET", "/v1/channel-invitations/no-such-invitation/preview", {
      key: await mintKey(quiet.url),
      headers: { "X-Forwarded-For": freshAddress() },
    });
    expect(answer.status).toBe(404);
    const { page } = await openInvitation("no-such-invitation");
    await page.waitForSelector("main .problem");
    const shown = await textOf(page, "main .problem");
    for (const part of [answer.body.error, answer.body.message, answer.body.suggestion]) expect(shown).toContain(part);
    expect(await page.$("main button")).toBeNull();
    expectOnlyRefusalsLogged(page);
  });

  it("shows the service's message and suggestion when the address has looked up too many invitations", async () => {
    const { invitation } = await invitationTo(unique("popular"));
    const address = freshAddress();
    const key = await mintKey(quiet.url);
    const preview = () => rest<{ error: string; message: string; suggestion: string }>(quiet.url, "GET", `/v1/channel-invitations/${invitation}/preview`, { key, headers: { "X-Forwarded-For": address } });
    let answer = await preview();
    // Up to the limit, whatever it is; a bound keeps a service without one from looping forever.
    for (let tries = 1; answer.status === 200 && tries < 100; tries++) answer = await preview();
    expect(answer.status).toBe(429);
    const { page } = await openInvitation(invitation, address);
    await page.waitForSelector("main .problem");
    const shown = await textOf(page, "main .problem");
    for (const part of [answer.body.error, answer.body.message, answer.body.suggestion]) expect(shown).toContain(part);
    expect(await page.$("main button")).toBeNull();
    expectOnlyRefusalsLogged(page);
  });
});
