/**
 * Every RPC that takes an API key names the scope it needs in the proto
 * (issue 17, item 3; docs/decisions.md#scopes). The services are found by
 * reading gen/, not listed, so a service added later is checked too.
 */
import type { DescService } from "@bufbuild/protobuf";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { Scope } from "../../gen/agentbus/v1/options_pb.js";
import { KEY_SCOPES } from "../../src/model/scopes.js";
import { rulesOf } from "../../src/server/rpc/method-rules.js";

const GEN = fileURLToPath(new URL("../../gen/agentbus/v1/", import.meta.url));
let services: DescService[] = [];

beforeAll(async () => {
  const files = readdirSync(GEN).filter((f) => f.endsWith("_service_pb.ts"));
  const modules = await Promise.all(files.map((f) => import(`${GEN}${f}`) as Promise<Record<string, unknown>>));
  services = modules.flatMap((m) => Object.values(m).filter((v): v is DescService => (v as { kind?: string } | null)?.kind === "service"));
});

const methods = () => services.flatMap((s) => s.methods);

describe("method scopes", () => {
  it("finds the services in gen/", () => {
    expect(services.map((s) => s.name)).toEqual(expect.arrayContaining(["KeyService", "ChannelService", "MessageService", "SessionService", "AdminService"]));
  });

  it("names a scope for every method that takes an API key, and none for the others", () => {
    const problems: string[] = [];
    for (const method of methods()) {
      try {
        const rules = rulesOf(method);
        if ((rules.auth === "api_key") !== (rules.scope !== undefined)) problems.push(`${method.parent.name}.${method.name}`);
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    expect(problems).toEqual([]);
  });

  it("uses every scope a key can hold on some method, so none is a dead name", () => {
    const used = new Set(methods().map((m) => rulesOf(m).scope));
    expect(KEY_SCOPES.filter((scope) => !used.has(scope))).toEqual([]);
  });

  it("maps every Scope value of the proto to a name in KEY_SCOPES", () => {
    const names = Object.values(Scope)
      .filter((v): v is string => typeof v === "string" && v !== "UNSPECIFIED" && v !== "ANY_KEY")
      .map((v) => v.toLowerCase().replace("_", ":"));
    expect(names.sort()).toEqual([...KEY_SCOPES].sort());
  });

  it("lets any key reach only the key's own record", () => {
    const anyKey = methods().filter((m) => rulesOf(m).scope === "any_key").map((m) => `${m.parent.name}.${m.name}`);
    // CompatService.GetAccountUsage is the key's own limits, as GET /v1/keys/me shows them.
    expect(anyKey.sort()).toEqual(["CompatService.GetAccountUsage", "KeyService.GetCurrentKey", "KeyService.RevokeCurrentKey", "KeyService.SetCurrentKeyScopes"]);
  });
});
