/**
 * Caption documents of the video host, to segments. Three formats, as the
 * host serves them depending on the `fmt` of the track URL:
 *
 * - the classic timed text (no fmt):
 *   `<transcript><text start="1.2" dur="3.4">…</text></transcript>` (seconds);
 * - srv3: `<timedtext format="3"><body><p t="1200" d="3400">…<s>word</s></p>`
 *   (milliseconds);
 * - json3: `{"events":[{"tStartMs":1200,"dDurationMs":3400,"segs":[{"utf8":"…"}]}]}`.
 *
 * Text: the XML layer is decoded by the parser; the host encodes the text
 * once more (`&amp;#39;` for an apostrophe), so HTML entities are decoded a
 * second time, as established transcript fetchers do. Markup inside the text
 * (`<font color=…>`, `<i>`) is dropped; whitespace, line breaks included, is
 * collapsed to single spaces. Empty segments are left out. start and
 * duration are seconds, rounded to milliseconds.
 */
import { decodeHTML } from "entities";
import { DOMParser } from "linkedom";

export interface TranscriptSegment {
  text: string;
  /** Seconds from the start of the video. */
  start: number;
  /** Seconds. */
  duration: number;
}

export class UnreadableCaptions extends Error {
  override readonly name = "UnreadableCaptions";
}

interface XmlElement {
  localName?: string;
  textContent: string | null;
  getAttribute(name: string): string | null;
  querySelectorAll(selector: string): ArrayLike<XmlElement>;
}

export function parseTimedText(body: string): TranscriptSegment[] {
  const trimmed = body.trimStart();
  if (trimmed.startsWith("{")) return parseJson3(trimmed);
  if (trimmed.startsWith("<")) return parseXml(trimmed);
  throw new UnreadableCaptions("the caption document is neither XML nor JSON");
}

function parseXml(xml: string): TranscriptSegment[] {
  let doc: { querySelectorAll(selector: string): ArrayLike<XmlElement> };
  try {
    doc = new DOMParser().parseFromString(xml, "text/xml") as unknown as typeof doc;
  } catch (err) {
    throw new UnreadableCaptions(`the caption XML does not parse: ${(err as Error).message}`);
  }
  const classic = Array.from(doc.querySelectorAll("text"));
  if (classic.length > 0) {
    return segments(classic.map((el) => ({ text: el.textContent ?? "", start: seconds(el.getAttribute("start")), duration: seconds(el.getAttribute("dur")) })));
  }
  const srv3 = Array.from(doc.querySelectorAll("p"));
  if (srv3.length > 0) {
    return segments(srv3.map((el) => ({ text: el.textContent ?? "", start: millis(el.getAttribute("t")), duration: millis(el.getAttribute("d")) })));
  }
  if (Array.from(doc.querySelectorAll("transcript, timedtext")).length === 0) throw new UnreadableCaptions("the caption XML is not timed text");
  return [];
}

interface Json3 {
  events?: Array<{ tStartMs?: unknown; dDurationMs?: unknown; segs?: Array<{ utf8?: unknown }> }>;
}

function parseJson3(json: string): TranscriptSegment[] {
  let doc: Json3;
  try {
    doc = JSON.parse(json) as Json3;
  } catch {
    throw new UnreadableCaptions("the caption JSON does not parse");
  }
  if (!Array.isArray(doc.events)) throw new UnreadableCaptions("the caption JSON has no events");
  return segments(
    doc.events
      .filter((e) => Array.isArray(e.segs))
      .map((e) => ({
        text: e.segs!.map((s) => (typeof s.utf8 === "string" ? s.utf8 : "")).join(""),
        start: millis(e.tStartMs),
        duration: millis(e.dDurationMs),
      })),
  );
}

function segments(raw: Array<{ text: string; start: number; duration: number }>): TranscriptSegment[] {
  const out: TranscriptSegment[] = [];
  for (const r of raw) {
    const text = cleanText(r.text);
    if (text !== "") out.push({ text, start: r.start, duration: r.duration });
  }
  return out;
}

/** Second-level entity decoding, markup dropped, whitespace collapsed. */
export function cleanText(text: string): string {
  return decodeHTML(text)
    .replace(/<[^>]*>/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

function seconds(value: string | null): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) && n >= 0 ? Math.round(n * 1000) / 1000 : 0;
}

function millis(value: unknown): number {
  const n = Number(value ?? 0);
  return Number.isFinite(n) && n >= 0 ? Math.round(n) / 1000 : 0;
}
