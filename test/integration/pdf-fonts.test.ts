/**
 * Code in a PDF is set in a monospaced font (issue 27, item 15), checked on
 * the PDF the real worker and the real Chromium print: the fonts embedded in
 * it (pdffonts), and where the words of "iiii WWWW ok" start on the page
 * (pdftotext -bbox): "iiii " and "WWWW " take the same room only in a
 * monospaced font.
 * The font is the npm one the service ships (src/pdf/fonts.ts), so the
 * result does not depend on the fonts of the host.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { renderPdf } from "../support/pdf.js";
import { mintKey, useTestServer } from "../support/server.js";

const run = promisify(execFile);

/** Quiet maintenance: these tests only need the pdf worker. */
const jobs = { processEveryMs: 1_000, intervals: { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } };
const server = useTestServer({ AGENTBUS_WORKERS: "true" }, { jobs });

async function withFile<T>(pdf: Buffer, fn: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), "agentbus-pdf-fonts-"));
  try {
    const file = path.join(dir, "doc.pdf");
    await writeFile(file, pdf);
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The embedded fonts' names without the subset tag (AAAAAA+NotoSans-Regular → NotoSans-Regular). */
const fontNames = (pdf: Buffer): Promise<string[]> =>
  withFile(pdf, async (file) => {
    const { stdout } = await run("pdffonts", [file]);
    return stdout
      .split("\n")
      .slice(2)
      .map((line) => line.split(/\s+/)[0]?.replace(/^[A-Z]{6}\+/, "") ?? "")
      .filter((name) => name !== "");
  });

/** The words on the page in reading order, each with where it starts. */
const words = (pdf: Buffer): Promise<Array<{ word: string; x: number }>> =>
  withFile(pdf, async (file) => {
    const { stdout } = await run("pdftotext", ["-bbox", file, "-"]);
    return [...stdout.matchAll(/<word xMin="([\d.]+)"[^>]*>([^<]*)<\/word>/g)].map((m) => ({ word: m[2]!, x: Number(m[1]) }));
  });

/** For each "iiii WWWW ok" on the page, in order: the room "iiii " and "WWWW " take. */
function probes(page: Array<{ word: string; x: number }>): Array<{ narrow: number; wide: number }> {
  const out: Array<{ narrow: number; wide: number }> = [];
  page.forEach((w, i) => {
    const [wide, end] = [page[i + 1], page[i + 2]];
    if (w.word === "iiii" && wide?.word === "WWWW" && end?.word === "ok") out.push({ narrow: wide.x - w.x, wide: end.x - wide.x });
  });
  return out;
}

const monospaced = ({ narrow, wide }: { narrow: number; wide: number }) => Math.abs(wide - narrow) < 0.01 * wide;

describe("code in a PDF", () => {
  it("sets Markdown's fenced and inline code in a monospaced font, and the prose in another", async () => {
    const key = await mintKey(server.url);
    const markdown = ["# Report", "", "Prose: iiii WWWW ok", "", "Inline: `iiii WWWW ok`", "", "```", "iiii WWWW ok", "```", ""].join("\n");
    const pdf = await renderPdf(server.url, key, { content: markdown, format: "markdown" });

    const fonts = await fontNames(pdf);
    expect(fonts).toContain("NotoSans-Regular");
    expect(fonts).toContain("NotoSansMono-Regular");

    const found = probes(await words(pdf));
    expect(found).toHaveLength(3);
    const [prose, inline, fenced] = found;
    // Proportional prose: "WWWW " takes far more room than "iiii ".
    expect(prose!.wide).toBeGreaterThan(2 * prose!.narrow);
    expect(monospaced(inline!), JSON.stringify(inline)).toBe(true);
    expect(monospaced(fenced!), JSON.stringify(fenced)).toBe(true);
  }, 60_000);

  it("gives HTML that asks for the generic monospace family the same monospaced font", async () => {
    const key = await mintKey(server.url);
    const html = `<!DOCTYPE html><html><body style="font-family: sans-serif"><p>iiii WWWW ok</p><pre style="font-family: monospace">iiii WWWW ok</pre></body></html>`;
    const pdf = await renderPdf(server.url, key, { content: html });
    expect(await fontNames(pdf)).toContain("NotoSansMono-Regular");
    const found = probes(await words(pdf));
    expect(found).toHaveLength(2);
    const [prose, code] = found;
    expect(monospaced(prose!)).toBe(false);
    expect(monospaced(code!), JSON.stringify(code)).toBe(true);
  }, 60_000);
});
