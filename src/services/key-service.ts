/** KeyService handlers: requests to domain calls, domain results to responses. */
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { ApiError } from "../model/errors.js";
import type { IssuedKey, Keys } from "../domain/keys.js";
import type { PublicMinting } from "../domain/minting.js";
import type { KeyQuotaReport, Quotas } from "../domain/quotas.js";
import type { QuotaName } from "../model/quotas.js";
import type { FixedWindowLimiter } from "../domain/rate-limit.js";
import type { KeyRecord } from "../model/keys.js";
import { effectiveScopes, type KeyScopes } from "../model/scopes.js";
import { toProtoTimestamp } from "../model/time.js";
import { isLoopback } from "../platform/address-policy.js";
import { callerOf, clientAddressKey, requestBudgetKey, type RequestBudget } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

/** An issued key as POST /v1/keys and POST /v1/admin/keys both answer it. */
export const renderIssuedKey = (issued: IssuedKey) => ({
  key: issued.key,
  keyId: issued.keyId,
  agentLabel: issued.agentLabel,
  ownerId: issued.ownerId,
  ...renderScopes(issued.scopes),
});

/** A key's scopes as IssuedKey and KeyInfo show them: what it holds, and whether that is a chosen set. */
export const renderScopes = (scopes: KeyScopes) => ({ scopes: [...effectiveScopes(scopes)], scopesRestricted: scopes !== null });

const renderKeyInfo = (record: KeyRecord, budget: RequestBudget | undefined, quotas: KeyQuotaReport) => ({
  keyId: record.keyId,
  agentLabel: record.agentLabel,
  ownerId: record.ownerId,
  active: record.revokedAt === null,
  createdAt: toProtoTimestamp(record.createdAt),
  rateLimit: budget,
  ...renderScopes(record.scopes),
  quotas: renderQuotas(quotas),
});

/** A key's quotas as KeyInfo and the admin's answer show them. */
export const renderQuotas = ({ usage, limits }: KeyQuotaReport) => {
  const one = (name: QuotaName) => ({ used: BigInt(usage[name]), limit: limits[name] === null ? undefined : BigInt(limits[name]) });
  return { storedBytes: one("stored_bytes"), liveMessages: one("live_messages"), channels: one("channels") };
};

/**
 * A person trying the service on their own machine (docs/decisions.md#key-mint-limit): the service
 * listens on loopback only, trusts no proxy, and the request comes from loopback without a proxy's
 * forwarding header. Such a caller is this machine's user, whom a per-address limit cannot protect
 * anyone from, so the mint limit does not apply.
 */
export function localNewcomer(listensOnLoopbackOnly: boolean, clientAddress: string, headers: Headers): boolean {
  return listensOnLoopbackOnly && isLoopback(clientAddress) && !headers.has("x-forwarded-for") && !headers.has("forwarded");
}

export interface MintLimitOptions {
  limiter: FixedWindowLimiter;
  /** HOST is a loopback address and AGENTBUS_TRUST_PROXY is off: see localNewcomer. */
  listensOnLoopbackOnly: boolean;
}

const UNLIMITED = { allowed: true as const, release: () => {} };

export function keyService(keys: Keys, mint: MintLimitOptions, minting: PublicMinting, quotas: Quotas): ServiceEntry {
  return serviceEntry(KeyService, {
    async createKey(request, ctx) {
      // A closed service refuses before the mint limit is touched.
      await minting.assertOpen();
      // Only keys actually issued count against the limit: a refused mint
      // (label taken, invalid label, store down) gives its slot back. The
      // slot is taken before the insert so a burst cannot overshoot.
      const address = ctx.values.get(clientAddressKey);
      const reservation = localNewcomer(mint.listensOnLoopbackOnly, address, ctx.requestHeader) ? UNLIMITED : mint.limiter.reserve(address);
      if (!reservation.allowed) {
        throw new ApiError("rate_limit_exceeded", "Too many keys minted from this address", {
          details: { retry_after: reservation.retryAfterSeconds },
          headers: { "Retry-After": String(reservation.retryAfterSeconds) },
        });
      }
      let issued;
      try {
        issued = await keys.issue(request.agentLabel, { via: "public" });
      } catch (err) {
        reservation.release();
        throw err;
      }
      return renderIssuedKey(issued);
    },

    async getCurrentKey(_request, ctx) {
      const caller = callerOf(ctx);
      const [record, report] = await Promise.all([keys.describe(caller), quotas.report(caller.keyId)]);
      return renderKeyInfo(record, ctx.values.get(requestBudgetKey), report);
    },

    async setCurrentKeyScopes(request, ctx) {
      const caller = callerOf(ctx);
      const record = await keys.narrowScopes(caller, request.scopes);
      return renderKeyInfo(record, ctx.values.get(requestBudgetKey), await quotas.report(caller.keyId));
    },

    async revokeCurrentKey(_request, ctx) {
      const caller = callerOf(ctx);
      await keys.revoke(caller);
      return { keyId: caller.keyId, revoked: true };
    },
  });
}
