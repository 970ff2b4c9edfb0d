/**
 * JSON Schema (draft-07, Ajv's default) for channel metadata_schema.
 * Compiled validators are cached by schema text: every message of a channel
 * is checked against the same schema, and compiling costs far more than
 * validating.
 */
import { Ajv, type ValidateFunction } from "ajv";
import type { JsonValue } from "./errors.js";

export interface Violation {
  field: string;
  issue: string;
}

// strict: false — schemas come from users and may carry annotations Ajv does
// not know. addUsedSchema: false — two channels may use the same $id for
// different schemas; registering them globally would make the second fail.
const ajv = new Ajv({ allErrors: true, strict: false, addUsedSchema: false });
const cache = new Map<string, ValidateFunction>();
const CACHE_SIZE = 1000;

/** Compiles a schema; throws an Error describing why it is not a valid JSON Schema. */
export function compileSchema(schema: { [key: string]: JsonValue }): ValidateFunction {
  const text = JSON.stringify(schema);
  let validate = cache.get(text);
  if (validate) return validate;
  validate = ajv.compile(schema);
  cache.set(text, validate);
  if (cache.size > CACHE_SIZE) {
    const oldest = cache.keys().next().value as string;
    // Ajv keeps its own cache keyed by the schema object; drop that entry too.
    ajv.removeSchema(cache.get(oldest)?.schema as object);
    cache.delete(oldest);
  }
  return validate;
}

/** Why the schema cannot be used, or undefined when it can. */
export function schemaProblem(schema: { [key: string]: JsonValue }): string | undefined {
  try {
    compileSchema(schema);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** The ways data fails the schema; empty when it passes. An empty schema accepts anything. */
export function violations(schema: { [key: string]: JsonValue }, data: JsonValue): Violation[] {
  if (Object.keys(schema).length === 0) return [];
  const validate = compileSchema(schema);
  if (validate(data)) return [];
  return (validate.errors ?? []).map((e) => {
    const missing = e.keyword === "required" ? `/${String((e.params as { missingProperty?: string }).missingProperty ?? "")}` : "";
    const path = `${e.instancePath}${missing}`.replace(/^\//, "").replace(/\//g, ".");
    return { field: path === "" ? "metadata" : `metadata.${path}`, issue: e.message ?? e.keyword };
  });
}
