/** KeyService handlers: requests to domain calls, domain results to responses. */
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { ApiError } from "../domain/errors.js";
import type { Keys } from "../domain/keys.js";
import type { FixedWindowLimiter } from "../domain/rate-limit.js";
import { toProtoTimestamp } from "../domain/time.js";
import { callerOf, clientAddressKey } from "../server/rpc/context.js";
import { serviceEntry, type ServiceEntry } from "../server/rpc/pipeline.js";

export function keyService(keys: Keys, mintLimiter: FixedWindowLimiter): ServiceEntry {
  return serviceEntry(KeyService, {
    async createKey(request, ctx) {
      // Checked before the body so a flood of bad requests still counts.
      const decision = mintLimiter.hit(ctx.values.get(clientAddressKey));
      if (!decision.allowed) {
        throw new ApiError("rate_limit_exceeded", "Too many keys minted from this address", {
          details: { retry_after: decision.retryAfterSeconds },
          headers: { "Retry-After": String(decision.retryAfterSeconds) },
        });
      }
      const issued = await keys.issue(request.agentLabel);
      return { key: issued.key, keyId: issued.keyId, agentLabel: issued.agentLabel, ownerId: issued.ownerId };
    },

    async getCurrentKey(_request, ctx) {
      const record = await keys.describe(callerOf(ctx));
      return {
        keyId: record.keyId,
        agentLabel: record.agentLabel,
        ownerId: record.ownerId,
        active: record.revokedAt === null,
        createdAt: toProtoTimestamp(record.createdAt),
      };
    },

    async revokeCurrentKey(_request, ctx) {
      const caller = callerOf(ctx);
      await keys.revoke(caller);
      return { keyId: caller.keyId, revoked: true };
    },
  });
}
