/**
 * google.api.http path templates, compiled once at startup from the proto's
 * HttpRules and matched against every REST request path.
 *
 * Grammar (https://github.com/googleapis/googleapis/blob/master/google/api/http.proto):
 *
 *     Template = "/" Segments [ Verb ] ;
 *     Segments = Segment { "/" Segment } ;
 *     Segment  = "*" | "**" | LITERAL | Variable ;
 *     Variable = "{" FieldPath [ "=" Segments ] "}" ;
 *     FieldPath = IDENT { "." IDENT } ;
 *     Verb     = ":" LITERAL ;
 *
 * Matching rules we chose where the grammar leaves room:
 * - `match` takes the path only (no query string), as it arrives on the wire
 *   (still percent-encoded); segments are decoded before comparing.
 * - A verb is stripped from the end of the path only when the template has
 *   one, so `/v1/channels/{identifier}` captures "a:b" whole, and a template
 *   with a verb never matches a path without it (and vice versa, because the
 *   final literal segment then differs).
 * - `*` and every segment captured by a variable must be non-empty; `**`
 *   matches zero or more non-empty segments and must be the last segment.
 *   So trailing slashes and `//` never match.
 * - Variable values are percent-decoded; a multi-segment value keeps `%2F`
 *   encoded so that its `/` separators stay unambiguous (as google.api.http's HttpRule says).
 *   A malformed escape means "no match", never an exception.
 */

type Segment =
  | { readonly kind: "literal"; readonly value: string }
  /** `*`: exactly one non-empty segment. */
  | { readonly kind: "single" }
  /** `**`: zero or more non-empty segments; always the last segment. */
  | { readonly kind: "multi" };

interface VariableSpan {
  readonly name: string;
  /** Index of the first template segment the variable covers. */
  readonly start: number;
  /** Index after the last template segment the variable covers. */
  readonly end: number;
}

export interface PathTemplate {
  readonly template: string;
  /** Field paths bound by the template, in order of appearance. */
  readonly variables: string[];
  /** The custom verb after the final `:`, e.g. "stream"; undefined when none. */
  readonly verb: string | undefined;
  /**
   * Ranks used to order templates that match the same path: first whether
   * the template has a verb, then one rank per segment (literal 3, `*` or a
   * one-segment variable 2, `**` 1). Compare with comparePathTemplates.
   */
  readonly specificity: number[];
  /** The variables' decoded values, or undefined when the path does not match. */
  match(path: string): Record<string, string> | undefined;
  /** comparePathTemplates(this, other): negative when this template is more specific. */
  compare(other: PathTemplate): number;
}

const RANK_LITERAL = 3;
const RANK_SINGLE = 2;
const RANK_MULTI = 1;

/**
 * Orders templates most specific first (negative when `a` beats `b`), for
 * sorting the templates that matched one path: a verb beats no verb, then the
 * first segment where they differ decides (literal > variable or `*` > `**`),
 * so `/v1/keys/me` beats `/v1/keys/{id}`. When one ranking is a prefix of the
 * other, the shorter wins: the longer one only matched through a trailing
 * `**` that captured nothing. 0 means equally specific; keep declaration order.
 */
export function comparePathTemplates(a: PathTemplate, b: PathTemplate): number {
  const x = a.specificity;
  const y = b.specificity;
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const difference = (y[i] ?? 0) - (x[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return x.length - y.length;
}

/** Compiles a template; throws an Error naming the template when it is malformed. */
export function compilePathTemplate(template: string): PathTemplate {
  const parsed = new TemplateParser(template).parse();
  const { segments, spans, verb } = parsed;
  const specificity = [
    verb === undefined ? 0 : 1,
    ...segments.map((s) => (s.kind === "literal" ? RANK_LITERAL : s.kind === "single" ? RANK_SINGLE : RANK_MULTI)),
  ];
  const endsWithMulti = segments.at(-1)?.kind === "multi";
  const fixedCount = endsWithMulti ? segments.length - 1 : segments.length;

  function match(path: string): Record<string, string> | undefined {
    if (!path.startsWith("/")) return undefined;
    let rest = path.slice(1);
    if (verb !== undefined) {
      const suffix = `:${verb}`;
      if (!rest.endsWith(suffix)) return undefined;
      rest = rest.slice(0, rest.length - suffix.length);
    }
    const raw = splitSegments(rest);
    if (endsWithMulti ? raw.length < fixedCount : raw.length !== fixedCount) return undefined;

    for (let i = 0; i < raw.length; i++) {
      const segment = raw[i] ?? "";
      if (segment === "") return undefined; // no template segment accepts an empty one
      const decoded = decodeSegment(segment);
      if (decoded === undefined) return undefined;
      const expected = segments[Math.min(i, segments.length - 1)];
      if (expected?.kind === "literal" && expected.value !== decoded) return undefined;
    }

    const values: [string, string][] = [];
    for (const span of spans) {
      const isLast = span.end === segments.length;
      const end = isLast && endsWithMulti ? raw.length : span.end;
      const captured = raw.slice(span.start, end);
      if (captured.length === 0) return undefined; // a `**` variable that captured nothing
      const value =
        captured.length === 1 && !(isLast && endsWithMulti)
          ? decodeSegment(captured[0] ?? "")
          : joinKeepingSlashes(captured);
      if (value === undefined || value === "") return undefined;
      values.push([span.name, value]);
    }
    // fromEntries defines own properties, so even odd names cannot touch the prototype.
    return Object.fromEntries(values);
  }

  const compiled: PathTemplate = {
    template,
    variables: spans.map((s) => s.name),
    verb,
    specificity,
    match,
    compare: (other) => comparePathTemplates(compiled, other),
  };
  return compiled;
}

/**
 * The router tries every template on a path in turn; each would split the
 * same string again. The last split is kept (read only: match never writes
 * to it).
 */
let lastSplit: { text: string; segments: readonly string[] } = { text: "", segments: [""] };

function splitSegments(text: string): readonly string[] {
  if (lastSplit.text !== text) lastSplit = { text, segments: text.split("/") };
  return lastSplit.segments;
}

function decodeSegment(segment: string): string | undefined {
  // Without a `%` there is nothing to decode (and nothing malformed): the
  // common case, for every template the router tries on a path.
  if (!segment.includes("%")) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Decodes a multi-segment capture but leaves `%2F` encoded, so `/` stays a separator. */
function joinKeepingSlashes(segments: string[]): string | undefined {
  const parts: string[] = [];
  for (const segment of segments) {
    const pieces = segment.split(/%2F/i).map(decodeSegment);
    if (pieces.some((p) => p === undefined)) return undefined;
    parts.push(pieces.join("%2F"));
  }
  return parts.join("/");
}

// Characters of a literal segment or verb: RFC 3986 unreserved and most
// sub-delims; excludes the template syntax (`{}*=:/`) and `%`, `?`, `#`.
const LITERAL_CHAR = /[A-Za-z0-9\-._~!$&'()+,;@]/;
const FIELD_PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

interface ParsedTemplate {
  segments: Segment[];
  spans: VariableSpan[];
  verb: string | undefined;
}

/** A recursive-descent parser over the grammar above; one instance per template. */
class TemplateParser {
  private pos = 0;
  private readonly segments: Segment[] = [];
  private readonly spans: VariableSpan[] = [];

  constructor(private readonly template: string) {}

  parse(): ParsedTemplate {
    if (!this.template.startsWith("/")) this.fail("it must start with '/'");
    this.pos = 1;
    this.parseSegments(false);
    let verb: string | undefined;
    if (this.peek() === ":") {
      this.pos++;
      verb = this.readLiteral();
      if (verb === "") this.fail("the verb after ':' is empty");
    }
    if (this.pos < this.template.length) this.fail(`unexpected '${this.peek() ?? ""}'`);

    const multiAt = this.segments.findIndex((s) => s.kind === "multi");
    if (multiAt !== -1 && multiAt !== this.segments.length - 1) this.fail("'**' must be the last segment");
    const names = new Set<string>();
    for (const span of this.spans) {
      if (names.has(span.name)) this.fail(`variable '${span.name}' appears twice`);
      names.add(span.name);
    }
    return { segments: this.segments, spans: this.spans, verb };
  }

  private parseSegments(insideVariable: boolean): void {
    for (;;) {
      this.parseSegment(insideVariable);
      if (this.peek() !== "/") return;
      this.pos++;
    }
  }

  private parseSegment(insideVariable: boolean): void {
    const c = this.peek();
    if (c === "{") {
      if (insideVariable) this.fail("variables cannot be nested");
      this.parseVariable();
    } else if (c === "*") {
      this.pos++;
      if (this.peek() === "*") {
        this.pos++;
        this.segments.push({ kind: "multi" });
      } else {
        this.segments.push({ kind: "single" });
      }
    } else {
      const value = this.readLiteral();
      if (value === "") this.fail(c === undefined || c === "/" ? "empty segment" : `unexpected '${c}'`);
      this.segments.push({ kind: "literal", value });
    }
  }

  private parseVariable(): void {
    const open = this.pos;
    this.pos++; // "{"
    let end = this.pos;
    while (end < this.template.length && !"=}".includes(this.template[end] ?? "")) end++;
    const name = this.template.slice(this.pos, end);
    if (!FIELD_PATH.test(name)) this.fail(`'${name}' at ${open} is not a field path`);
    this.pos = end;
    const start = this.segments.length;
    if (this.peek() === "=") {
      this.pos++;
      this.parseSegments(true);
    } else {
      this.segments.push({ kind: "single" });
    }
    if (this.peek() !== "}") this.fail(`variable '${name}' is not closed with '}'`);
    this.pos++;
    this.spans.push({ name, start, end: this.segments.length });
  }

  private readLiteral(): string {
    const start = this.pos;
    while (this.pos < this.template.length && LITERAL_CHAR.test(this.template[this.pos] ?? "")) this.pos++;
    return this.template.slice(start, this.pos);
  }

  private peek(): string | undefined {
    return this.template[this.pos];
  }

  private fail(reason: string): never {
    throw new Error(`Invalid path template "${this.template}": ${reason}`);
  }
}
