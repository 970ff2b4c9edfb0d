/**
 * A tool's input schema, generated from the request message of the RPC it
 * calls, in the REST JSON dialect the tool's arguments are sent in
 * (snake_case keys, enums by their short names, well-known types as the REST
 * decoder reads them). Inlined rather than $ref'd: MCP clients hand the schema
 * to a model as it is.
 *
 * A model fills in what the schema shows it, so every property carries a
 * description and every number the range the service accepts (the protobuf
 * type's range would invite a lease of two billion seconds). Enums list only
 * the short names: the REST decoder also takes the proto spellings, but
 * those are internal names an agent should never see.
 */
import type { DescEnum, DescField, DescMessage } from "@bufbuild/protobuf";
import type { JsonObject } from "../../model/json.js";
import { enumJsonNames } from "../../protocol/json-enums.js";
import { isWellKnown } from "../../protocol/json-render-reflect.js";
import { scalarSchema, wellKnownSchema } from "../docs/openapi.js";

/** Nested messages deeper than this are left as plain objects (a request never needs more). */
const MAX_DEPTH = 3;

/** What a model is told about one input field, and for a number the range the service accepts. */
export interface FieldDoc {
  description: string;
  minimum?: number;
  maximum?: number;
}

export interface SchemaOptions {
  /** The request fields the tool offers, in this order; all of them when absent. */
  fields?: readonly string[];
  required?: readonly string[];
  /** A top-level field's documentation in this tool: a text over the shared description, or the whole of it. */
  docs?: Readonly<Record<string, string | FieldDoc>>;
}

/** The shared documentation of fields by name (at any depth). */
export type FieldDocs = Readonly<Record<string, FieldDoc>>;

export function inputSchema(desc: DescMessage, options: SchemaOptions, docs: FieldDocs): JsonObject {
  const offered = options.fields ?? desc.fields.map((f) => f.name);
  const properties: Record<string, JsonObject> = {};
  for (const name of offered) {
    const field = desc.fields.find((f) => f.name === name);
    if (field === undefined) throw new Error(`${desc.typeName} has no field ${name}`);
    const own = options.docs?.[name];
    const doc = typeof own === "string" ? { ...docs[name], description: own } : (own ?? docs[name]);
    properties[name] = documented(fieldSchema(field, 1, docs), doc);
  }
  const schema: JsonObject = { type: "object", properties, additionalProperties: false };
  if (options.required !== undefined && options.required.length > 0) schema.required = [...options.required];
  return schema;
}

/** The field's schema with its description and, for a number (or a list of numbers), its bounds. */
function documented(schema: JsonObject, doc: FieldDoc | undefined): JsonObject {
  const bounded = (s: JsonObject): JsonObject =>
    (s.type === "integer" || s.type === "number") && doc !== undefined
      ? { ...s, ...(doc.minimum === undefined ? {} : { minimum: doc.minimum }), ...(doc.maximum === undefined ? {} : { maximum: doc.maximum }) }
      : s;
  const withBounds = schema.type === "array" && typeof schema.items === "object" && schema.items !== null && !Array.isArray(schema.items) ? { ...schema, items: bounded(schema.items) } : bounded(schema);
  return doc === undefined ? withBounds : { ...withBounds, description: doc.description };
}

function messageSchema(desc: DescMessage, depth: number, docs: FieldDocs): JsonObject {
  if (isWellKnown(desc)) return wellKnownSchema(desc, "in");
  if (depth > MAX_DEPTH) return { type: "object" };
  const properties: Record<string, JsonObject> = {};
  for (const field of desc.fields) properties[field.name] = documented(fieldSchema(field, depth + 1, docs), docs[field.name]);
  return { type: "object", properties, additionalProperties: false };
}

const enumSchema = (desc: DescEnum): JsonObject => ({ type: "string", enum: enumJsonNames(desc) });

function fieldSchema(field: DescField, depth: number, docs: FieldDocs): JsonObject {
  switch (field.fieldKind) {
    case "scalar":
      return scalarSchema(field.scalar, "in");
    case "enum":
      return enumSchema(field.enum);
    case "message":
      return messageSchema(field.message, depth, docs);
    case "list":
      return {
        type: "array",
        items: field.listKind === "message" ? messageSchema(field.message, depth, docs) : field.listKind === "enum" ? enumSchema(field.enum) : scalarSchema(field.scalar, "in"),
      };
    case "map":
      return {
        type: "object",
        additionalProperties:
          field.mapKind === "message"
            ? messageSchema(field.message, depth, docs)
            : field.mapKind === "enum"
              ? enumSchema(field.enum)
              : scalarSchema(field.scalar, "in"),
      };
  }
}
