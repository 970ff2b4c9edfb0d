/**
 * Reduces a posting page to the text worth sending to the model.
 *
 * - The DOM is linkedom (a small, fast DOM over htmlparser2; no layout, no
 *   scripts run) and the main content is picked by @mozilla/readability,
 *   Firefox Reader View's algorithm: navigation, headers, footers, cookie
 *   banners and "similar jobs" side bars fall away.
 * - The article is serialised as text with line breaks between blocks and
 *   "- " before list items, so requirements and benefits lists stay lists
 *   (Readability's own textContent runs blocks together).
 * - schema.org JobPosting data (JSON-LD, which most job boards embed for
 *   search engines) is kept alongside: it often states salary, currency and
 *   employment type more precisely than the prose. Readability drops
 *   scripts, so it is read first.
 * - Page furniture outside <article>/<main> (nav, header, footer, aside,
 *   forms and their ARIA roles) is removed first: on short pages
 *   Readability sometimes keeps a menu with the content.
 * - When Readability finds no article, the body's text without scripts,
 *   styles, navigation, headers, footers, asides and forms is used.
 *
 * The caller caps what is sent to the model (capText).
 */
import { Readability } from "@mozilla/readability";
import { decodeHTML } from "entities";
import { parseHTML } from "linkedom";

export interface MainText {
  /** The page title, when it has one. */
  title: string | null;
  /** The article as text. */
  text: string;
  /** schema.org JobPosting objects found in JSON-LD, as compact JSON; null when none. */
  structuredData: string | null;
}

/** The DOM surface this module uses (linkedom's types lean on the DOM lib, which a Node build does not load). */
interface DomNode {
  nodeType: number;
  localName?: string;
  textContent: string | null;
  childNodes: ArrayLike<DomNode>;
}
interface DomElement extends DomNode {
  getAttribute(name: string): string | null;
  closest(selector: string): DomElement | null;
  remove(): void;
  querySelectorAll(selector: string): ArrayLike<DomElement>;
}
interface DomDocument {
  title?: string;
  body: DomElement | null;
  querySelectorAll(selector: string): ArrayLike<DomElement>;
}

const TEXT_NODE = 3;
const ELEMENT_NODE = 1;
const MAX_STRUCTURED_CHARS = 12_000;

/** Elements that start a new line of text. */
const BLOCKS = new Set([
  "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt", "fieldset", "figcaption", "figure",
  "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section",
  "summary", "table", "tbody", "thead", "tfoot", "tr", "ul",
]);
const SKIPPED = new Set(["script", "style", "noscript", "template", "svg", "iframe", "object", "canvas", "button", "select", "option"]);
const BOILERPLATE = "script, style, noscript, template, nav, header, footer, aside, form, iframe, svg";
/** Page furniture: removed before Readability runs, unless it sits inside the main content. */
const FURNITURE = 'nav, header, footer, aside, form, [role="navigation"], [role="banner"], [role="contentinfo"], [role="search"]';

export function extractMainText(html: string): MainText {
  const { document } = parseHTML(html) as unknown as { document: DomDocument };
  const structuredData = jobPostingJsonLd(document);
  const pageTitle = clean(document.title ?? "") || null;
  for (const el of Array.from(document.querySelectorAll(FURNITURE))) {
    if (el.closest("article, main, [role=\"main\"]") === null) el.remove();
  }

  let article: { title?: string | null; content?: string | null } | null = null;
  try {
    // Readability's types name the DOM lib's Document; linkedom's document is one at runtime.
    const reader = new Readability<string>(document as never, { charThreshold: 200, serializer: (node) => blockText(node as unknown as DomNode) });
    article = reader.parse();
  } catch {
    article = null;
  }
  let text = article?.content ?? "";
  if (text.trim() === "") text = fallbackText(html);
  return { title: clean(article?.title ?? "") || pageTitle, text, structuredData };
}

/** At most maxChars characters, cut at a line or word boundary when one is near. */
export function capText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  let cut = text.slice(0, maxChars);
  const boundary = Math.max(cut.lastIndexOf("\n"), cut.lastIndexOf(" "));
  if (boundary > maxChars * 0.9) cut = cut.slice(0, boundary);
  return { text: cut.trimEnd(), truncated: true };
}

function fallbackText(html: string): string {
  const { document } = parseHTML(html) as unknown as { document: DomDocument };
  const body = document.body;
  if (!body) return "";
  for (const el of Array.from(body.querySelectorAll(BOILERPLATE))) el.remove();
  return blockText(body);
}

/** Text of a subtree: blocks on their own lines, list items as "- item", whitespace collapsed. */
export function blockText(root: DomNode): string {
  const lines: string[] = [];
  let current = "";
  const breakLine = () => {
    const line = clean(current);
    if (line !== "") lines.push(line);
    current = "";
  };
  const walk = (node: DomNode) => {
    if (node.nodeType === TEXT_NODE) {
      current += node.textContent ?? "";
      return;
    }
    if (node.nodeType !== ELEMENT_NODE) return;
    const tag = (node.localName ?? "").toLowerCase();
    if (SKIPPED.has(tag)) return;
    if (tag === "br") {
      breakLine();
      return;
    }
    const block = BLOCKS.has(tag);
    if (block) breakLine();
    if (tag === "li") current += "- ";
    else if (tag === "td" || tag === "th") current += " ";
    for (const child of Array.from(node.childNodes)) walk(child);
    if (block) breakLine();
  };
  walk(root);
  breakLine();
  return lines.join("\n");
}

/** schema.org JobPosting objects from <script type="application/ld+json">, descriptions reduced to text. */
function jobPostingJsonLd(document: DomDocument): string | null {
  const postings: unknown[] = [];
  for (const script of Array.from(document.querySelectorAll('script[type="application/ld+json"]'))) {
    let data: unknown;
    try {
      data = JSON.parse(script.textContent ?? "");
    } catch {
      continue;
    }
    collectPostings(data, postings, 0);
  }
  if (postings.length === 0) return null;
  const json = JSON.stringify(postings.length === 1 ? postings[0] : postings);
  return json.length > MAX_STRUCTURED_CHARS ? `${json.slice(0, MAX_STRUCTURED_CHARS)}…` : json;
}

function collectPostings(data: unknown, into: unknown[], depth: number): void {
  if (depth > 4 || data === null || typeof data !== "object") return;
  if (Array.isArray(data)) {
    for (const item of data) collectPostings(item, into, depth + 1);
    return;
  }
  const record = data as Record<string, unknown>;
  const type = record["@type"];
  const types = Array.isArray(type) ? type : [type];
  if (types.some((t) => typeof t === "string" && t.toLowerCase() === "jobposting")) {
    const copy: Record<string, unknown> = { ...record };
    delete copy["@context"];
    if (typeof copy.description === "string") copy.description = htmlToText(copy.description);
    into.push(copy);
    return;
  }
  if (record["@graph"] !== undefined) collectPostings(record["@graph"], into, depth + 1);
}

/** JSON-LD descriptions are HTML, sometimes entity-encoded once more. */
function htmlToText(value: string): string {
  const html = /&lt;\/?[a-z]/i.test(value) ? decodeHTML(value) : value;
  const { document } = parseHTML(`<!doctype html><html><body>${html}</body></html>`) as unknown as { document: DomDocument };
  return document.body ? blockText(document.body) : clean(html);
}

function clean(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
