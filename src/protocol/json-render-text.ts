/**
 * The REST response body as JSON text: exactly JSON.stringify(renderMessage(…)),
 * written per message type by a function generated once from its descriptor.
 *
 * Why generated code: a page is 50 messages of 14 fields, and the body is
 * on the hot path of every read. Closures shared by all fields (as in
 * json-render.ts) leave V8 one property-load site for every field of every
 * type, which goes megamorphic; a function per message type reads
 * `s["channelId"]` at its own site, and builds the text without the objects.
 * Measured on a page of 50 messages: 25 µs against 40 µs for the closures.
 *
 * The generated source holds only descriptor data passed through
 * JSON.stringify (property names, key texts) and fixed code; values are
 * read at run time. Anything but the common kinds (strings, numbers, bools,
 * enums, timestamps, nested messages and lists of them) is written from the
 * compiled field readers of json-render.ts, and a message type those do not
 * take renders through the reference renderer.
 */
import { ScalarType, type DescField, type DescMessage } from "@bufbuild/protobuf";
import { scalarZeroValue } from "@bufbuild/protobuf/reflect";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import type { JsonValue } from "../model/json.js";
import { formatTimestamp } from "../model/time.js";
import { enumJsonLookup } from "./json-enums.js";
import {
  EDITION_PROTO3,
  NEEDS_REFLECTION,
  TYPE_TIMESTAMP,
  byReflection,
  compilable,
  enumWriter,
  fieldWriter,
  oneofWriter,
  renderMessage,
  scalarWriter,
  timestampMicros,
  type MemberWriter,
  type Source,
  type ValueWriter,
} from "./json-render.js";
import { isWellKnown } from "./json-render-reflect.js";

type TextRenderer = (source: Source) => string;

const renderers = new WeakMap<DescMessage, TextRenderer>();

/** JSON.stringify(renderMessage(schema, message)), without building the objects. */
export function renderMessageJson(schema: DescMessage, message: object): string {
  return textRendererOf(schema)(message as Source);
}

function textRendererOf(desc: DescMessage): TextRenderer {
  let renderer = renderers.get(desc);
  if (renderer === undefined) {
    renderer = generate(desc);
    renderers.set(desc, renderer);
  }
  return renderer;
}

/** A renderer resolved on first use: a message type may contain itself. */
function lazyRenderer(desc: DescMessage): TextRenderer {
  let renderer: TextRenderer | undefined;
  return (source) => (renderer ??= textRendererOf(desc))(source);
}

// ---------------------------------------------------------------------------
// Values as JSON text

/** Characters JSON.stringify escapes: quote, backslash, controls, and (lone) surrogates. */
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * JSON.stringify of a string. Most strings (ids, names, plain text) need no
 * escape, and a regex test plus two quotes costs less than a JSON.stringify
 * call; the others go through JSON.stringify itself.
 */
function quote(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/**
 * JSON.stringify of a rendered value. A value JSON.stringify would leave out
 * (undefined, from a value of the wrong type) sends the message to the
 * reference renderer, which leaves it out too.
 */
function jsonText(value: JsonValue | undefined): string {
  switch (typeof value) {
    case "string":
      return quote(value);
    case "number":
      return Number.isFinite(value) ? String(value) : "null";
    case "boolean":
      return value ? "true" : "false";
    case "object":
      return value === null ? "null" : JSON.stringify(value);
    default:
      throw NEEDS_REFLECTION;
  }
}

/** Enum values as JSON text ("\"claimable\"", "null"), looked up. */
function enumTextLookup(field: DescField & { fieldKind: "enum" }): (value: number) => string {
  const name = enumJsonLookup(field.enum);
  const texts = new Map<number, string>(field.enum.values.map((v) => [v.number, jsonText(name(v.number))]));
  return (value) => texts.get(value) ?? "null";
}

// ---------------------------------------------------------------------------
// Code generation

/** What a generated function receives: the helpers and per-member functions its code refers to by index. */
interface Helpers {
  quote: typeof quote;
  text: typeof jsonText;
  formatTimestamp: typeof formatTimestamp;
  timestampMicros: typeof timestampMicros;
  needsReflection: unknown;
  fallback: TextRenderer;
  fns: Array<MemberWriter | ValueWriter | TextRenderer | ((value: number) => string)>;
}

const literal = (text: string) => JSON.stringify(text);

function generate(desc: DescMessage): TextRenderer {
  const fallback: TextRenderer = (source) => JSON.stringify(byReflection(desc, source));
  if (!desc.members.every(compilable)) return fallback;
  const fns: Helpers["fns"] = [];
  const fn = (f: Helpers["fns"][number]) => `f[${fns.push(f) - 1}]`;

  const lines: string[] = [];
  desc.members.forEach((member, index) => {
    const key = literal(`${index === 0 ? "{" : ","}${JSON.stringify(member.name)}:`);
    if (member.kind === "oneof") {
      lines.push(`out += ${key} + text(${fn(oneofWriter(member))}(s));`);
      return;
    }
    const read = `v = s[${literal(member.localName)}];`;
    const special = fieldCode(desc, member, fn);
    if (special === undefined) lines.push(`out += ${key} + text(${fn(fieldWriter(desc, member))}(s));`);
    else lines.push(`${read} out += ${key};`, special);
  });
  if (desc.members.length === 0) lines.push(`out += "{";`);

  const name = `render_${desc.typeName.replace(/[^A-Za-z0-9_]/g, "_")}`;
  const source = `"use strict";
const { quote, text, formatTimestamp, timestampMicros, needsReflection, fallback, fns: f } = h;
return function ${name}(s) {
  try {
    let v;
    let out = "";
    ${lines.join("\n    ")}
    return out + "}";
  } catch (err) {
    if (err === needsReflection) return fallback(s);
    throw err;
  }
};`;
  const helpers: Helpers = { quote, text: jsonText, formatTimestamp, timestampMicros, needsReflection: NEEDS_REFLECTION, fallback, fns };
  try {
    // Generated from descriptors only (see the module comment).
    return new Function("h", source)(helpers) as TextRenderer;
  } catch {
    // Code generation disabled (node --disallow-code-generation-from-strings):
    // the closures' object, as text.
    return (s) => JSON.stringify(renderMessage(desc, s));
  }
}

const absent = "v === undefined || v === null";

/**
 * Code that appends the JSON text of field value `v` to `out`, for the kinds
 * written inline; undefined for the others (written from fieldWriter). Each
 * branch writes what the field's reader in json-render.ts would return,
 * as jsonText would write it.
 */
function fieldCode(parent: DescMessage, field: DescField, fn: (f: Helpers["fns"][number]) => string): string | undefined {
  const explicit = field.presence === FeatureSet_FieldPresence.EXPLICIT;
  switch (field.fieldKind) {
    case "scalar": {
      // Outside proto3, presence needs the own-property check of fieldWriter; 64-bit strings need parsing.
      if ((explicit && parent.file.edition !== EDITION_PROTO3) || ("longAsString" in field && field.longAsString)) return undefined;
      const write = scalarWriter(field);
      const general = `text(${fn(write)}(v))`;
      const missing = explicit ? literal("null") : literal(jsonText(write(field.getDefaultValue() ?? scalarZeroValue(field.scalar, false))));
      return `out += ${absent} ? ${missing} : ${scalarCode(field.scalar, general)};`;
    }
    case "enum": {
      if (explicit && parent.file.edition !== EDITION_PROTO3) return undefined;
      const texts = fn(enumTextLookup(field));
      const zero = (field.getDefaultValue() as number | undefined) ?? field.enum.values[0]?.number ?? 0;
      // enumWriter looks numbers up; anything else goes through it as is.
      const present = `(typeof v === "number" ? ${texts}(v) : text(${fn(enumWriter(field))}(v)))`;
      return `out += ${absent} ? ${explicit ? literal("null") : `${texts}(${zero})`} : ${present};`;
    }
    case "message":
      if (field.message.typeName === TYPE_TIMESTAMP) {
        // Digits, dashes, colons, T, dot and Z: nothing to escape.
        return `out += ${absent} ? "null" : '"' + formatTimestamp(timestampMicros(v)) + '"';`;
      }
      if (isWellKnown(field.message)) return undefined;
      return `out += ${absent} ? "null" : ${fn(lazyRenderer(field.message))}(v);`;
    case "list": {
      if (field.listKind !== "message" || isWellKnown(field.message)) return undefined;
      const render = fn(lazyRenderer(field.message));
      // An element without a value is the zero message, as in json-render.ts.
      return `if (${absent} || v.length === 0) out += "[]";
    else { out += "["; for (let i = 0; i < v.length; i++) { const e = v[i]; out += (i === 0 ? "" : ",") + ${render}(e === undefined || e === null ? {} : e); } out += "]"; }`;
    }
    case "map":
      return undefined;
  }
}

/** A present scalar `v`: the common JS type inline, anything else through the field's reader. */
function scalarCode(type: ScalarType, general: string): string {
  switch (type) {
    case ScalarType.STRING:
      return `(typeof v === "string" ? quote(v) : ${general})`;
    case ScalarType.BOOL:
      return `(v === true ? "true" : v === false ? "false" : ${general})`;
    case ScalarType.BYTES:
      return general;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SINT64:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      // int64 as a number (renderScalar's Number(), written as JSON.stringify would).
      return `(typeof v === "bigint" ? text(Number(v)) : ${general})`;
    default:
      // int32 family, float, double: renderScalar keeps a finite number as it is.
      return `(typeof v === "number" && Number.isFinite(v) ? String(v) : ${general})`;
  }
}
