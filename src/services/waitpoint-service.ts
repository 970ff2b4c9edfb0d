/** WaitpointService handlers: requests to domain calls, domain results to responses (docs/decisions.md#waitpoints). */
import type { JsonObject } from "@bufbuild/protobuf";
import { WaitpointState } from "../../gen/agentbus/v1/waitpoint_pb.js";
import { WaitpointService } from "../../gen/agentbus/v1/waitpoint_service_pb.js";
import type { FixedWindowLimiter } from "../domain/rate-limit.js";
import type { Waitpoints } from "../domain/waitpoints.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import { toProtoTimestamp, type Clock } from "../model/time.js";
import { waitpointState, type WaitpointRecord, type WaitpointState as State } from "../model/waitpoints.js";
import { baseUrlKey, callerOf, clientAddressKey } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

const STATES: Record<State, WaitpointState> = {
  waiting: WaitpointState.WAITING,
  completed: WaitpointState.COMPLETED,
  timed_out: WaitpointState.TIMED_OUT,
};

const STATE_OF: ReadonlyMap<WaitpointState, State> = new Map(Object.entries(STATES).map(([name, value]) => [value, name as State]));

function renderWaitpoint(w: WaitpointRecord, now: number) {
  return {
    id: w.id,
    state: STATES[waitpointState(w, now)],
    description: w.description ?? undefined,
    createdAt: toProtoTimestamp(w.createdAt),
    expiresAt: toProtoTimestamp(w.expiresAt),
    completedAt: w.completedAt === null ? undefined : toProtoTimestamp(w.completedAt),
    data: w.data ?? undefined,
    idempotencyKey: w.idempotencyKey ?? undefined,
    waitingMessages: w.waitingMessages,
  };
}

const asData = (data: JsonObject | undefined): { [key: string]: JsonValue } | undefined => data as { [key: string]: JsonValue } | undefined;

export interface WaitpointServiceOptions {
  clock: Clock;
  /** Wrong tokens presented from one address, counted per window: guessing is refused, completing is not. */
  wrongTokenLimiter: FixedWindowLimiter;
}

export function waitpointService(waitpoints: Waitpoints, { clock, wrongTokenLimiter }: WaitpointServiceOptions): ServiceEntry {
  return serviceEntry(WaitpointService, {
    async createWaitpoint(request, ctx) {
      // The Idempotency-Key header means what the body's field does: this method de-duplicates itself (its token is never stored).
      const header = ctx.requestHeader.get("idempotency-key") ?? undefined;
      if (header !== undefined && request.idempotencyKey !== undefined && header !== request.idempotencyKey) {
        throw new ApiError("invalid_waitpoint", "The Idempotency-Key header and idempotency_key differ", { details: { field: "idempotency_key" } });
      }
      const issued = await waitpoints.create(callerOf(ctx), {
        timeoutSeconds: request.timeoutSeconds,
        description: request.description,
        idempotencyKey: request.idempotencyKey ?? header,
      });
      const token = issued.token ?? undefined;
      return {
        ...renderWaitpoint(issued.waitpoint, clock.now()),
        token,
        completeUrl: token === undefined ? undefined : `${ctx.values.get(baseUrlKey)}/v1/waitpoints/${token}:complete`,
      };
    },
    async listWaitpoints(request, ctx) {
      const state = request.state === undefined ? undefined : STATE_OF.get(request.state);
      const page = await waitpoints.list(callerOf(ctx), { state, limit: request.limit, cursor: request.cursor });
      const now = clock.now();
      return { data: page.waitpoints.map((w) => renderWaitpoint(w, now)), nextCursor: page.nextCursor ?? undefined };
    },
    async getWaitpoint(request, ctx) {
      return renderWaitpoint(await waitpoints.get(callerOf(ctx), request.id), clock.now());
    },
    async completeWaitpoint(request, ctx) {
      const attempt = wrongTokenLimiter.reserve(ctx.values.get(clientAddressKey));
      if (!attempt.allowed) {
        throw new ApiError("rate_limit_exceeded", "Too many wrong waitpoint tokens from this address", {
          details: { retry_after: attempt.retryAfterSeconds },
          headers: { "Retry-After": String(attempt.retryAfterSeconds) },
        });
      }
      let completed;
      try {
        completed = await waitpoints.complete(request.token, asData(request.data));
      } catch (err) {
        // Only a token that names no waitpoint counts: a right one (even one already used) is no guess.
        if (!(err instanceof ApiError && err.code === "waitpoint_not_found")) attempt.release();
        throw err;
      }
      attempt.release();
      return renderWaitpoint(completed, clock.now());
    },
    async resolveWaitpoint(request, ctx) {
      return renderWaitpoint(await waitpoints.resolve(callerOf(ctx), request.id, asData(request.data)), clock.now());
    },
  });
}
