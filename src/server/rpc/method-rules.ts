/**
 * The per-method rules declared in the proto with (agentbus.v1.rules), plus
 * whether the method changes state (everything not marked NO_SIDE_EFFECTS).
 */
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Auth, rules as rulesExtension, Scope } from "../../../gen/agentbus/v1/options_pb.js";
import { isKeyScope, type KeyScope } from "../../model/scopes.js";

export interface MethodRules {
  successStatus: number;
  auth: "api_key" | "none" | "admin_token";
  rejectUnknownFields: boolean;
  missingKeyError: "unauthorized" | "api_key_required";
  /** 0 when the method uses the service default. */
  maxBodyBytes: number;
  /** The path (with {field} placeholders) a keyless caller is pointed to as redirect_to; undefined for none. */
  missingKeyRedirect: string | undefined;
  /** True for every method that may change state (POST, PATCH, DELETE over REST). */
  mutates: boolean;
  /**
   * What the calling key must hold (methods taking an API key): a scope, or
   * "any_key" for the key's own record. Undefined for the other methods.
   */
  scope: KeyScope | "any_key" | undefined;
  /** Every scope the key must hold: `scope` and the declared more_scopes (empty for "any_key" and keyless methods). */
  scopes: readonly KeyScope[];
  /** The response holds a secret kept only hashed: never stored by the Idempotency-Key layer (the method de-duplicates itself). */
  secretResponse: boolean;
}

const cache = new WeakMap<DescMethod, MethodRules>();

export function rulesOf(method: DescMethod): MethodRules {
  let found = cache.get(method);
  if (found) return found;
  const r = hasOption(method, rulesExtension) ? getOption(method, rulesExtension) : undefined;
  const auth = r?.auth === Auth.NONE ? "none" : r?.auth === Auth.ADMIN_TOKEN ? "admin_token" : "api_key";
  const missingKeyError = r?.missingKeyError === "api_key_required" ? "api_key_required" : "unauthorized";
  if (r?.missingKeyError && r.missingKeyError !== missingKeyError) {
    throw new Error(`${method.parent.typeName}.${method.name}: unknown missing_key_error "${r.missingKeyError}"`);
  }
  const scope = scopeOf(method, auth, r?.scope ?? Scope.UNSPECIFIED);
  const more = (r?.moreScopes ?? []).map((s) => scopeOf(method, auth, s));
  if (more.some((s) => s === undefined || s === "any_key")) throw new Error(`${method.parent.typeName}.${method.name}: more_scopes must name key scopes`);
  const scopes = [scope, ...more].filter((s): s is KeyScope => s !== undefined && s !== "any_key");
  found = {
    successStatus: r?.successStatus || 200,
    auth,
    rejectUnknownFields: r?.rejectUnknownFields ?? false,
    missingKeyError,
    maxBodyBytes: r?.maxBodyBytes ?? 0,
    missingKeyRedirect: r?.missingKeyRedirect || undefined,
    mutates: method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
    scope,
    scopes,
    secretResponse: r?.secretResponse ?? false,
  };
  cache.set(method, found);
  return found;
}

/**
 * The wire name of a declared scope ("SCOPE_MESSAGES_WRITE" is
 * "messages:write"). A method that takes a key and declares none is a
 * mistake that must not ship as an open door, so it throws: the service
 * refuses to start.
 */
function scopeOf(method: DescMethod, auth: MethodRules["auth"], declared: Scope): MethodRules["scope"] {
  const where = `${method.parent.typeName}.${method.name}`;
  if (auth !== "api_key") {
    if (declared !== Scope.UNSPECIFIED) throw new Error(`${where}: a scope applies only to methods that take an API key`);
    return undefined;
  }
  if (declared === Scope.UNSPECIFIED) throw new Error(`${where}: takes an API key but declares no (agentbus.v1.rules).scope`);
  if (declared === Scope.ANY_KEY) return "any_key";
  const name = (Scope[declared] ?? "").toLowerCase().replace("_", ":");
  if (!isKeyScope(name)) throw new Error(`${where}: scope ${Scope[declared] ?? declared} has no entry in KEY_SCOPES`);
  return name;
}
