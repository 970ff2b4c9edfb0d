/**
 * The base URL a request came to ("http://bus.example:8080"), for documents
 * that show callers where to send requests (/llms.txt, /openapi.json, GET /).
 *
 * The Host header is the caller's to choose, so it is only used when it is a
 * plain host[:port]; anything else (paths, userinfo, spaces, markup) falls back
 * to the address the connection arrived on, and nothing unvalidated is ever
 * written into a document. X-Forwarded-Proto/Host count only with
 * AGENTBUS_TRUST_PROXY, like X-Forwarded-For for the client address.
 */
import type { NodeRequest } from "./rest/transcoder.js";

// A DNS name (letters, digits, hyphens, dots, optionally an underscore as some
// internal names have), an IPv4 address, or a bracketed IPv6 address; then an
// optional port. Case is kept but compared insensitively by callers.
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]{2,45}\])(?::(\d{1,5}))?$/;
const MAX_HOST_LENGTH = 260;

/** `value` when it is a host[:port] safe to write into a URL, lower-cased; undefined otherwise. */
export function validHost(value: string | undefined): string | undefined {
  if (value === undefined || value.length === 0 || value.length > MAX_HOST_LENGTH) return undefined;
  const match = HOST.exec(value);
  if (!match) return undefined;
  const port = match[1];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) return undefined;
  return value.toLowerCase();
}

function firstValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  return value?.split(",")[0]?.trim();
}

export function requestBaseUrl(req: NodeRequest, trustProxy: boolean): string {
  let proto = "http";
  let host: string | undefined;
  if (trustProxy) {
    const forwardedProto = firstValue(req.headers["x-forwarded-proto"])?.toLowerCase();
    if (forwardedProto === "http" || forwardedProto === "https") proto = forwardedProto;
    host = validHost(firstValue(req.headers["x-forwarded-host"]));
  }
  // HTTP/2 carries the host in :authority; HTTP/1.1 in Host.
  const authority = req.headers[":authority"];
  host ??= validHost(typeof authority === "string" ? authority : req.headers.host);
  host ??= socketHost(req);
  return `${proto}://${host}`;
}

function socketHost(req: NodeRequest): string {
  const address = req.socket.localAddress ?? "127.0.0.1";
  const port = req.socket.localPort;
  // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
  const plain = address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
  const host = plain.includes(":") ? `[${plain}]` : plain;
  return port === undefined ? host : `${host}:${port}`;
}

/** A small map of rendered documents per base URL; the oldest entry goes first when full. */
export class PerBaseCache<T> {
  private readonly entries = new Map<string, T>();

  constructor(private readonly size: number) {}

  get(base: string, render: () => T): T {
    const hit = this.entries.get(base);
    if (hit !== undefined) return hit;
    const value = render();
    this.entries.set(base, value);
    if (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value as string);
    return value;
  }
}
