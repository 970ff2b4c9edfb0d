/**
 * How large a request body may be (docs/operations.md#body-limits), the one
 * rule the REST transcoder and the Connect admission share.
 */
import type { MethodRules } from "./method-rules.js";

export interface BodyLimits {
  /** The service's default, for methods that declare no limit of their own. */
  defaultMaxBodyBytes: number;
  /** What a request without a valid key may send. */
  keylessMaxBodyBytes: number;
}

/**
 * The most a request body may be: the method's own limit (or the service's
 * default); a request without a valid key (a keyless route, an admin call,
 * or one refused later for its missing key) gets the small keyless limit,
 * unless the method is keyless by design and declares its own (a waitpoint
 * completion carries up to 16 KiB of data, plus the JSON around it).
 */
export function bodyLimit(rules: MethodRules, authenticated: boolean, limits: BodyLimits): number {
  if (rules.auth === "none" && rules.maxBodyBytes > 0) return rules.maxBodyBytes;
  const own = rules.maxBodyBytes || limits.defaultMaxBodyBytes;
  return authenticated ? own : Math.min(own, limits.keylessMaxBodyBytes);
}
