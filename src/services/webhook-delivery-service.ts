/** ChannelService.ListWebhookDeliveries: the channel webhook's attempts, newest first (owner only). */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { WebhookDeliveryStatus, type WebhookDeliverySchema } from "../../gen/agentbus/v1/channel_pb.js";
import type { DeliveryStatus } from "../model/webhooks.js";

const STATUSES: Record<DeliveryStatus, WebhookDeliveryStatus> = {
  delivered: WebhookDeliveryStatus.DELIVERED,
  failed: WebhookDeliveryStatus.FAILED,
  deferred: WebhookDeliveryStatus.DEFERRED,
};
import { toProtoTimestamp } from "../model/time.js";
import type { WebhookDeliveryLog } from "../domain/webhook-deliveries.js";
import { callerOf } from "../protocol/context.js";
import type { DeliveryLogRecord } from "../model/webhooks.js";
import type { ChannelHandlers } from "./handlers.js";

export function renderWebhookDelivery(d: DeliveryLogRecord): MessageInitShape<typeof WebhookDeliverySchema> {
  return {
    id: d.id,
    deliveryId: d.deliveryId,
    channelId: d.channelId,
    event: d.event,
    messageId: d.messageId ?? undefined,
    attempt: d.attempt,
    status: STATUSES[d.status],
    responseStatus: d.responseStatus ?? undefined,
    error: d.error ?? undefined,
    durationMs: d.durationMs,
    attemptedAt: toProtoTimestamp(d.attemptedAt),
    nextAttemptAt: d.nextAttemptAt === null ? undefined : toProtoTimestamp(d.nextAttemptAt),
  };
}

export function webhookDeliveryHandlers(log: WebhookDeliveryLog): ChannelHandlers {
  return {
    async listWebhookDeliveries(request, ctx) {
      const page = await log.list(callerOf(ctx), request.identifier, { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderWebhookDelivery), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },
  };
}
