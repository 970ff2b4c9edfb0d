/** Domain messages to their protobuf shapes. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import { effectiveClaim } from "../model/messages.js";
import type { MessageRecord } from "../model/messages.js";
import { toProtoTimestamp, type Micros } from "../model/time.js";

export function renderMessage(message: MessageRecord, now: Micros): MessageInitShape<typeof MessageSchema> {
  const claim = effectiveClaim(message, now);
  return {
    id: message.id,
    channelId: message.channelId,
    actor: message.actor ?? undefined,
    actorLabel: message.actorLabel ?? undefined,
    content: message.content,
    metadata: message.metadata,
    createdAt: toProtoTimestamp(message.createdAt),
    expiresAt: toProtoTimestamp(message.expiresAt),
    claimedBy: claim ? claim.actor : undefined,
    claimedByKeyId: claim?.keyId,
    claimedAt: claim ? toProtoTimestamp(claim.claimedAt) : undefined,
    mentions: message.mentions,
    acknowledgedBy: message.acknowledgedBy.map((a) => ({ id: a.id, name: a.name, occurredAt: toProtoTimestamp(a.occurredAt) })),
    active: message.expiresAt > now,
    deliveryCount: message.deliveryCount,
  };
}
