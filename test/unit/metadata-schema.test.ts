/**
 * Metadata schemas run user-supplied regular expressions and user-sized
 * compiled code: patterns match in linear time (RE2), what RE2 cannot run is
 * refused when the schema is set, the schema's expanded size is bounded, and
 * compiling/validating happens on the schema thread under a deadline.
 */
import { describe, expect, it } from "vitest";
import { checkMetadataSchema, validateMetadataSchema } from "../../src/domain/channels.js";
import { ApiError } from "../../src/model/errors.js";
import type { JsonValue } from "../../src/model/json.js";
import { MAX_SCHEMA_DEPTH, MAX_SCHEMA_NODES, MAX_SCHEMA_PATTERNS, patternProblem, schemaCost, schemaProblem, violations } from "../../src/domain/json-schema.js";
import { MAX_SCHEMA_JOBS_PER_KEY, schemaProblemOffThread, violationsOffThread } from "../../src/domain/json-schema-thread.js";
import { rejectionOf } from "../support/errors.js";

type Schema = { [key: string]: JsonValue };
/** The key whose turn a schema job takes on the thread. */
const KEY = "ak_test";
const withPattern = (pattern: string): Schema => ({ type: "object", properties: { a: { type: "string", pattern } } });
const props = (n: number, schema: (i: number) => Schema): Schema => ({
  type: "object",
  properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, schema(i)])),
});

/** Setting a schema: the cheap checks, then the ones on the schema thread. */
async function setSchema(schema: Schema): Promise<void> {
  validateMetadataSchema(schema);
  await checkMetadataSchema(KEY, schema);
}
const refusal = (schema: Schema) => rejectionOf(ApiError, setSchema(schema));

describe("regular expressions in metadata schemas", () => {
  it("matches catastrophic patterns in time linear in the input", () => {
    // Backtracking engines take ~2^n steps on these (hours at n = 40).
    for (const [pattern, bad] of [
      ["^(a+)+$", "a"],
      ["^(a|a)*$", "a"],
      ["^(\\w+\\s?)*$", "w"],
    ] as const) {
      const started = performance.now();
      const found = violations(withPattern(pattern), { a: `${bad.repeat(40)}!` });
      expect(found).toEqual([{ field: "metadata.a", issue: `must match pattern "${pattern}"` }]);
      expect(violations(withPattern(pattern), { a: `${bad.repeat(16_000)}!` })).toHaveLength(1);
      expect(performance.now() - started).toBeLessThan(2_000);
    }
  });

  it("runs patternProperties and propertyNames patterns on the same engine", () => {
    const key = `${"a".repeat(40)}!`;
    const started = performance.now();
    expect(violations({ patternProperties: { "^(a+)+$": { type: "string" } } }, { [key]: 1 })).toEqual([]);
    expect(violations({ propertyNames: { pattern: "^(a+)+$" } }, { [key]: 1 })).toEqual([
      { field: "metadata", issue: 'must match pattern "^(a+)+$"' },
      { field: "metadata", issue: "property name must be valid" },
    ]);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it("still matches ordinary patterns, including Unicode ones, as ECMAScript does", () => {
    const cases: Array<[string, string, boolean]> = [
      ["^[A-Z]{3}-\\d{4}$", "ABC-1234", true],
      ["^[A-Z]{3}-\\d{4}$", "ABC-12345", false],
      ["^\\p{L}+$", "héllo日本", true],
      ["^\\p{L}+$", "hello1", false],
      ["^[😀-😂]$", "😁", true],
      ["^\\u{1F600}$", "😀", true],
      ["^\\u00e9$", "é", true],
      ["^(?<year>\\d{4})-(?<month>\\d{2})$", "2026-11", true],
      ["^.$", "😀", true],
      ["ab", "xxabyy", true],
    ];
    for (const [pattern, value, matches] of cases) {
      expect(schemaProblem(withPattern(pattern)), pattern).toBeUndefined();
      expect(violations(withPattern(pattern), { a: value }).length === 0, `${pattern} on ${value}`).toBe(matches);
      expect(new RegExp(pattern, "u").test(value), `ECMAScript agrees on ${pattern}`).toBe(matches);
    }
  });

  it("refuses lookaround and backreferences when the schema is set, naming the construct", async () => {
    const cases: Array<[string, string]> = [
      ["^(?=.*\\d).+$", "lookahead"],
      ["^(?!admin).+$", "lookahead"],
      ["(?<=@)\\w+", "lookbehind"],
      ["(?<!x)y", "lookbehind"],
      ["^(a)\\1$", "backreference"],
      ["^(?<q>['\"]).*\\k<q>$", "backreference"],
    ];
    for (const [pattern, construct] of cases) {
      expect(patternProblem(pattern), pattern).toContain(construct);
      const schemas: Schema[] = [withPattern(pattern), { patternProperties: { [pattern]: {} } }, { propertyNames: { pattern } }];
      for (const schema of schemas) {
        const err = await refusal(schema);
        expect(err.code).toBe("invalid_object");
        expect(err.status).toBe(422);
        expect(err.message).toContain(construct);
        expect(err.message).toContain("linear-time");
      }
    }
  });

  it("refuses patterns that are not ECMAScript, even where RE2 would accept them", async () => {
    for (const pattern of ["(?i)abc", "\\Qa.b\\E", "a{,3}", "(unclosed"]) {
      expect((await refusal(withPattern(pattern))).message, pattern).toContain("is not a valid regular expression");
    }
  });

  it("treats format as an annotation: no format is checked", () => {
    expect(schemaProblem({ properties: { a: { format: "email" }, b: { format: "no-such-format" } } })).toBeUndefined();
    expect(violations({ properties: { a: { format: "email" } } }, { a: "not an email" })).toEqual([]);
  });
});

describe("the cost bound on metadata schemas", () => {
  it("accepts a realistic schema of a hundred fields", () => {
    const schema = props(100, (i) => ({ type: "string", minLength: 1, maxLength: 200, description: `field ${i}` }));
    expect(schemaCost(schema)).toBeLessThanOrEqual(MAX_SCHEMA_NODES);
    expect(schemaProblem(schema)).toBeUndefined();
  });

  it("counts every $ref as its target, so fan-out through definitions is bounded", async () => {
    const big = props(Math.floor(MAX_SCHEMA_NODES / 6), () => ({ type: "string" }));
    const fanOut = { definitions: { big }, type: "object", properties: { a: { $ref: "#/definitions/big" }, b: { $ref: "#/definitions/big" } } };
    expect(schemaCost({ definitions: { big }, $ref: "#/definitions/big" })).toBeLessThan(MAX_SCHEMA_NODES);
    const err = await refusal(fanOut);
    expect(err.message).toContain("is too large");
    expect(err.message).toContain(`${MAX_SCHEMA_NODES}`);
  });

  it("refuses a chain of definitions that doubles at every step", async () => {
    const definitions: Schema = { d20: { type: "string" } };
    for (let i = 0; i < 20; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i + 1}` }, { $ref: `#/definitions/d${i + 1}` }] };
    expect((await refusal({ definitions, $ref: "#/definitions/d0" })).message).toContain("is too large");
  });

  it("refuses recursive, non-local and nested-$id references", async () => {
    expect((await refusal({ properties: { next: { $ref: "#" } } })).message).toContain("recursive $ref");
    expect((await refusal({ definitions: { n: { anyOf: [{ $ref: "#/definitions/n" }] } }, $ref: "#/definitions/n" })).message).toContain("recursive $ref");
    expect((await refusal({ $ref: "other.json#/x" })).message).toContain("only local JSON-pointer references");
    expect((await refusal({ properties: { a: { $id: "http://x/a", type: "string" } } })).message).toContain("'$id' below the top level");
  });

  it("refuses nesting deeper than the limit", async () => {
    let deep: Schema = { type: "string" };
    for (let i = 0; i < MAX_SCHEMA_DEPTH; i++) deep = { allOf: [deep] };
    expect((await refusal(deep)).message).toContain(`more than ${MAX_SCHEMA_DEPTH} levels deep`);
  });

  it("refuses more regular expressions than the limit", async () => {
    const schema = { patternProperties: Object.fromEntries(Array.from({ length: MAX_SCHEMA_PATTERNS + 1 }, (_, i) => [`^k${i}$`, {}])) };
    expect((await refusal(schema)).message).toContain(`more than ${MAX_SCHEMA_PATTERNS} regular expressions`);
  });

  it("counts enum values, which are compiled too", async () => {
    expect((await refusal({ properties: { a: { enum: Array.from({ length: MAX_SCHEMA_NODES }, (_, i) => i) } } })).message).toContain("is too large");
  });

  it("lists every violation, but only the first when listing all would be too costly", () => {
    expect(violations(props(3, () => ({ type: "integer" })), { p0: "x", p1: "y", p2: 3 })).toHaveLength(2);
    const flood = { additionalProperties: { allOf: Array.from({ length: 100 }, () => ({ type: "string" })) } };
    const metadata = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`k${i}`, i]));
    expect(violations(flood, metadata)).toEqual([{ field: "metadata.k0", issue: "must be string" }]);
  });
});

describe("the schema thread", () => {
  it("compiles and validates off the event loop with the same rules", async () => {
    expect(await schemaProblemOffThread(KEY, withPattern("^(?=x)"))).toContain("lookahead");
    expect(await schemaProblemOffThread(KEY, withPattern("^(a+)+$"))).toBeUndefined();
    expect(await violationsOffThread(KEY, withPattern("^(a+)+$"), { a: `${"a".repeat(40)}!` })).toEqual([
      { field: "metadata.a", issue: 'must match pattern "^(a+)+$"' },
    ]);
  });

  it("refuses a schema whose compilation overruns the deadline, and still serves the jobs queued behind it", async () => {
    const heavy = props(90, (i) => ({ type: "string", pattern: `^x${i}$` }));
    // Another key's job goes to the thread with the heavy one; the same key's waits for its turn.
    const [overran, sentWithIt, waiting] = await Promise.all([
      schemaProblemOffThread(KEY, heavy, 1),
      violationsOffThread("ak_other", { required: ["a"] }, {}),
      violationsOffThread(KEY, { required: ["b"] }, {}),
    ]);
    expect(overran).toMatch(/^is too expensive: compiling it took longer than 1 ms/);
    expect(sentWithIt).toEqual([{ field: "metadata.a", issue: "must have required property 'a'" }]);
    expect(waiting).toEqual([{ field: "metadata.b", issue: "must have required property 'b'" }]);
    expect(await schemaProblemOffThread(KEY, heavy)).toBeUndefined();
  });

  it("refuses a key's check beyond MAX_SCHEMA_JOBS_PER_KEY with 429 schema_checks_busy and Retry-After, and not another key's", async () => {
    const schema = { required: ["a"] };
    const flood = Array.from({ length: MAX_SCHEMA_JOBS_PER_KEY + 1 }, () => violationsOffThread("ak_flood", schema, { a: 1 }).then(() => undefined, (err: unknown) => err));
    const other = violationsOffThread("ak_calm", schema, { a: 1 });
    const outcomes = await Promise.all(flood);
    const refused = outcomes.filter((o) => o !== undefined);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toBeInstanceOf(ApiError);
    expect(refused[0]).toMatchObject({ code: "schema_checks_busy", status: 429, headers: { "Retry-After": "1" } });
    expect(await other).toEqual([]);
    // Once its checks are done, the key may send more.
    expect(await violationsOffThread("ak_flood", schema, { a: 1 })).toEqual([]);
  });
});
