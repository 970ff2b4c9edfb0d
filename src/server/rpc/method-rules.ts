/**
 * The per-method rules declared in the proto with (agentbus.v1.rules), plus
 * whether the method changes state (everything not marked NO_SIDE_EFFECTS).
 */
import { getOption, hasOption, type DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { Auth, rules as rulesExtension } from "../../../gen/agentbus/v1/options_pb.js";

export interface MethodRules {
  successStatus: number;
  auth: "api_key" | "none" | "admin_token";
  rejectUnknownFields: boolean;
  missingKeyError: "unauthorized" | "api_key_required";
  /** 0 when the method uses the service default. */
  maxBodyBytes: number;
  /** True for every method that may change state (POST, PATCH, DELETE over REST). */
  mutates: boolean;
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
  found = {
    successStatus: r?.successStatus || 200,
    auth,
    rejectUnknownFields: r?.rejectUnknownFields ?? false,
    missingKeyError,
    maxBodyBytes: r?.maxBodyBytes ?? 0,
    mutates: method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
  };
  cache.set(method, found);
  return found;
}
