/** JSON as it crosses every boundary: request bodies, metadata, error details, stored documents. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export type JsonObject = { [key: string]: JsonValue };
