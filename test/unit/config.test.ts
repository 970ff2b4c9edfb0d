import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ConfigError, configVariables, loadConfig } from "../../src/platform/config.js";

describe("loadConfig", () => {
  it("applies the documented defaults on an empty environment", () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      host: "127.0.0.1",
      port: 8080,
      databaseUrl: undefined,
      dataDir: "./.agentbus",
      corsOrigins: ["*"],
      keyMintLimitPerHour: 20,
      rateLimitPerMinute: 600,
      adminToken: undefined,
      maxBodyBytes: 1048576,
    });
  });

  it("names the variable when a value is invalid", () => {
    expect(() => loadConfig({ PORT: "eighty" })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: "eighty" })).toThrow(/PORT/);
    expect(() => loadConfig({ AGENTBUS_KEY_MINT_LIMIT: "-1" })).toThrow(/AGENTBUS_KEY_MINT_LIMIT/);
    expect(() => loadConfig({ DATABASE_URL: "not a url" })).toThrow(/DATABASE_URL/);
    expect(() => loadConfig({ AGENTBUS_LOG_LEVEL: "loud" })).toThrow(/AGENTBUS_LOG_LEVEL/);
  });

  it("treats an empty variable as unset", () => {
    expect(loadConfig({ DATABASE_URL: "", PORT: "" })).toMatchObject({ databaseUrl: undefined, port: 8080 });
  });

  it("runs the job workers in serve unless AGENTBUS_WORKERS=false", () => {
    expect(loadConfig({}).workers).toBe(true);
    expect(loadConfig({ AGENTBUS_WORKERS: "false" }).workers).toBe(false);
    expect(() => loadConfig({ AGENTBUS_WORKERS: "no" })).toThrow(/AGENTBUS_WORKERS/);
  });

  it("splits AGENTBUS_CORS_ORIGINS on commas", () => {
    expect(loadConfig({ AGENTBUS_CORS_ORIGINS: "https://a.example, https://b.example" }).corsOrigins).toEqual([
      "https://a.example",
      "https://b.example",
    ]);
  });
});

describe("the README's configuration table", () => {
  it("has a row for every variable the service reads", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const rows = new Set([...readme.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]));
    expect(configVariables.filter((name) => !rows.has(name))).toEqual([]);
  });
});
