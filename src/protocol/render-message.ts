/** Domain messages to their protobuf shapes. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import { effectiveClaim } from "../model/messages.js";
import type { FoundMessage, MessageRecord } from "../model/messages.js";
import { toProtoTimestamp, type Micros } from "../model/time.js";

export function renderMessage(message: MessageRecord, now: Micros): MessageInitShape<typeof MessageSchema> {
  const claim = effectiveClaim(message, now);
  return {
    id: message.id,
    channelId: message.channelId,
    actor: message.actor ?? undefined,
    actorLabel: message.actorLabel ?? undefined,
    authorKeyId: message.authorKeyId,
    authorLabel: message.authorLabel,
    content: message.content,
    metadata: message.metadata,
    createdAt: toProtoTimestamp(message.createdAt),
    expiresAt: toProtoTimestamp(message.expiresAt),
    availableAt: toProtoTimestamp(message.availableAt),
    claimedBy: claim ? claim.actor : undefined,
    claimedByKeyId: claim?.keyId,
    claimedAt: claim ? toProtoTimestamp(claim.claimedAt) : undefined,
    leaseExpiresAt: claim?.leaseExpiresAt != null ? toProtoTimestamp(claim.leaseExpiresAt) : undefined,
    mentions: message.mentions,
    acknowledgedBy: message.acknowledgedBy.map((a) => ({ id: a.id, name: a.name, occurredAt: toProtoTimestamp(a.occurredAt), metadata: a.metadata })),
    active: message.expiresAt > now,
    deliveryCount: message.deliveryCount,
    result: message.result ?? undefined,
    deadLetter: message.deadLetter ?? undefined,
    groupKey: message.groupKey ?? undefined,
    priority: message.priority,
    limits: message.limits,
  };
}

/**
 * A message found by id: live as of now, or an archived copy as it stood
 * when it was archived (inactive, even when retracted before its expiry).
 */
export function renderFoundMessage(found: FoundMessage, now: Micros): MessageInitShape<typeof MessageSchema> {
  if (found.archivedAt === null) return renderMessage(found.message, now);
  return { ...renderMessage(found.message, found.archivedAt), active: false };
}
