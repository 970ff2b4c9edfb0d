/**
 * Domain channels and actors → protobuf init shapes, and the proto enums ↔
 * domain strings. Shared by every service that returns a Channel, a
 * ChannelSummary, a RelatedChannel or an Actor.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ActorSchema } from "../../gen/agentbus/v1/actor_pb.js";
import {
  ChannelAccess as ProtoChannelAccess,
  ChannelDispatch as ProtoChannelDispatch,
  ChannelMode as ProtoChannelMode,
  type ChannelSchema,
  type ChannelSummarySchema,
} from "../../gen/agentbus/v1/channel_pb.js";
import type { ActorRecord } from "../model/actors.js";
import type { ChannelAccess, ChannelDispatch, ChannelMode, ChannelResource, ChannelSummary } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import { toProtoTimestamp } from "../model/time.js";

export function modeToProto(mode: ChannelMode): ProtoChannelMode {
  return mode === "broadcast" ? ProtoChannelMode.BROADCAST : ProtoChannelMode.CLAIMABLE;
}

export function accessToProto(access: ChannelAccess): ProtoChannelAccess {
  return access === "open" ? ProtoChannelAccess.OPEN : ProtoChannelAccess.RESTRICTED;
}

/** UNSPECIFIED → undefined (not given); a number the enum does not declare → 422 invalid_mode. */
export function modeFromProto(value: ProtoChannelMode): ChannelMode | undefined {
  switch (value) {
    case ProtoChannelMode.UNSPECIFIED:
      return undefined;
    case ProtoChannelMode.BROADCAST:
      return "broadcast";
    case ProtoChannelMode.CLAIMABLE:
      return "claimable";
    default:
      throw new ApiError("invalid_mode", `'mode' must be "broadcast" or "claimable"`, { details: { field: "mode" } });
  }
}

/** UNSPECIFIED → undefined (not given); a number the enum does not declare → 422 invalid_access. */
export function accessFromProto(value: ProtoChannelAccess): ChannelAccess | undefined {
  switch (value) {
    case ProtoChannelAccess.UNSPECIFIED:
      return undefined;
    case ProtoChannelAccess.OPEN:
      return "open";
    case ProtoChannelAccess.RESTRICTED:
      return "restricted";
    default:
      throw new ApiError("invalid_access", `'access' must be "open" or "restricted"`, { details: { field: "access" } });
  }
}

export function dispatchToProto(dispatch: ChannelDispatch): ProtoChannelDispatch {
  return dispatch === "fair" ? ProtoChannelDispatch.FAIR : ProtoChannelDispatch.FIFO;
}

/** UNSPECIFIED → undefined (not given); a number the enum does not declare → 422 invalid_dispatch. */
export function dispatchFromProto(value: ProtoChannelDispatch): ChannelDispatch | undefined {
  switch (value) {
    case ProtoChannelDispatch.UNSPECIFIED:
      return undefined;
    case ProtoChannelDispatch.FIFO:
      return "fifo";
    case ProtoChannelDispatch.FAIR:
      return "fair";
    default:
      throw new ApiError("invalid_dispatch", `'dispatch' must be "fifo" or "fair"`, { details: { field: "dispatch" } });
  }
}

/** The Channel resource; webhook_url and webhook_secret are write-only and never rendered. */
/** `viewerKeyId`: the caller's key; the owner alone sees the webhook URL (docs/decisions.md#channel-fields). */
export function renderChannel(c: ChannelResource, viewerKeyId?: string): MessageInitShape<typeof ChannelSchema> {
  return {
    id: c.id,
    name: c.name,
    mode: modeToProto(c.mode),
    access: accessToProto(c.access),
    discoverable: c.discoverable,
    description: c.description,
    ownerId: c.ownerId,
    createdByKeyId: c.createdByKeyId,
    metadataSchema: c.metadataSchema,
    pinnedMessage: c.pinnedMessage ?? undefined,
    ttlSeconds: c.ttlSeconds,
    retentionDays: c.retentionDays,
    maxMessages: c.maxMessages ?? undefined,
    maxWritesPerMinute: c.maxWritesPerMinute ?? undefined,
    maxDeliveries: c.maxDeliveries ?? undefined,
    deadLetterChannelId: c.deadLetterChannelId ?? undefined,
    webhookUrl: viewerKeyId !== undefined && viewerKeyId === c.createdByKeyId ? (c.webhookUrl ?? undefined) : undefined,
    paused: c.paused,
    aliases: c.aliases,
    relatedChannels: c.relatedChannels.map((r) => ({ id: r.id, name: r.name, mode: modeToProto(r.mode) })),
    createdAt: toProtoTimestamp(c.createdAt),
    updatedAt: toProtoTimestamp(c.updatedAt),
    groupConcurrency: c.groupConcurrency ?? undefined,
    dispatch: dispatchToProto(c.dispatch),
    priorityAgingSeconds: c.priorityAgingSeconds ?? undefined,
    limits: c.limits,
    a2a: c.a2a === null ? undefined : { enabled: c.a2a.enabled, name: c.a2a.name ?? undefined, description: c.a2a.description ?? undefined, skills: c.a2a.skills },
    // Where the work goes is the owner's business; the header's value is no one's.
    a2aForward:
      c.a2aForward === null || viewerKeyId === undefined || viewerKeyId !== c.createdByKeyId
        ? undefined
        : { url: c.a2aForward.url, authHeader: c.a2aForward.authHeader === null ? undefined : { name: c.a2aForward.authHeader.name } },
  };
}

export function renderChannelSummary(s: ChannelSummary): MessageInitShape<typeof ChannelSummarySchema> {
  return {
    id: s.id,
    name: s.name,
    mode: modeToProto(s.mode),
    access: accessToProto(s.access),
    description: s.description,
    createdAt: toProtoTimestamp(s.createdAt),
    isMember: s.isMember,
    ownerId: s.ownerId,
    liveMessages: s.liveMessages,
    openMessages: s.openMessages,
  };
}

export function renderActor(a: ActorRecord): MessageInitShape<typeof ActorSchema> {
  return {
    id: a.id,
    name: a.name,
    description: a.description,
    ownerId: a.ownerId,
    createdByKeyId: a.createdByKeyId,
    metadata: a.metadata,
    aliases: a.aliases,
    createdAt: toProtoTimestamp(a.createdAt),
    updatedAt: toProtoTimestamp(a.updatedAt),
  };
}
