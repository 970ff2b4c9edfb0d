import { describe, expect, it } from "vitest";
import { comparePathTemplates, compilePathTemplate } from "../../src/server/rest/path-template.js";

const mostSpecific = (templates: string[], path: string): string | undefined =>
  templates
    .map(compilePathTemplate)
    .filter((t) => t.match(path) !== undefined)
    .sort(comparePathTemplates)[0]?.template;

describe("compilePathTemplate: literals and single-segment variables", () => {
  it("matches a literal-only template exactly", () => {
    const t = compilePathTemplate("/v1/keys/me");
    expect(t.match("/v1/keys/me")).toEqual({});
    expect(t.match("/v1/keys/you")).toBeUndefined();
    expect(t.match("/v1/keys")).toBeUndefined();
    expect(t.match("/v1/keys/me/more")).toBeUndefined();
  });

  it("captures {var} as exactly one segment", () => {
    const t = compilePathTemplate("/v1/channels/{identifier}");
    expect(t.variables).toEqual(["identifier"]);
    expect(t.match("/v1/channels/general")).toEqual({ identifier: "general" });
    expect(t.match("/v1/channels/a/b")).toBeUndefined();
  });

  it("captures several variables by name", () => {
    const t = compilePathTemplate("/v1/channels/{identifier}/access-requests/{request_id}/approve");
    expect(t.match("/v1/channels/ops/access-requests/r1/approve")).toEqual({ identifier: "ops", request_id: "r1" });
  });

  it("treats {var=*} like {var}", () => {
    const t = compilePathTemplate("/jobs/{job_id=*}");
    expect(t.match("/jobs/42")).toEqual({ job_id: "42" });
    expect(t.match("/jobs/42/x")).toBeUndefined();
  });

  it("accepts dotted field paths as variable names", () => {
    expect(compilePathTemplate("/v1/{channel.id}").match("/v1/abc")).toEqual({ "channel.id": "abc" });
  });

  it("does not accept a trailing slash", () => {
    expect(compilePathTemplate("/v1/channels/{identifier}").match("/v1/channels/abc/")).toBeUndefined();
  });

  it("does not match a path without the leading slash", () => {
    expect(compilePathTemplate("/v1/keys/me").match("v1/keys/me")).toBeUndefined();
  });
});

describe("compilePathTemplate: empty segments and percent-decoding", () => {
  it("never matches an empty segment to a variable", () => {
    const t = compilePathTemplate("/v1/channels/{identifier}/messages");
    expect(t.match("/v1/channels//messages")).toBeUndefined();
  });

  it("percent-decodes variable values, including an encoded slash in a single segment", () => {
    const t = compilePathTemplate("/v1/channels/{identifier}");
    expect(t.match("/v1/channels/caf%C3%A9%20bar")).toEqual({ identifier: "café bar" });
    expect(t.match("/v1/channels/a%2Fb")).toEqual({ identifier: "a/b" });
  });

  it("does not match (and does not throw) on a malformed escape", () => {
    const t = compilePathTemplate("/v1/channels/{identifier}");
    expect(t.match("/v1/channels/%E0%A4%A")).toBeUndefined();
    expect(t.match("/v1/channels/%zz")).toBeUndefined();
  });

  it("compares literal segments after decoding", () => {
    expect(compilePathTemplate("/v1/keys/me").match("/v1/keys/m%65")).toEqual({});
  });
});

describe("compilePathTemplate: sub-templates and wildcards", () => {
  it("captures {var=literal/*} with the literal included", () => {
    const t = compilePathTemplate("/v1/{name=shelves/*}/books");
    expect(t.match("/v1/shelves/s1/books")).toEqual({ name: "shelves/s1" });
    expect(t.match("/v1/racks/s1/books")).toBeUndefined();
  });

  it("captures {var=**} across several segments, keeping %2F encoded", () => {
    const t = compilePathTemplate("/v1/files/{path=**}");
    expect(t.match("/v1/files/a/b/c")).toEqual({ path: "a/b/c" });
    expect(t.match("/v1/files/a%2Fb/c%20d")).toEqual({ path: "a%2Fb/c d" });
    expect(t.match("/v1/files/x")).toEqual({ path: "x" });
  });

  it("does not let {var=**} capture nothing", () => {
    expect(compilePathTemplate("/v1/files/{path=**}").match("/v1/files")).toBeUndefined();
  });

  it("matches a bare * as one non-empty segment without capturing it", () => {
    const t = compilePathTemplate("/v1/*/ping");
    expect(t.variables).toEqual([]);
    expect(t.match("/v1/anything/ping")).toEqual({});
    expect(t.match("/v1/a/b/ping")).toBeUndefined();
  });

  it("matches a bare ** as zero or more segments", () => {
    const t = compilePathTemplate("/static/**");
    expect(t.match("/static")).toEqual({});
    expect(t.match("/static/css/site.css")).toEqual({});
    expect(t.match("/static/css//site.css")).toBeUndefined();
  });
});

describe("compilePathTemplate: custom verbs", () => {
  const stream = compilePathTemplate("/v1/channels/{identifier}/messages:stream");
  const list = compilePathTemplate("/v1/channels/{identifier}/messages");

  it("exposes the verb", () => {
    expect(stream.verb).toBe("stream");
    expect(list.verb).toBeUndefined();
  });

  it("matches a path that ends with the verb", () => {
    expect(stream.match("/v1/channels/abc/messages:stream")).toEqual({ identifier: "abc" });
  });

  it("does not match a path without the verb", () => {
    expect(stream.match("/v1/channels/abc/messages")).toBeUndefined();
  });

  it("does not match a different verb", () => {
    expect(stream.match("/v1/channels/abc/messages:export")).toBeUndefined();
  });

  it("a template without a verb does not match a path with one on a literal segment", () => {
    expect(list.match("/v1/channels/abc/messages:stream")).toBeUndefined();
  });

  it("a template without a verb keeps a colon inside a variable", () => {
    expect(compilePathTemplate("/v1/channels/{identifier}").match("/v1/channels/a:b")).toEqual({ identifier: "a:b" });
  });

  it("a verb may follow a variable", () => {
    expect(compilePathTemplate("/v1/channels/{identifier}:export").match("/v1/channels/a:b:export")).toEqual({
      identifier: "a:b",
    });
  });
});

describe("specificity ordering", () => {
  it("a literal segment beats a variable: /v1/keys/me over /v1/keys/{id}", () => {
    expect(mostSpecific(["/v1/keys/{id}", "/v1/keys/me"], "/v1/keys/me")).toBe("/v1/keys/me");
    expect(mostSpecific(["/v1/keys/{id}", "/v1/keys/me"], "/v1/keys/k1")).toBe("/v1/keys/{id}");
  });

  it("the first differing segment decides", () => {
    expect(mostSpecific(["/v1/{a}/b", "/v1/a/{b}"], "/v1/a/b")).toBe("/v1/a/{b}");
  });

  it("a one-segment variable beats **", () => {
    expect(mostSpecific(["/v1/{rest=**}", "/v1/{id}"], "/v1/x")).toBe("/v1/{id}");
  });

  it("a template with a verb beats one that captured the verb into a variable", () => {
    expect(mostSpecific(["/v1/channels/{identifier}", "/v1/channels/{identifier}:export"], "/v1/channels/c:export")).toBe(
      "/v1/channels/{identifier}:export",
    );
  });

  it("an exact template beats one whose trailing ** captured nothing", () => {
    expect(mostSpecific(["/static/**", "/static"], "/static")).toBe("/static");
  });

  it("compare() is the same ordering as comparePathTemplates", () => {
    const me = compilePathTemplate("/v1/keys/me");
    const id = compilePathTemplate("/v1/keys/{id}");
    expect(me.compare(id)).toBeLessThan(0);
    expect(id.compare(me)).toBeGreaterThan(0);
    expect(me.compare(compilePathTemplate("/v1/keys/me"))).toBe(0);
  });

  it("ranks segments as literal 3, variable or * 2, ** 1, after the verb flag", () => {
    expect(compilePathTemplate("/v1/{name=shelves/*}/**:list").specificity).toEqual([1, 3, 3, 2, 1]);
  });
});

describe("malformed templates", () => {
  it.each([
    ["v1/keys", "must start with '/'"],
    ["/v1//keys", "empty segment"],
    ["/v1/keys/", "empty segment"],
    ["/v1/{id", "not closed"],
    ["/v1/{a={b}}", "nested"],
    ["/v1/{}", "not a field path"],
    ["/v1/{1abc}", "not a field path"],
    ["/v1/**/x", "'**' must be the last segment"],
    ["/v1/{a}/{a}", "appears twice"],
    ["/v1/x:", "verb after ':' is empty"],
    ["/v1/a:b/c", "unexpected '/'"],
    ["/v1/a?b", "unexpected '?'"],
  ])("rejects %s", (template, reason) => {
    expect(() => compilePathTemplate(template)).toThrow(reason);
    expect(() => compilePathTemplate(template)).toThrow(`Invalid path template "${template}"`);
  });
});
