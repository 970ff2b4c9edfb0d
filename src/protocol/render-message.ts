/** Domain messages to their protobuf shapes. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { MessageSchema } from "../../gen/agentbus/v1/message_pb.js";
import { MessageState } from "../../gen/agentbus/v1/message_pb.js";
import { effectiveClaim, messageState, type ArchiveReason } from "../model/messages.js";
import type { FoundMessage, MessageRecord, MessageState as State } from "../model/messages.js";
import { toProtoTimestamp, type Micros } from "../model/time.js";

const STATES: Record<State, MessageState> = {
  ready: MessageState.READY,
  delayed: MessageState.DELAYED,
  blocked: MessageState.BLOCKED,
  waiting: MessageState.WAITING,
  in_flight: MessageState.IN_FLIGHT,
  acknowledged: MessageState.ACKNOWLEDGED,
  dead_lettered: MessageState.DEAD_LETTERED,
  cancelled: MessageState.CANCELLED,
  expired: MessageState.EXPIRED,
};

/** A message as of `now`; an archived copy (archived: why it moved to history) as it ended. */
export function renderMessage(message: MessageRecord, now: Micros, archived: ArchiveReason | null = null): MessageInitShape<typeof MessageSchema> {
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
    state: STATES[messageState(message, now, archived)],
    cancelRequested: message.cancelRequestedAt !== null,
    cancelReason: message.cancelReason ?? undefined,
    progress:
      message.progress === null ? undefined : { data: message.progress.data, text: message.progress.text, updatedAt: toProtoTimestamp(message.progress.updatedAt) },
    dependsOn: message.dependsOn,
    dependentsCount: message.dependentsCount,
    waitpoint:
      message.waitpoint === null
        ? undefined
        : {
            id: message.waitpoint.id,
            data: message.waitpoint.data ?? undefined,
            // Open work again with no completion: its timeout did it (docs/decisions.md#waitpoints).
            timedOut: !message.waitpoint.completed && message.availableAt <= now,
          },
    trace: message.trace === null ? undefined : { traceparent: message.trace.traceparent, tracestate: message.trace.tracestate ?? undefined },
  };
}

/**
 * A message found by id: live as of now, or an archived copy as it stood
 * when it was archived (inactive, even when retracted before its expiry).
 */
export function renderFoundMessage(found: FoundMessage, now: Micros): MessageInitShape<typeof MessageSchema> {
  if (found.archivedAt === null) return renderMessage(found.message, now);
  return { ...renderMessage(found.message, found.archivedAt, found.archivedReason), active: false };
}
