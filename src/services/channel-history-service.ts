/** ChannelService.ListChannelHistory: expired and retracted messages, newest first. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HistoryMessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import type { ChannelHistory } from "../domain/history.js";
import { effectiveClaim } from "../domain/message.js";
import { toProtoTimestamp } from "../domain/time.js";
import { callerOf } from "../server/rpc/context.js";
import type { HistoryRecord } from "../store/history.js";
import type { ChannelHandlers } from "./handlers.js";

/**
 * Every Message field as it stood when the message was archived (a lease
 * that had already lapsed shows no claim), active false, plus archived_at.
 */
export function renderHistoryMessage(m: HistoryRecord): MessageInitShape<typeof HistoryMessageSchema> {
  const claim = effectiveClaim(m, m.archivedAt);
  return {
    id: m.id,
    channelId: m.channelId,
    actor: m.actor ?? undefined,
    actorLabel: m.actorLabel ?? undefined,
    content: m.content,
    metadata: m.metadata,
    createdAt: toProtoTimestamp(m.createdAt),
    expiresAt: toProtoTimestamp(m.expiresAt),
    claimedBy: claim ? claim.actor : undefined,
    claimedByKeyId: claim?.keyId,
    claimedAt: claim ? toProtoTimestamp(claim.claimedAt) : undefined,
    mentions: m.mentions,
    acknowledgedBy: m.acknowledgedBy.map((a) => ({ id: a.id, name: a.name, occurredAt: toProtoTimestamp(a.occurredAt) })),
    active: false,
    archivedAt: toProtoTimestamp(m.archivedAt),
  };
}

export function channelHistoryHandlers(history: ChannelHistory): ChannelHandlers {
  return {
    async listChannelHistory(request, ctx) {
      const page = await history.list(callerOf(ctx), request.identifier, { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderHistoryMessage), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },
  };
}
