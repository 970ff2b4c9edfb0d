/**
 * A tool's input schema, generated from the request message of the RPC it
 * calls, in the REST JSON dialect the tool's arguments are sent in
 * (snake_case keys, enums by their short names, well-known types as the REST
 * decoder reads them). Inlined rather than $ref'd: MCP clients hand the schema
 * to a model as it is.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import type { JsonObject } from "../../model/json.js";
import { isWellKnown } from "../../protocol/json-render-reflect.js";
import { enumSchema, scalarSchema, wellKnownSchema } from "../docs/openapi.js";

/** Nested messages deeper than this are left as plain objects (a request never needs more). */
const MAX_DEPTH = 3;

export interface SchemaOptions {
  /** The request fields the tool offers, in this order; all of them when absent. */
  fields?: readonly string[];
  required?: readonly string[];
  /** What a model should know about a field, where its name does not say it. */
  descriptions?: Readonly<Record<string, string>>;
}

export function inputSchema(desc: DescMessage, options: SchemaOptions = {}): JsonObject {
  const offered = options.fields ?? desc.fields.map((f) => f.name);
  const properties: Record<string, JsonObject> = {};
  for (const name of offered) {
    const field = desc.fields.find((f) => f.name === name);
    if (field === undefined) throw new Error(`${desc.typeName} has no field ${name}`);
    const schema = fieldSchema(field, 1);
    const description = options.descriptions?.[name];
    properties[name] = description === undefined ? schema : { ...schema, description };
  }
  const schema: JsonObject = { type: "object", properties, additionalProperties: false };
  if (options.required !== undefined && options.required.length > 0) schema.required = [...options.required];
  return schema;
}

function messageSchema(desc: DescMessage, depth: number): JsonObject {
  if (isWellKnown(desc)) return wellKnownSchema(desc, "in");
  if (depth > MAX_DEPTH) return { type: "object" };
  const properties: Record<string, JsonObject> = {};
  for (const field of desc.fields) properties[field.name] = fieldSchema(field, depth + 1);
  return { type: "object", properties, additionalProperties: false };
}

function fieldSchema(field: DescField, depth: number): JsonObject {
  switch (field.fieldKind) {
    case "scalar":
      return scalarSchema(field.scalar, "in");
    case "enum":
      return enumSchema(field.enum, "in");
    case "message":
      return messageSchema(field.message, depth);
    case "list":
      return {
        type: "array",
        items: field.listKind === "message" ? messageSchema(field.message, depth) : field.listKind === "enum" ? enumSchema(field.enum, "in") : scalarSchema(field.scalar, "in"),
      };
    case "map":
      return {
        type: "object",
        additionalProperties:
          field.mapKind === "message" ? messageSchema(field.message, depth) : field.mapKind === "enum" ? enumSchema(field.enum, "in") : scalarSchema(field.scalar, "in"),
      };
  }
}
