/**
 * What an agent on MCP is told to do about an error names MCP tools, never
 * REST routes, headers or query parameters it cannot use (issue 27, item 14).
 * The test walks the whole error catalog, so a code added with a REST-only
 * suggestion fails here until src/server/mcp/suggestions.ts gives it an MCP
 * one.
 */
import { describe, expect, it } from "vitest";
import { errorCatalog, type ErrorCode } from "../../src/model/errors.js";
import { mcpErrorBody, mcpSuggestion, MCP_SUGGESTIONS } from "../../src/server/mcp/suggestions.js";
import { TOOLS } from "../../src/server/mcp/tools.js";

/** Ways a text can speak HTTP, written here apart from the implementation's own check. */
const HTTP_ONLY: Array<[string, RegExp]> = [
  ["a /v1/ route", /\/v1\//],
  ["an HTTP method followed by a path", /\b(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+\//],
  ["an HTTP method as a verb", /\b(GET|POST|PUT|PATCH|DELETE)\b/],
  ["a service path", /(^|[\s(`'"])\/(jobs|openapi\.json|proto|mcp|docs|api)\b/],
  ["an HTTP header", /\b(X-API-Key|X-Admin-Token|Idempotency-Key|If-Match|Retry-After|Mcp-Session-Id|Allow header)\b/],
  ["a query parameter", /[?&](status|since|limit|wait|cursor)=|\bwait=\d/],
  ["a curl option", /(^|\s)-d '/],
];

const httpIn = (text: string) => HTTP_ONLY.filter(([, pattern]) => pattern.test(text)).map(([what]) => what);

const codes = Object.keys(errorCatalog) as ErrorCode[];

describe("MCP error suggestions", () => {
  it("never name a route, an HTTP method, a header or a query parameter, for any code of the catalog", () => {
    const leaks = codes.flatMap((code) => {
      const seen = mcpSuggestion(code, errorCatalog[code].suggestion);
      return seen === undefined ? [] : httpIn(seen).map((what) => `${code}: ${what} in "${seen}"`);
    });
    expect(leaks).toEqual([]);
  });

  it("give every code whose REST suggestion speaks HTTP an MCP suggestion of its own, and keep protocol-neutral ones", () => {
    for (const code of codes) {
      const rest: string | undefined = errorCatalog[code].suggestion;
      if (rest === undefined) continue;
      const seen = mcpSuggestion(code, rest);
      if (httpIn(rest).length > 0) expect(MCP_SUGGESTIONS[code], `${code} needs an MCP suggestion`).toEqual(expect.any(String));
      else if (MCP_SUGGESTIONS[code] === undefined) expect(seen, code).toBe(rest);
    }
  });

  it("name only tools the server has", () => {
    const tools = new Set(TOOLS.map((t) => t.name));
    // A tool is named as a snake_case verb phrase: receive_task, list_my_channels, get_job, ...
    const toolish = /\b(?:find_or_create|get|list|discover|post|read|receive|complete|release|heartbeat|wait_for|follow|unfollow|create|resolve|request|submit)_[a-z_]+\b/g;
    const named = Object.values(MCP_SUGGESTIONS).flatMap((text) => text.match(toolish) ?? []);
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((name) => !tools.has(name))).toEqual([]);
  });

  it("replace a thrower's own suggestion that names a route, and keep one that does not", () => {
    expect(mcpSuggestion("unauthorized", "This key was revoked; mint a new one with POST /v1/keys.")).toBe(MCP_SUGGESTIONS.unauthorized);
    expect(mcpSuggestion("invalid_max_messages", "Use an integer from 1 to 100.")).toBe("Use an integer from 1 to 100.");
    // A code without an MCP text whose thrower named a route: better no advice than advice the agent cannot follow.
    expect(mcpSuggestion("forbidden", "Ask the owner, or create your own with POST /v1/channels.")).toBe(errorCatalog.forbidden.suggestion);
  });

  it("keep the error's details and leave out the REST documentation link", () => {
    const body = mcpErrorBody({
      error: "rate_limit_exceeded",
      message: "Too many requests",
      suggestion: errorCatalog.rate_limit_exceeded.suggestion,
      retry_after: 3,
      request_id: "r1",
      documentation_url: "/docs/errors#rate_limit_exceeded",
    });
    expect(body).toEqual({ error: "rate_limit_exceeded", message: "Too many requests", suggestion: MCP_SUGGESTIONS.rate_limit_exceeded, retry_after: 3, request_id: "r1" });
  });
});
