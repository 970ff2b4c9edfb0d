/** ChannelService.ListChannelHistory: expired and retracted messages, newest first. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HistoryMessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import type { ChannelHistory } from "../domain/history.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import type { HistoryRecord } from "../model/history.js";
import type { ChannelHandlers } from "./handlers.js";
import { renderMessage } from "../protocol/render-message.js";

/**
 * Every Message field as it stood when the message was archived (a lease
 * that had already lapsed shows no claim), active false, plus archived_at.
 */
export function renderHistoryMessage(m: HistoryRecord): MessageInitShape<typeof HistoryMessageSchema> {
  // The live Message rendering, as of the moment the message was archived.
  const { $typeName: _message, ...fields } = renderMessage(m, m.archivedAt, m.reason) as ReturnType<typeof renderMessage> & { $typeName?: string };
  return { ...fields, active: false, archivedAt: toProtoTimestamp(m.archivedAt) };
}

export function channelHistoryHandlers(history: ChannelHistory): ChannelHandlers {
  return {
    async listChannelHistory(request, ctx) {
      const page = await history.list(callerOf(ctx), request.identifier, { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderHistoryMessage), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },
  };
}
