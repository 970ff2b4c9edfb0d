/**
 * JSON Schema (draft-07, Ajv's default) for channel metadata_schema.
 * Compiled validators are cached by schema text: every message of a channel
 * is checked against the same schema, and compiling costs far more than
 * validating.
 *
 * Schemas come from any key and run on the API thread, so nothing in them may
 * cost more than a few milliseconds (docs/decisions.md#schemas-off-thread):
 * - Every regular expression (`pattern`, `patternProperties`, the patterns of
 *   `propertyNames`) runs on RE2 (re2js), which matches in time linear in the
 *   input. A pattern must be valid ECMAScript (the JSON Schema dialect) *and*
 *   expressible in RE2, so lookaround and backreferences are refused when the
 *   schema is set, never at message time.
 * - `format` is an annotation only (no format is registered, and unknown ones
 *   would otherwise log a warning per compile).
 * - Before Ajv sees a schema, `schemaCostProblem` bounds its size with every
 *   `$ref` expanded and its nesting depth; Ajv's compile time and a message's
 *   validation time both grow with that size. Recursive `$ref`s, `$ref`s that
 *   are not local JSON pointers, and nested `$id`s are refused because they
 *   would make that size unbounded or uncomputable.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { RE2JS, RE2JSException } from "re2js";
import type { JsonObject, JsonValue } from "../model/json.js";

export interface Violation {
  field: string;
  issue: string;
}


/**
 * The most JSON values a schema may hold once every `$ref` is replaced by its
 * target. Ajv compiles ~a few hundred per 10 ms on this service's hardware;
 * metadata schemas in practice hold tens.
 */
export const MAX_SCHEMA_NODES = 1000;
/** The deepest nesting of objects and arrays a schema may have. */
export const MAX_SCHEMA_DEPTH = 32;
/** The longest a single regular expression may be (RE2's program grows with it). */
export const MAX_PATTERN_LENGTH = 1000;
/** The most regular expressions a schema may hold (`pattern` values and `patternProperties` keys). */
export const MAX_SCHEMA_PATTERNS = 100;
/**
 * When a message fails its schema, every violation is listed only if the
 * schema (expanded) times the metadata's JSON values stays under this;
 * beyond it only the first violation is: listing all of them allocates one
 * error per (schema node, value) pair, which for a 16 KiB metadata object
 * can reach millions.
 */
const MAX_ALL_ERRORS_WORK = 50_000;

// Linear-time matching for every user regular expression Ajv compiles.
// Ajv calls this once per pattern while compiling, so refusals surface at
// schema time.
const re2 = Object.assign(
  (pattern: string): { test: (s: string) => boolean; toString: () => string } => {
    const why = patternProblem(pattern);
    if (why !== undefined) throw new Error(why);
    const compiled = RE2JS.compile(RE2JS.translateRegExp(pattern));
    // Ajv shares one compiled pattern per toString() across schemas: it must name the pattern.
    return { test: (s: string) => compiled.test(s), toString: () => `/${pattern}/u` };
  },
  { code: "re2js" },
);

/** Why a `pattern` cannot be used, or undefined when it can. */
export function patternProblem(pattern: string): string | undefined {
  const quoted = JSON.stringify(pattern.length > 80 ? `${pattern.slice(0, 80)}…` : pattern);
  if (pattern.length > MAX_PATTERN_LENGTH) return `pattern ${quoted} is longer than ${MAX_PATTERN_LENGTH} characters`;
  try {
    // Only for its syntax check (never run): patterns are ECMAScript regular expressions.
    new RegExp(pattern, "u");
  } catch (err) {
    return `pattern ${quoted} is not a valid regular expression: ${(err as Error).message}`;
  }
  const unsupported = (construct: string) =>
    `pattern ${quoted} uses ${construct}, which is not supported: patterns run on a linear-time engine (RE2 syntax: no lookahead, lookbehind or backreferences)`;
  // Checked before RE2 sees the pattern: its translation from ECMAScript
  // would quietly turn \k<name> into a literal "k<name>".
  const construct = unsupportedConstruct(pattern);
  if (construct !== undefined) return unsupported(construct);
  try {
    RE2JS.compile(RE2JS.translateRegExp(pattern));
  } catch (err) {
    if (!(err instanceof RE2JSException)) throw err;
    return unsupported(err.message.replace(/^error parsing regexp: /, ""));
  }
  return undefined;
}

function unsupportedConstruct(pattern: string): string | undefined {
  if (/\(\?<[=!]/.test(pattern)) return "a lookbehind ((?<= or (?<!)";
  if (/\(\?[=!]/.test(pattern)) return "a lookahead ((?= or (?!)";
  if (/\\[1-9]|\\k</.test(pattern)) return "a backreference (\\1 or \\k<name>)";
  return undefined;
}

// strict: false — schemas come from users and may carry annotations Ajv does
// not know. addUsedSchema: false — two channels may use the same $id for
// different schemas; registering them globally would make the second fail.
// logger: false — warnings about a user's schema are not the operator's.
const options = { strict: false, addUsedSchema: false, validateFormats: false, logger: false, code: { regExp: re2 } } as const;
const allErrorsAjv = new Ajv({ ...options, allErrors: true });
const firstErrorAjv = new Ajv({ ...options, allErrors: false });

interface Compiled {
  /** Stops at the first violation: cheap whatever the data. */
  first: ValidateFunction;
  /** Lists every violation; compiled on the first failing message. */
  all: ValidateFunction | undefined;
  nodes: number;
}
const cache = new Map<string, Compiled>();
const CACHE_SIZE = 1000;

/** Compiles a schema; throws an Error describing why it cannot be used. */
function compile(schema: JsonObject): Compiled {
  const text = JSON.stringify(schema);
  let compiled = cache.get(text);
  if (compiled) return compiled;
  const cost = schemaCost(schema);
  if (typeof cost === "string") throw new Error(cost);
  compiled = { first: firstErrorAjv.compile(schema), all: undefined, nodes: cost };
  cache.set(text, compiled);
  if (cache.size > CACHE_SIZE) {
    const oldest = cache.keys().next().value as string;
    const evicted = cache.get(oldest);
    // Ajv keeps its own cache keyed by the schema object; drop that entry too.
    firstErrorAjv.removeSchema(evicted?.first.schema as object);
    if (evicted?.all) allErrorsAjv.removeSchema(evicted.all.schema as object);
    cache.delete(oldest);
  }
  return compiled;
}

/** Compiles a schema (cached); throws an Error describing why it is not a usable JSON Schema. */
export function compileSchema(schema: JsonObject): ValidateFunction {
  return compile(schema).first;
}

/**
 * Why the schema cannot be used (a predicate: "is not a valid JSON Schema:
 * …", "is too large; …"), or undefined when it can.
 */
export function schemaProblem(schema: JsonObject): string | undefined {
  const measured = measure(schema);
  if (typeof measured === "string") return measured;
  // Ajv compiles only the patterns it needs (none under an always-valid
  // patternProperties schema): check them all, so none fails later.
  for (const pattern of measured.patterns) {
    const why = patternProblem(pattern);
    if (why !== undefined) return `is not a valid JSON Schema: ${why}`;
  }
  try {
    compile(schema);
    return undefined;
  } catch (err) {
    return `is not a valid JSON Schema: ${(err as Error).message}`;
  }
}

/** The ways data fails the schema; empty when it passes. An empty schema accepts anything. */
export function violations(schema: JsonObject, data: JsonValue): Violation[] {
  if (Object.keys(schema).length === 0) return [];
  let compiled: Compiled;
  try {
    compiled = compile(schema);
  } catch (err) {
    // A schema stored before a rule tightened (e.g. a lookahead pattern): refusing is safe, running it is not.
    return [{ field: "metadata", issue: `cannot be checked: the channel's metadata_schema ${schemaProblem(schema) ?? (err as Error).message}; its owner must replace the schema` }];
  }
  if (compiled.first(data)) return [];
  let errors: ErrorObject[] = compiled.first.errors ?? [];
  if (compiled.nodes * countValues(data) <= MAX_ALL_ERRORS_WORK) {
    compiled.all ??= allErrorsAjv.compile(schema);
    compiled.all(data);
    errors = compiled.all.errors ?? errors;
  }
  return errors.map((e) => {
    const missing = e.keyword === "required" ? `/${String((e.params as { missingProperty?: string }).missingProperty ?? "")}` : "";
    const path = `${e.instancePath}${missing}`.replace(/^\//, "").replace(/\//g, ".");
    return { field: path === "" ? "metadata" : `metadata.${path}`, issue: e.message ?? e.keyword };
  });
}

function countValues(value: JsonValue): number {
  if (Array.isArray(value)) return value.reduce<number>((n, v) => n + countValues(v), 1);
  if (typeof value === "object" && value !== null) return Object.values(value).reduce<number>((n, v) => n + countValues(v), 1);
  return 1;
}

const SIZE_HINT = `keep it under ${MAX_SCHEMA_NODES} values with every $ref expanded and ${MAX_SCHEMA_DEPTH} levels deep`;

/**
 * The schema's size with every `$ref` replaced by its target (a number), or
 * why it cannot be used (a string). Walks the JSON, not the schema keywords:
 * that over-counts data inside `enum`/`const`/`default`, which Ajv also has to
 * compile into code, so it is part of the cost.
 */
export function schemaCost(schema: JsonObject): number | string {
  const measured = measure(schema);
  return typeof measured === "string" ? measured : measured.size;
}

function measure(schema: JsonObject): { size: number; patterns: Set<string> } | string {
  const patterns = new Set<string>();
  const sizes = new Map<string, number>();
  const inProgress = new Set<string>();
  let problem: string | undefined;

  const resolve = (ref: string): number => {
    if (ref !== "#" && !ref.startsWith("#/")) {
      problem = `has $ref ${JSON.stringify(ref)}; only local JSON-pointer references such as "#/definitions/name" are supported`;
      return 0;
    }
    const known = sizes.get(ref);
    if (known !== undefined) return known;
    if (inProgress.has(ref)) {
      problem = `has a recursive $ref ${JSON.stringify(ref)}; recursive schemas are not supported (their cost grows with the data)`;
      return 0;
    }
    const target = pointer(schema, ref);
    if (target === undefined) return 0; // Ajv reports the unresolvable reference.
    inProgress.add(ref);
    const size = walk(target, 0, false);
    inProgress.delete(ref);
    sizes.set(ref, size);
    return size;
  };

  const walk = (value: JsonValue, depth: number, root: boolean): number => {
    if (problem !== undefined) return 0;
    if (depth > MAX_SCHEMA_DEPTH) {
      problem = `is nested more than ${MAX_SCHEMA_DEPTH} levels deep; ${SIZE_HINT}`;
      return 0;
    }
    let size = 1;
    if (Array.isArray(value)) {
      for (const item of value) size += walk(item, depth + 1, false);
    } else if (typeof value === "object" && value !== null) {
      for (const [key, item] of Object.entries(value)) {
        if (key === "$ref" && typeof item === "string") size += resolve(item);
        // A nested $id would change what "#/…" means inside it.
        else if ((key === "$id" || key === "id") && typeof item === "string" && !root) {
          problem = `has '${key}' below the top level; it is only supported at the top level`;
        } else {
          if (key === "pattern" && typeof item === "string") patterns.add(item);
          if (key === "patternProperties" && typeof item === "object" && item !== null && !Array.isArray(item)) {
            for (const p of Object.keys(item)) patterns.add(p);
          }
          if (patterns.size > MAX_SCHEMA_PATTERNS) problem = `has more than ${MAX_SCHEMA_PATTERNS} regular expressions; ${SIZE_HINT}`;
          size += walk(item, depth + 1, false);
        }
        if (problem === undefined && size > MAX_SCHEMA_NODES) problem = `is too large; ${SIZE_HINT}`;
        if (problem !== undefined) return 0;
      }
    }
    return size;
  };

  const size = walk(schema, 0, true);
  return problem ?? { size, patterns };
}

function pointer(root: JsonValue, ref: string): JsonValue | undefined {
  if (ref === "#") return root;
  let node: JsonValue | undefined = root;
  for (const raw of ref.slice(2).split("/")) {
    let token: string;
    try {
      token = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    } catch {
      return undefined;
    }
    if (Array.isArray(node)) node = node[Number(token)];
    else if (typeof node === "object" && node !== null && Object.hasOwn(node, token)) node = node[token];
    else return undefined;
  }
  return node;
}
