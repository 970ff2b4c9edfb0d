/** LimitService handlers: requests to domain calls, domain results to responses (docs/decisions.md#shared-limits). */
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import type { Limits } from "../domain/limits.js";
import type { LimitRate, LimitView } from "../model/limits.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

const renderLimit = (l: LimitView) => ({
  name: l.name,
  maxInFlight: l.maxInFlight ?? undefined,
  rate: l.rate ?? undefined,
  inFlight: l.inFlight,
  usedInWindow: l.usedInWindow,
  createdAt: toProtoTimestamp(l.createdAt),
});

const rateOf = (rate: { count: number; perSeconds: number } | undefined): LimitRate | undefined =>
  rate === undefined ? undefined : { count: rate.count, perSeconds: rate.perSeconds };

export function limitService(limits: Limits): ServiceEntry {
  return serviceEntry(LimitService, {
    async createLimit(request, ctx) {
      return renderLimit(await limits.create(callerOf(ctx), { name: request.name, maxInFlight: request.maxInFlight, rate: rateOf(request.rate) }));
    },
    async listLimits(_request, ctx) {
      return { data: (await limits.list(callerOf(ctx))).map(renderLimit) };
    },
    async getLimit(request, ctx) {
      return renderLimit(await limits.get(callerOf(ctx), request.name));
    },
    async updateLimit(request, ctx) {
      // Over REST the transcoder always sets the mask (the body's keys, nulls
      // included). A gRPC caller that sends no mask changes the bounds it set.
      const change = { maxInFlight: request.update?.maxInFlight, rate: rateOf(request.update?.rate) };
      return renderLimit(await limits.update(callerOf(ctx), request.name, change, request.updateMask?.paths));
    },
    async deleteLimit(request, ctx) {
      await limits.delete(callerOf(ctx), request.name);
      return {};
    },
  });
}
