/**
 * Enums in the REST JSON dialect (docs/decisions.md#json-enums): short lowercase names without
 * the enum's shared prefix, the zero value (`*_UNSPECIFIED`) as null.
 * Shared by the renderers and the request decoder.
 */
import type { DescEnum, DescEnumValue } from "@bufbuild/protobuf";

/** The REST name of an enum value: lowercase, without the enum's shared prefix. */
function shortEnumName(desc: DescEnum, value: DescEnumValue): string {
  const lower = value.name.toLowerCase();
  const prefix = desc.sharedPrefix;
  return prefix !== undefined && lower.startsWith(prefix) && lower.length > prefix.length
    ? lower.slice(prefix.length)
    : lower;
}

/**
 * Renders an enum value as its short lowercase name (`CHANNEL_MODE_CLAIMABLE`
 * → "claimable"). The zero value (`*_UNSPECIFIED`) and numbers the enum does
 * not declare render as null: the contract only ever shows declared names.
 */
export function enumToJson(desc: DescEnum, value: number): string | null {
  if (value === 0) return null;
  const declared = desc.value[value];
  return declared === undefined ? null : shortEnumName(desc, declared);
}

const enumNameTables = new WeakMap<DescEnum, Map<number, string | null>>();

/**
 * enumToJson as a lookup in a table built once per enum: the renderers call
 * it for every enum field of every message, and shortEnumName allocates.
 */
export function enumJsonLookup(desc: DescEnum): (value: number) => string | null {
  let table = enumNameTables.get(desc);
  if (table === undefined) {
    table = new Map(desc.values.map((v) => [v.number, enumToJson(desc, v.number)]));
    enumNameTables.set(desc, table);
  }
  const names = table;
  // Numbers the enum does not declare are not in the table: null, as in enumToJson.
  return (value) => names.get(value) ?? null;
}

/**
 * Parses an enum from REST input: the short name case-insensitively
 * ("claimable", "CLAIMABLE") or the full proto name ("CHANNEL_MODE_CLAIMABLE").
 * Never returns the zero value: "unspecified" is not something a caller may send.
 */
export function enumFromJson(desc: DescEnum, text: string): number | undefined {
  const lower = text.toLowerCase();
  for (const value of desc.values) {
    if (value.number === 0) continue;
    if (shortEnumName(desc, value) === lower || value.name.toLowerCase() === lower) return value.number;
  }
  return undefined;
}

/** The names a caller may send for an enum, in declaration order (for messages and OpenAPI). */
export function enumJsonNames(desc: DescEnum): string[] {
  return desc.values.filter((v) => v.number !== 0).map((v) => shortEnumName(desc, v));
}
