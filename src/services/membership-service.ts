/**
 * ChannelService handlers for membership: members, invitations, access
 * requests and the channel event log. services/index.ts merges them into the
 * ChannelService entry with the other channel modules.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  AccessRequestStatus as ProtoAccessRequestStatus,
  ChannelEventType as ProtoChannelEventType,
  InvitationState as ProtoInvitationState,
  type AccessRequestSchema,
  type ChannelEventSchema,
  type InvitationSchema,
  type MemberSchema,
} from "../../gen/agentbus/v1/channel_pb.js";
import { AccessRequestOutcome as ProtoOutcome } from "../../gen/agentbus/v1/channel_service_pb.js";
import type { AccessRequestRecord, AccessRequestStatus, ChannelEventRecord, ChannelEventType, MemberRecord } from "../model/membership.js";
import type { InvitationState, InvitationView, Membership } from "../domain/membership.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf, clientAddressKey, httpStatusKey } from "../protocol/context.js";
import type { ChannelHandlers } from "./handlers.js";
import { modeToProto } from "./render-channel.js";

export function membershipHandlers(membership: Membership): ChannelHandlers {
  return {
    async listMembers(request, ctx) {
      const members = await membership.listMembers(callerOf(ctx), request.identifier);
      return { data: members.map(renderMember) };
    },

    async addMember(request, ctx) {
      return renderMember(await membership.addMember(callerOf(ctx), request.identifier, request.keyId));
    },

    async removeMember(request, ctx) {
      await membership.removeMember(callerOf(ctx), request.identifier, request.keyId);
      return { status: "removed" };
    },

    async createInvitation(request, ctx) {
      return renderInvitation(await membership.createInvitation(callerOf(ctx), request.identifier));
    },

    async listInvitations(request, ctx) {
      const page = await membership.listInvitations(callerOf(ctx), request.identifier, { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderInvitation), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },

    async previewInvitation(request, ctx) {
      const preview = await membership.previewInvitation(callerOf(ctx), request.invitationId, ctx.values.get(clientAddressKey));
      return {
        channel: { id: preview.channel.id, name: preview.channel.name, mode: modeToProto(preview.channel.mode), description: preview.channel.description },
        state: INVITATION_STATE[preview.state],
        expiresAt: toProtoTimestamp(preview.expiresAt),
      };
    },

    async resolveInvitation(request, ctx) {
      const invitation = await membership.resolveInvitation(callerOf(ctx), request.invitationId, ctx.values.get(clientAddressKey));
      return renderInvitation(invitation);
    },

    async revokeInvitation(request, ctx) {
      return renderInvitation(await membership.revokeInvitation(callerOf(ctx), request.invitationId));
    },

    async createAccessRequest(request, ctx) {
      const outcome = await membership.requestAccess(callerOf(ctx), request.identifier, request.reason);
      switch (outcome.status) {
        case "pending":
          return { status: ProtoOutcome.PENDING, requestId: outcome.requestId };
        case "open":
          // No request was filed: 200, not the method's 202.
          ctx.values.set(httpStatusKey, 200);
          return { status: ProtoOutcome.OPEN, note: outcome.note };
        case "already_member":
          ctx.values.set(httpStatusKey, 200);
          return { status: ProtoOutcome.ALREADY_MEMBER };
      }
    },

    async listAccessRequests(request, ctx) {
      const pending = await membership.listAccessRequests(callerOf(ctx), request.identifier);
      return { data: pending.map(renderAccessRequest) };
    },

    async approveAccessRequest(request, ctx) {
      const decision = await membership.decideAccessRequest(callerOf(ctx), request.identifier, request.requestId, "approved");
      return { status: requestStatusToProto(decision.status), requestId: decision.requestId, requesterKeyId: decision.requesterKeyId };
    },

    async denyAccessRequest(request, ctx) {
      const decision = await membership.decideAccessRequest(callerOf(ctx), request.identifier, request.requestId, "denied");
      return { status: requestStatusToProto(decision.status), requestId: decision.requestId, requesterKeyId: decision.requesterKeyId };
    },

    async listChannelEvents(request, ctx) {
      const page = await membership.listEvents(callerOf(ctx), request.identifier, { since: request.since, limit: request.limit });
      return { data: page.data.map(renderEvent), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },
  };
}

function renderMember(m: MemberRecord): MessageInitShape<typeof MemberSchema> {
  return {
    id: m.id,
    channelId: m.channelId,
    keyId: m.keyId,
    agentLabel: m.agentLabel,
    grantedAt: toProtoTimestamp(m.grantedAt),
    grantedViaInvitationId: m.grantedViaInvitationId ?? undefined,
  };
}

export function renderInvitation(i: InvitationView): MessageInitShape<typeof InvitationSchema> {
  return {
    id: i.id,
    ownerId: i.ownerId,
    createdByKeyId: i.createdByKeyId,
    createdAt: toProtoTimestamp(i.createdAt),
    expiresAt: toProtoTimestamp(i.expiresAt),
    revokedAt: i.revokedAt === null ? undefined : toProtoTimestamp(i.revokedAt),
    active: i.active,
    state: INVITATION_STATE[i.state],
    uses: i.uses,
    channel: { id: i.channel.id, name: i.channel.name, mode: modeToProto(i.channel.mode), description: i.channel.description },
  };
}

const INVITATION_STATE: Record<InvitationState, ProtoInvitationState> = {
  active: ProtoInvitationState.ACTIVE,
  revoked: ProtoInvitationState.REVOKED,
  expired: ProtoInvitationState.EXPIRED,
  invalidated: ProtoInvitationState.INVALIDATED,
};

const REQUEST_STATUS: Record<AccessRequestStatus, ProtoAccessRequestStatus> = {
  pending: ProtoAccessRequestStatus.PENDING,
  approved: ProtoAccessRequestStatus.APPROVED,
  denied: ProtoAccessRequestStatus.DENIED,
};

const requestStatusToProto = (status: AccessRequestStatus): ProtoAccessRequestStatus => REQUEST_STATUS[status];

function renderAccessRequest(r: AccessRequestRecord): MessageInitShape<typeof AccessRequestSchema> {
  return {
    id: r.id,
    channelId: r.channelId,
    requesterKeyId: r.requesterKeyId,
    requesterLabel: r.requesterLabel,
    reason: r.reason,
    status: requestStatusToProto(r.status),
    createdAt: toProtoTimestamp(r.createdAt),
  };
}

const EVENT_TYPE: Record<ChannelEventType, ProtoChannelEventType> = {
  member_added: ProtoChannelEventType.MEMBER_ADDED,
  member_removed: ProtoChannelEventType.MEMBER_REMOVED,
  invitation_resolved: ProtoChannelEventType.INVITATION_RESOLVED,
  invitation_revoked: ProtoChannelEventType.INVITATION_REVOKED,
};

function renderEvent(e: ChannelEventRecord): MessageInitShape<typeof ChannelEventSchema> {
  return {
    id: e.id,
    channelId: e.channelId,
    eventType: EVENT_TYPE[e.eventType],
    actorKeyId: e.actorKeyId,
    subjectKeyId: e.subjectKeyId ?? undefined,
    invitationId: e.invitationId ?? undefined,
    metadata: e.metadata,
    createdAt: toProtoTimestamp(e.createdAt),
    expiresAt: toProtoTimestamp(e.expiresAt),
  };
}
