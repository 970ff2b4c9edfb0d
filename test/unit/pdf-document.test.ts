/** The HTML a pdf job renders: Markdown sanitised after marked, extra CSS last and inert (src/pdf/document.ts). */
import { describe, expect, it } from "vitest";
import { PdfFormat } from "../../gen/agentbus/v1/job_service_pb.js";
import type { ApiError } from "../../src/model/errors.js";
import { buildDocument, markdownToSafeHtml, styleElement } from "../../src/pdf/document.js";
import { MAX_PDF_SOURCE_BYTES, validatePdfRequest } from "../../src/pdf/input.js";
import { MarkdownConverter } from "../../src/pdf/markdown.js";

describe("markdownToSafeHtml", () => {
  it("keeps Markdown formatting: headings, GFM tables with alignment, lists, code, task lists", () => {
    const html = markdownToSafeHtml("# T\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n- [x] done\n\n`code` **bold** ~~gone~~");
    expect(html).toContain("<h1>T</h1>");
    expect(html).toContain('<th align="left">a</th>');
    expect(html).toContain('<td align="right">2</td>');
    expect(html).toContain('<li><input checked disabled type="checkbox" /> done</li>');
    expect(html).toContain("<code>code</code>");
    expect(html).toContain("<del>gone</del>");
  });

  it("drops scripts (with their text), event handlers and javascript: links", () => {
    const html = markdownToSafeHtml(
      '<script>alert("x")</script>\n\n<img src="data:image/png;base64,AAAA" onerror="alert(1)">\n\n[a](javascript:alert(1)) <a href="JaVaScRiPt:alert(1)">b</a>',
    );
    expect(html).not.toMatch(/script|alert|onerror|javascript/i);
    expect(html).toContain('<img src="data:image/png;base64,AAAA" />');
  });

  it("keeps no way to load anything: remote images, links, frames, objects, styles", () => {
    const html = markdownToSafeHtml(
      [
        "![r](https://example.com/x.png)",
        '<img src="//example.com/y.png" srcset="https://example.com/z.png 2x">',
        '<link rel="stylesheet" href="https://example.com/s.css">',
        '<iframe src="https://example.com"></iframe><object data="https://example.com/o"></object><embed src="https://example.com/e">',
        "<style>@import url(https://example.com/i.css)</style>",
        '<svg><image href="https://example.com/s.png"/></svg>',
        '<video poster="https://example.com/p.png"></video>',
        '<div style="background: url(https://example.com/bg.png); color: red">c</div>',
        '<base href="https://example.com/"><meta http-equiv="refresh" content="0;url=https://example.com">',
      ].join("\n\n"),
    );
    expect(html).not.toContain("example.com");
    expect(html).toContain('<div style="color:red">c</div>');
  });

  it("keeps page-break styles so Markdown can break pages", () => {
    expect(markdownToSafeHtml('<div style="break-before: page"></div>')).toBe('<div style="break-before:page"></div>');
    expect(markdownToSafeHtml('<p style="page-break-after: always">x</p>')).toBe('<p style="page-break-after:always">x</p>');
  });
});

describe("styleElement and buildDocument", () => {
  it("writes < in css as a CSS escape, so css cannot close its <style> element", () => {
    const style = styleElement("p::after { content: '</style><script>alert(1)</script>' }");
    expect(style.match(/<\/style>/g)).toHaveLength(1);
    expect(style).toContain("\\3c /style>");
    expect(styleElement("")).toBe("");
  });

  it("puts the extra css after the HTML document, and after the default stylesheet for Markdown", async () => {
    expect(await buildDocument({ format: "html", content: "<p>x</p>", css: "p{color:red}" })).toBe("<p>x</p>\n<style>p{color:red}</style>");
    expect(await buildDocument({ format: "html", content: "<p>x</p>", css: "" })).toBe("<p>x</p>");
    const md = await buildDocument({ format: "markdown", content: "# x", css: "h1{color:red}" });
    expect(md.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(md.indexOf("<style>h1{color:red}</style>")).toBeGreaterThan(md.indexOf("@page"));
    expect(md).toContain("<h1>x</h1>");
  });
});

describe("validatePdfRequest", () => {
  const code = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return (err as ApiError).code;
    }
    return undefined;
  };

  it("defaults format to html and css to empty, and keeps content exactly", () => {
    expect(validatePdfRequest({ content: "  <p>x</p>\n", format: PdfFormat.UNSPECIFIED })).toEqual({ content: "  <p>x</p>\n", format: "html", css: "" });
    expect(validatePdfRequest({ content: "# x", format: PdfFormat.MARKDOWN, css: "a{}" })).toEqual({ content: "# x", format: "markdown", css: "a{}" });
  });

  it("refuses missing or blank content, unknown formats and oversized sources", () => {
    expect(code(() => validatePdfRequest({ format: PdfFormat.HTML }))).toBe("missing_field");
    expect(code(() => validatePdfRequest({ content: "\n ", format: PdfFormat.HTML }))).toBe("invalid_string");
    expect(code(() => validatePdfRequest({ content: "x", format: 9 as PdfFormat }))).toBe("invalid_format");
    expect(code(() => validatePdfRequest({ content: "x".repeat(MAX_PDF_SOURCE_BYTES), css: "y", format: PdfFormat.HTML }))).toBe("payload_too_large");
  });
});

describe("MarkdownConverter", () => {
  const sample = '# T\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n<script>x()</script><img src="https://e.x/y.png"><div style="break-before: page; background: url(x)">p</div>';

  it("gives exactly what markdownToSafeHtml gives, on a thread of its own", async () => {
    const converter = new MarkdownConverter(10_000);
    try {
      expect(await converter.convert(sample)).toBe(markdownToSafeHtml(sample));
      const many = await Promise.all(Array.from({ length: 5 }, (_, i) => converter.convert(`## n${i}`)));
      expect(many).toEqual(Array.from({ length: 5 }, (_, i) => `<h2>n${i}</h2>\n`));
    } finally {
      await converter.close();
    }
  });

  it("keeps the event loop free while it converts a large document", async () => {
    const converter = new MarkdownConverter(60_000);
    try {
      await converter.convert("warm up");
      const big = Array.from({ length: 20_000 }, (_, i) => `Paragraph ${i} with **bold**, \`code\` and a [link](https://example.com/${i}).\n`).join("\n");
      let ticks = 0;
      const timer = setInterval(() => ticks++, 5);
      const started = performance.now();
      const html = await converter.convert(big);
      const ms = performance.now() - started;
      clearInterval(timer);
      expect(html).toContain("Paragraph 19999");
      // A blocked loop would tick once at the end; a free one ticks all along.
      expect(ticks).toBeGreaterThan(Math.min(10, ms / 20));
    } finally {
      await converter.close();
    }
  });

  it("ends a conversion past its deadline with pdf_render_timeout, restarts the thread, and works again", async () => {
    const converter = new MarkdownConverter(10_000);
    try {
      await converter.convert("warm up");
      const big = "word ".repeat(400_000);
      const stuck = converter.convert(big, 1);
      const behind = converter.convert("waiting behind it");
      await expect(stuck).rejects.toMatchObject({ code: "pdf_render_timeout", retryable: false });
      // What waited behind it is retried by its job.
      await expect(behind).rejects.toMatchObject({ code: "pdf_render_failed", retryable: true });
      expect(await converter.convert("ok")).toBe("<p>ok</p>\n");
    } finally {
      await converter.close();
    }
  });
});
