/**
 * The PDF renderer with nothing installed but npm packages: the Chromium of
 * @sparticuz/chromium and the npm fonts (src/pdf/chromium.ts, fonts.ts), and
 * what happens when the configured Chromium cannot run.
 */
import { readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prepareChromium } from "../../src/pdf/chromium.js";
import { renderPdf, submitPdf } from "../support/pdf.js";
import { pdfText } from "../support/pdf.js";
import { eventually } from "../support/eventually.js";
import { mintKey, rest, useTestServer } from "../support/server.js";

const squash = (text: string) => text.replace(/\s+/g, " ");

describe("the npm Chromium", () => {
  const server = useTestServer({ AGENTBUS_WORKERS: "true" });
  let key: string;
  beforeAll(async () => {
    key = await mintKey(server.url);
  });

  it("is the default renderer, ready after start: /health says ready, the start-up log names it", async () => {
    expect(await server.app.pdf!.prepare()).toMatchObject({ state: "ready", setup: { source: "@sparticuz/chromium 143.0.4" } });
    const health = await rest(server.url, "GET", "/health");
    expect(health.body.components).toMatchObject({ pdf_renderer: { state: "ok", detail: "ready" } });
    await eventually(async () => server.logs.some((l) => l.component === "pdf_renderer" && /^PDF renderer: Chromium 143\.[\d.]+ from @sparticuz\/chromium 143\.0\.4, fonts /.test(String(l.msg))));
  });

  it("prints Latin, Chinese, Japanese, Korean and emoji text, in HTML and in Markdown", async () => {
    const lines = ["Latin: The quick brown fox, Àéîõü ß €", "中文: 你好，世界", "日本語: こんにちは、カタカナ", "한국어: 안녕하세요", "Emoji: 😀🚀🎉"];
    const html = `<!doctype html><meta charset="utf-8"><body>${lines.map((l) => `<p>${l}</p>`).join("")}</body>`;
    for (const body of [{ content: html }, { content: lines.join("\n\n"), format: "markdown" }]) {
      const text = squash(await pdfText(await renderPdf(server.url, key, body)));
      for (const line of lines) expect(text).toContain(line);
    }
  });
});

describe("a configured Chromium that is not there", () => {
  const server = useTestServer({ AGENTBUS_WORKERS: "true", AGENTBUS_CHROMIUM_PATH: "/nonexistent/chromium" });

  it("leaves the service serving, the renderer down in /health (the reason in the log), and PDF submissions 503", async () => {
    expect(await server.app.pdf!.prepare()).toMatchObject({ state: "down" });
    const health = await rest(server.url, "GET", "/health");
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({
      status: "ok",
      state: "degraded",
      components: { pdf_renderer: { state: "down", detail: expect.stringContaining("Chromium cannot run; PDF submissions answer 503") as unknown } },
    });
    expect(JSON.stringify(health.body)).not.toContain("/nonexistent");
    const res = await submitPdf(server.url, await mintKey(server.url), { content: "<p>x</p>" });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: "pdf_renderer_unavailable" });
    expect(server.logs).toContainEqual(expect.objectContaining({ component: "pdf_renderer", state: "down", level: "warn", msg: expect.stringContaining("AGENTBUS_CHROMIUM_PATH=/nonexistent/chromium") }));
  });
});

describe("unpacking", () => {
  const cacheDir = path.join(tmpdir(), `agentbus-unpack-test-${process.pid}`);
  afterAll(async () => {
    await rm(cacheDir, { recursive: true, force: true });
  });

  it("by two at once ends with one complete copy that both use, and no leftovers", async () => {
    const [a, b] = await Promise.all([prepareChromium({ executablePath: undefined, cacheDir }), prepareChromium({ executablePath: undefined, cacheDir })]);
    expect(a.executablePath).toBe(b.executablePath);
    expect(a.version).toMatch(/^Chromium 143\./);
    expect(a.env.FONTCONFIG_FILE).toBe(b.env.FONTCONFIG_FILE);
    expect(path.isAbsolute(a.env.FONTCONFIG_FILE!)).toBe(true);
    expect((await readdir(cacheDir)).sort()).toEqual(["chromium-143.0.4", "fonts"]);
    // Prepared again: nothing unpacked.
    expect((await prepareChromium({ executablePath: undefined, cacheDir })).unpackedMs).toBe(0);
  }, 120_000);
});
