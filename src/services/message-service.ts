/** MessageService handlers: requests to domain calls, domain results to responses. */
import {
  AckStatus,
  ClaimStatus,
  MessageService,
  MessageStatus,
  type ListMessagesResponseSchema,
} from "../../gen/agentbus/v1/message_service_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import type { ApiError } from "../model/errors.js";
import type { MessageRecord } from "../model/messages.js";
import type { AckStatus as DomainAckStatus, BatchItemResult, Messages, Page } from "../domain/messages.js";
import { formatTimestamp, MICROS_PER_SECOND, toProtoTimestamp, type Clock, type Micros } from "../model/time.js";
import { callerOf, callSignal, streamOpenKey, traceOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { shareResponse } from "../protocol/shared-response.js";
import { renderFoundMessage, renderMessage } from "../protocol/render-message.js";
import { recordDeliveries } from "./delivery-spans.js";

const claimStatus = {
  claimed: ClaimStatus.CLAIMED,
  already_claimed: ClaimStatus.ALREADY_CLAIMED,
  already_acknowledged: ClaimStatus.ALREADY_ACKNOWLEDGED,
} as const;

type ListMessagesResponseShape = MessageInitShape<typeof ListMessagesResponseSchema>;

function renderPage(page: Page, now: Micros): ListMessagesResponseShape {
  return { data: page.data.map((m) => renderMessage(m, now)), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
}

const filterOf = (status: MessageStatus) =>
  status === MessageStatus.UNCLAIMED ? "unclaimed" : status === MessageStatus.CLAIMED ? "claimed" : "all";

const itemError = (err: ApiError) => ({ error: err.code, message: err.message });
const ackStatus = (status: DomainAckStatus) => (status === "acknowledged" ? AckStatus.ACKNOWLEDGED : AckStatus.ALREADY_ACKNOWLEDGED);
const batchAckResult = (r: BatchItemResult<DomainAckStatus>) =>
  "error" in r ? { messageId: r.messageId, error: itemError(r.error) } : { messageId: r.messageId, status: ackStatus(r.status), cancelRequested: r.cancelRequested ?? false };

export function messageService(messages: Messages, clock: Clock): ServiceEntry {
  // Long-polls woken by one delivery share one read (Messages.readPage), so
  // they get the same page array; they share its rendering too.
  const sharedPages = new WeakMap<readonly MessageRecord[], ListMessagesResponseShape>();

  return serviceEntry(MessageService, {
    async createMessage(req, ctx) {
      const { message, nextCursor } = await messages.create(callerOf(ctx), req.identifier, {
        content: req.content,
        actor: req.actor,
        actorLabel: req.actorLabel,
        metadata: req.metadata,
        mentions: req.mentions,
        delaySeconds: req.delaySeconds,
        groupKey: req.groupKey,
        priority: req.priority,
        ttlSeconds: req.ttlSeconds,
        limits: req.limits,
        dependsOn: req.dependsOn,
        trace: traceOf(ctx),
      });
      return { message: renderMessage(message, clock.now()), nextCursor };
    },

    async batchCreateMessages(req, ctx) {
      const trace = traceOf(ctx);
      const drafts = req.messages.map((m) => ({
        content: m.content,
        actor: m.actor,
        actorLabel: m.actorLabel,
        metadata: m.metadata,
        mentions: m.mentions,
        delaySeconds: m.delaySeconds,
        groupKey: m.groupKey,
        priority: m.priority,
        ttlSeconds: m.ttlSeconds,
        limits: m.limits,
        ref: m.ref,
        dependsOn: m.dependsOn,
        trace,
      }));
      const { messages: created, nextCursor } = await messages.createBatch(callerOf(ctx), req.identifier, drafts);
      const now = clock.now();
      return { data: created.map((m) => renderMessage(m, now)), nextCursor };
    },

    async listMessages(req, ctx) {
      const page = await messages.list(callerOf(ctx), req.identifier, {
        since: req.since,
        cursor: req.cursor,
        limit: req.limit,
        status: filterOf(req.status),
        wait: req.wait,
        signal: waitSignal(ctx, req.wait),
      });
      if (!page.shared) return renderPage(page, clock.now());
      let response = sharedPages.get(page.data);
      if (response === undefined) {
        response = shareResponse(renderPage(page, clock.now()));
        sharedPages.set(page.data, response);
      }
      return response;
    },

    async *watchMessages(req, ctx) {
      const watch = await messages.openWatch(callerOf(ctx), req.identifier, req.since, callSignal(ctx));
      ctx.values.get(streamOpenKey)?.();
      // First the starting position (no message): see WatchMessagesResponse.
      try {
        yield { cursor: watch.cursor };
        for await (const message of watch.messages) {
          yield { message: renderMessage(message, clock.now()), cursor: formatTimestamp(message.createdAt) };
        }
      } finally {
        // A client gone after the first item never starts `messages`, whose own cleanup would not run.
        watch.close();
      }
    },

    async claimMessage(req, ctx) {
      const { status, message } = await messages.claim(callerOf(ctx), req.messageId, req.actor, req.metadata);
      return { status: claimStatus[status], message: renderMessage(message, clock.now()) };
    },

    async claimMessageWithLease(req, ctx) {
      const lease = await messages.claimWithLease(callerOf(ctx), req.messageId, req.actor, req.leaseSeconds, req.metadata);
      recordDeliveries([lease.message], callerOf(ctx).keyId);
      return { leaseToken: lease.leaseToken, expiresAt: toProtoTimestamp(lease.expiresAt), message: renderMessage(lease.message, clock.now()) };
    },

    async receiveMessages(req, ctx) {
      const { completed, leases } = await messages.completeAndReceive(
        callerOf(ctx),
        req.identifier,
        { maxMessages: req.maxMessages, leaseSeconds: req.leaseSeconds, wait: req.wait, actor: req.actor, signal: waitSignal(ctx, req.wait) },
        req.complete,
      );
      recordDeliveries(leases.map((l) => l.message), callerOf(ctx).keyId);
      const now = clock.now();
      // A task that waited for others gets their results (docs/decisions.md#dependencies).
      const parents = await messages.parentsOf(leases.filter((l) => l.message.dependsOn.length > 0).map((l) => l.message.id));
      return {
        data: leases.map((l) => ({
          message: renderMessage(l.message, now),
          leaseToken: l.leaseToken,
          leaseExpiresAt: toProtoTimestamp(l.leaseExpiresAt),
          parents: (parents.get(l.message.id) ?? []).map((p) => ({ messageId: p.messageId, channelId: p.channelId, result: p.result ?? undefined })),
        })),
        completed: completed.map(batchAckResult),
      };
    },

    async redriveDeadLetters(req, ctx) {
      const { moved, refused } = await messages.redrive(callerOf(ctx), req.identifier, req.maxMessages);
      return { moved, refused };
    },

    async reportProgress(req, ctx) {
      const message = await messages.reportProgress(callerOf(ctx), req.messageId, {
        leaseToken: req.leaseToken,
        data: req.data,
        text: req.text,
        append: req.append,
      });
      return { message: renderMessage(message, clock.now()) };
    },

    async *watchMessage(req, ctx) {
      const watch = await messages.openMessageWatch(callerOf(ctx), req.messageId, req.since, callSignal(ctx));
      ctx.values.get(streamOpenKey)?.();
      try {
        // First where the stream starts: resuming from it sends what changed since.
        yield { cursor: req.since ?? "", event: "open" };
        for await (const e of watch.events) {
          yield { event: e.event, cursor: e.cursor, message: renderFoundMessage(e.found, clock.now()) };
        }
      } finally {
        watch.close();
      }
    },

    async cancelMessage(req, ctx) {
      return { message: renderMessage(await messages.cancel(callerOf(ctx), req.messageId, req.reason), clock.now()) };
    },

    async heartbeatLease(req, ctx) {
      const lease = await messages.heartbeat(callerOf(ctx), req.leaseToken, req.leaseSeconds);
      return { leaseToken: lease.leaseToken, expiresAt: toProtoTimestamp(lease.expiresAt), cancelRequested: lease.cancelRequested };
    },

    async releaseMessage(req, ctx) {
      const message = await messages.release(callerOf(ctx), req.messageId, req.actor, req.delaySeconds, req.priority, req.untilWaitpoint);
      return { status: "released", message: renderMessage(message, clock.now()) };
    },

    async ackMessage(req, ctx) {
      const { status, message } = await messages.ack(callerOf(ctx), req.messageId, req.actor, { result: req.result, metadata: req.metadata });
      return {
        status: ackStatus(status),
        message: renderMessage(message, clock.now()),
      };
    },

    async batchAckMessages(req, ctx) {
      const results = await messages.ackBatch(callerOf(ctx), req.messageIds, req.actor, { result: req.result });
      return { results: results.map(batchAckResult) };
    },

    async batchReleaseMessages(req, ctx) {
      const results = await messages.releaseBatch(callerOf(ctx), req.messageIds, req.actor, req.delaySeconds, req.priority);
      return { results: results.map((r) => ("error" in r ? { messageId: r.messageId, error: itemError(r.error) } : r)) };
    },

    async getMessage(req, ctx) {
      const found = await messages.get(callerOf(ctx), req.messageId, { wait: req.wait, progressAfter: req.progressAfter, signal: waitSignal(ctx, req.wait) });
      return renderFoundMessage(found, clock.now());
    },

    async listMessageDependents(req, ctx) {
      const now = clock.now();
      return { data: (await messages.dependents(callerOf(ctx), req.messageId)).map((m) => renderMessage(m, now)) };
    },

    async listTraceMessages(req, ctx) {
      const now = clock.now();
      return { data: (await messages.inTrace(callerOf(ctx), req.traceId)).map((m) => renderMessage(m, now)) };
    },

    async getChannelStats(req, ctx) {
      const stats = await messages.stats(callerOf(ctx), req.identifier);
      const now = clock.now();
      return {
        ready: stats.ready,
        delayed: stats.delayed,
        inFlight: stats.inFlight,
        acknowledged: stats.acknowledged,
        deadLettered: stats.deadLettered,
        blocked: stats.blocked,
        waiting: stats.waiting,
        cancelled: stats.cancelled,
        expired: stats.expired,
        oldestReadyAgeSeconds: stats.oldestReadySince === null ? undefined : Math.max(0, now - stats.oldestReadySince) / MICROS_PER_SECOND,
        claimToAckP50Ms: stats.claimToAckP50Ms ?? undefined,
        readyByPriority: Object.fromEntries(stats.readyByPriority.map((n, i) => [String(i + 1), n])),
        groups:
          stats.groups === null
            ? undefined
            : {
                count: stats.groups.count,
                inFlight: stats.groups.inFlight,
                top: stats.groups.top.map((g) => ({
                  groupKey: g.groupKey,
                  ready: g.ready,
                  inFlight: g.inFlight,
                  oldestReadyAgeSeconds: g.oldestReadySince === null ? undefined : Math.max(0, now - g.oldestReadySince) / MICROS_PER_SECOND,
                })),
              },
      };
    },

    async retractMessage(req, ctx) {
      await messages.retract(callerOf(ctx), req.messageId);
      return { status: "retracted" };
    },
  });
}

/**
 * The signal a call waits on: with a wait, the one that also ends when the
 * key is revoked or narrowed (its watch starts only then); without, the
 * call's own, which tells a receive its client has gone.
 */
function waitSignal(ctx: HandlerContext, wait: number | undefined): AbortSignal {
  return wait !== undefined && wait > 0 ? callSignal(ctx) : ctx.signal;
}
