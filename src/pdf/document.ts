/**
 * The HTML document a pdf job renders (docs/decisions.md#pdf-jobs).
 *
 * - markdown: converted by marked (GitHub-flavoured: tables, task lists,
 *   strikethrough), then sanitised with sanitize-html against an allowlist,
 *   because marked passes raw HTML through (<script>, onerror=, <img
 *   src=https://…>, <link>, <iframe>). What survives is formatting only:
 *   images only from data: URLs, no event handlers, no script or style
 *   elements, and inline `style` limited to a few properties whose values
 *   cannot name a URL (page breaks among them, so `<div
 *   style="break-before: page">` works in Markdown). A default stylesheet
 *   (A4, readable type, bordered tables whose header repeats on each page,
 *   CJK and emoji fonts) comes first, so `css` overrides it.
 * - html: the caller's document as sent. It is not sanitised (a caller
 *   sending HTML wants its own markup and <style> elements); the page it is
 *   rendered in runs no JavaScript and can load nothing but data: URLs
 *   (src/pdf/renderer.ts), which is what keeps it harmless.
 *
 * `css` goes into a <style> element after everything else, so it wins over
 * the document's own rules of equal specificity. A "<" in it is written as
 * the CSS escape \3c, which means the same to CSS and cannot end the element.
 */
import { Marked } from "marked";
import sanitizeHtml from "sanitize-html";
import type { PdfInput } from "./input.js";

/** marked's options (here and on the Markdown thread, src/pdf/markdown.ts). */
export const MARKED_OPTIONS = { gfm: true, async: false } as const;
const marked = new Marked(MARKED_OPTIONS);

/** Values of the style properties Markdown may set inline: keywords, lengths, colours; never url(). */
const KEYWORD = /^[a-z-]+$/i;
const LENGTH = /^-?\d+(\.\d+)?(px|pt|pc|em|rem|ex|ch|%|mm|cm|in)?$/i;
const COLOR = [/^#[0-9a-f]{3,8}$/i, /^(rgb|rgba|hsl|hsla)\(\s*[\d.%\s,/]+\)$/i, KEYWORD];
const BREAK = [/^(auto|always|avoid|left|right|page|recto|verso|column|avoid-page|avoid-column)$/i];

/** sanitize-html's options (here and on the Markdown thread): plain data, so they reach a worker thread intact. */
export const SANITIZE_OPTIONS: sanitizeHtml.IOptions = {
  allowedTags: [
    ...sanitizeHtml.defaults.allowedTags,
    "img", "del", "ins", "input", "details", "summary",
  ],
  allowedAttributes: {
    "*": ["class", "id", "title", "lang", "dir", "style", "align"],
    a: ["href", "name"],
    img: ["src", "alt", "width", "height"],
    td: ["colspan", "rowspan"],
    th: ["colspan", "rowspan", "scope"],
    col: ["span"],
    colgroup: ["span"],
    ol: ["start", "type", "reversed"],
    li: ["value"],
    input: ["type", "checked", "disabled"],
  },
  // Links are printed, never followed; images must be inline.
  allowedSchemes: ["http", "https", "mailto"],
  allowedSchemesByTag: { img: ["data"] },
  allowedSchemesAppliedToAttributes: ["href", "src", "cite"],
  allowProtocolRelative: false,
  allowedStyles: {
    "*": {
      "break-before": BREAK,
      "break-after": BREAK,
      "break-inside": BREAK,
      "page-break-before": BREAK,
      "page-break-after": BREAK,
      "page-break-inside": BREAK,
      "text-align": [/^(left|right|center|justify|start|end)$/i],
      "vertical-align": [KEYWORD],
      color: COLOR,
      "background-color": COLOR,
      "font-weight": [/^(normal|bold|bolder|lighter|[1-9]00)$/i],
      "font-style": [/^(normal|italic|oblique)$/i],
      "font-size": [LENGTH, KEYWORD],
      "text-decoration": [/^[a-z -]+$/i],
      width: [LENGTH, KEYWORD],
      height: [LENGTH, KEYWORD],
    },
  },
  // script, style, textarea, noscript, option: dropped with their contents (the default).
  disallowedTagsMode: "discard",
};

/** Markdown's default stylesheet (see the module comment). */
export const MARKDOWN_CSS = `
@page { size: A4; margin: 18mm 16mm; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body {
  margin: 0; color: #1a1a1a; font-size: 11pt; line-height: 1.45; overflow-wrap: break-word;
  /* The npm fonts every Chromium is given (src/pdf/fonts.ts). The emoji font comes last: it also has a space and digits. */
  font-family: "Noto Sans", "Noto Sans S Chinese", "Noto Sans Korean", sans-serif, "Noto Color Emoji";
}
h1, h2, h3, h4, h5, h6 { line-height: 1.2; margin: 1.1em 0 0.5em; break-after: avoid; page-break-after: avoid; }
h1 { font-size: 1.9em; } h2 { font-size: 1.5em; } h3 { font-size: 1.2em; }
p, ul, ol, blockquote, pre, table { margin: 0 0 0.8em; }
pre, code, kbd, samp {
  /* Named, not only the generic monospace: Chromium shrinks text whose sole family is monospace (13px for 16px). CJK and emoji fall back as in the body. */
  font-family: "Noto Sans Mono", monospace, "Noto Sans S Chinese", "Noto Sans Korean", "Noto Color Emoji"; font-size: 0.92em;
}
pre { background: #f5f5f5; padding: 0.6em 0.8em; white-space: pre-wrap; border-radius: 3px; }
code { background: #f5f5f5; padding: 0 0.2em; border-radius: 2px; }
pre code { background: none; padding: 0; }
table { border-collapse: collapse; width: 100%; }
thead { display: table-header-group; }
tr, img { break-inside: avoid; page-break-inside: avoid; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
th { background: #eee; }
img { max-width: 100%; }
blockquote { margin-left: 0; padding-left: 0.9em; border-left: 3px solid #ccc; color: #444; }
a { color: #0645ad; }
hr { border: 0; border-top: 1px solid #ccc; margin: 1.2em 0; }
`;

/**
 * Markdown → sanitised HTML (the body of the document), on the calling
 * thread. The worker uses MarkdownConverter (markdown.ts), which runs exactly
 * this on a thread of its own.
 */
export function markdownToSafeHtml(markdown: string): string {
  return sanitizeHtml(marked.parse(markdown, { async: false }), SANITIZE_OPTIONS);
}

/** CSS text that cannot close the <style> element it is placed in. */
export function styleElement(css: string): string {
  return css === "" ? "" : `<style>${css.replace(/</g, "\\3c ")}</style>`;
}

/** The complete HTML document of a pdf job; `toHtml` turns Markdown into sanitised HTML. */
export async function buildDocument(input: PdfInput, toHtml: (markdown: string) => Promise<string> | string = markdownToSafeHtml): Promise<string> {
  const extra = styleElement(input.css);
  if (input.format === "markdown") {
    return (
      `<!DOCTYPE html><html><head><meta charset="utf-8"><style>${MARKDOWN_CSS}</style>${extra}</head>` +
      `<body>${await toHtml(input.content)}</body></html>`
    );
  }
  // After the end of the document the parser puts it into <body>, where it
  // still applies, last in the cascade.
  return extra === "" ? input.content : `${input.content}\n${extra}`;
}
