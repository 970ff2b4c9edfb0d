/** What an endpoint outside the RPC pipeline (/mcp, /a2a) reads of a request to admit it: its key and its headers. */
import type { NodeRequest } from "./node-http.js";

/** The API key: X-API-Key, else Authorization: Bearer. */
export function apiKeyOf(req: NodeRequest): string | undefined {
  const header = req.headers["x-api-key"];
  if (typeof header === "string" && header.trim() !== "") return header.trim();
  const auth = req.headers.authorization;
  const bearer = typeof auth === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(auth) : null;
  return bearer?.[1];
}

/** The request's headers as a Headers object (HTTP/2 pseudo-headers left out). */
export function headersOf(req: NodeRequest): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(":") || value === undefined) continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return headers;
}
