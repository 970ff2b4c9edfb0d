/** CompatService handlers: the reference's convenience verbs (docs/decisions.md#compat-verbs) to TaskVerbs and UsageMetrics. */
import type { HandlerContext } from "@connectrpc/connect";
import { CompatService } from "../../gen/agentbus/v1/compat_service_pb.js";
import type { Quotas } from "../domain/quotas.js";
import { NOTHING_TO_CLAIM, type TaskVerbs } from "../domain/task-verbs.js";
import type { UsageMetrics } from "../domain/usage-metrics.js";
import { toProtoTimestamp, type Clock } from "../model/time.js";
import { callerOf, requestBudgetKey } from "../protocol/context.js";
import { renderMessage } from "../protocol/render-message.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { renderQuotas } from "./key-service.js";
import { renderInvitation } from "./membership-service.js";
import { renderChannel } from "./render-channel.js";

const draftOf = (req: { content?: string; actorLabel?: string; metadata?: { [key: string]: unknown } }) => ({
  content: req.content,
  actorLabel: req.actorLabel,
  metadata: req.metadata as Parameters<TaskVerbs["post"]>[2]["metadata"],
});

const ACCOUNT_NOTE =
  "agentbus has no plans: the limits are this service's settings (AGENTBUS_RATE_LIMIT, the storage quotas), the same for every key unless the operator set a key's own quotas.";

export interface CompatDependencies {
  verbs: TaskVerbs;
  usage: UsageMetrics;
  quotas: Quotas;
  clock: Clock;
}

export function compatService({ verbs, usage, quotas, clock }: CompatDependencies): ServiceEntry {
  const waitSignal = (ctx: HandlerContext) => ctx.signal;
  return serviceEntry(CompatService, {
    async postTask(req, ctx) {
      const { message, channelId, nextCursor } = await verbs.post(callerOf(ctx), req.channel, draftOf(req));
      return { message: renderMessage(message, clock.now()), channel: channelId, nextCursor };
    },

    async claimTask(req, ctx) {
      const claimed = await verbs.claimNext(callerOf(ctx), req.channel, req.actor, req.metadata);
      return claimed === null ? { note: NOTHING_TO_CLAIM } : { claimed: renderMessage(claimed, clock.now()) };
    },

    async subscribeTasks(req, ctx) {
      const page = await verbs.subscribe(callerOf(ctx), req.channel, { since: req.since, limit: req.limit, wait: req.wait, signal: waitSignal(ctx) });
      const now = clock.now();
      return { data: page.data.map((m) => renderMessage(m, now)), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },

    async broadcastTask(req, ctx) {
      const { message, nextCursor } = await verbs.broadcast(callerOf(ctx), req.channel, draftOf(req));
      return { message: renderMessage(message, clock.now()), nextCursor };
    },

    async claimAndAckTask(req, ctx) {
      const message = await verbs.claimAndAck(callerOf(ctx), req.messageId, req.actor, req.metadata);
      return { status: "claimed_and_acked", message: renderMessage(message, clock.now()) };
    },

    async createClaimableSession(req, ctx) {
      const { channel, invitation } = await verbs.createClaimableSession(callerOf(ctx), req.name, req.description);
      return { channel: renderChannel(channel), invitation: renderInvitation(invitation) };
    },

    async postTaskWithResult(req, ctx) {
      const { message, channelId, resultChannel } = await verbs.postWithResult(callerOf(ctx), req.channel, draftOf(req));
      return { message: renderMessage(message, clock.now()), channel: channelId, resultChannel, resultUrl: `/v1/tasks/${message.id}/result` };
    },

    async postTaskResult(req, ctx) {
      const { resultChannel, message } = await verbs.postResult(callerOf(ctx), req.id, draftOf(req));
      return { resultChannel, message: renderMessage(message, clock.now()) };
    },

    async getTaskResult(req, ctx) {
      const result = await verbs.getResult(callerOf(ctx), req.id);
      return { taskId: req.id, result: renderMessage(result, clock.now()) };
    },

    async getChannelMetrics(req, ctx) {
      const counts = await usage.channelCounts(callerOf(ctx), req.identifier);
      const avg = counts.stats.claimToAckAvgMs;
      return {
        channelId: counts.channelId,
        messageCounts: { total: counts.total, unclaimed: counts.unclaimed, claimed: counts.claimed, acknowledged: counts.acknowledged },
        avgClaimToAckMs: avg === null ? undefined : Math.round(avg),
        computedAt: toProtoTimestamp(clock.now()),
      };
    },

    async getObservabilityMetrics(_req, ctx) {
      const caller = callerOf(ctx);
      const { figures, computedAt } = await usage.owned(caller);
      return {
        keyId: caller.keyId,
        channelsOwned: figures.channelsOwned,
        messagesInOwnedChannels: figures.messages,
        messagesClaimedInOwnedChannels: figures.claimed,
        messagesAcknowledgedInOwnedChannels: figures.acknowledged,
        activeSessions: figures.activeSessions,
        computedAt: toProtoTimestamp(computedAt),
      };
    },

    async getAccountUsage(_req, ctx) {
      const caller = callerOf(ctx);
      const budget = ctx.values.get(requestBudgetKey);
      return {
        keyId: caller.keyId,
        plan: "none",
        rateLimit:
          budget === undefined
            ? undefined
            : { requestsPerWindow: budget.limit, windowSeconds: budget.windowSeconds, remaining: budget.remaining, resetSeconds: budget.resetSeconds },
        instanceKind: "agentbus",
        note: ACCOUNT_NOTE,
        quotas: renderQuotas(await quotas.report(caller.keyId)),
      };
    },
  });
}
