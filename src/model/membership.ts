/** Who belongs to a channel and how they got in, as stored: members, invitations, access requests, channel events. */
import type { ChannelMode } from "./channels.js";
import type { JsonValue } from "./json.js";
import type { Micros } from "./time.js";

export interface MemberRecord {
  id: string;
  channelId: string;
  keyId: string;
  /** The member key's agent label. */
  agentLabel: string;
  grantedAt: Micros;
  grantedViaInvitationId: string | null;
}

export interface InvitationChannel {
  id: string;
  name: string;
  mode: ChannelMode;
  description: string;
}

export interface InvitationRecord {
  id: string;
  ownerId: string;
  createdByKeyId: string;
  createdAt: Micros;
  expiresAt: Micros;
  revokedAt: Micros | null;
  channel: InvitationChannel;
  /** created_by_key_id of the channel (its owner key): may revoke. Not rendered. */
  channelOwnerKeyId: string;
  /** owner_id of the channel (its owner key's label), for the audit. Not rendered. */
  channelOwnerId: string;
  /** Keys that became members through it. */
  uses: number;
  /** Its creator may still invite: an active key that can use the channel. Not rendered (see state). */
  creatorMayInvite: boolean;
}

export interface NewInvitation {
  id: string;
  channelId: string;
  ownerId: string;
  createdByKeyId: string;
  createdAt: Micros;
  expiresAt: Micros;
}

export type AccessRequestStatus = "pending" | "approved" | "denied";

export interface AccessRequestRecord {
  id: string;
  channelId: string;
  requesterKeyId: string;
  /** The requesting key's agent label. */
  requesterLabel: string;
  reason: string;
  status: AccessRequestStatus;
  createdAt: Micros;
}

export interface NewAccessRequest {
  channelId: string;
  requesterKeyId: string;
  reason: string;
  createdAt: Micros;
}

export type ChannelEventType = "member_added" | "member_removed" | "invitation_resolved" | "invitation_revoked";

export interface ChannelEventRecord {
  id: string;
  channelId: string;
  eventType: ChannelEventType;
  actorKeyId: string;
  subjectKeyId: string | null;
  invitationId: string | null;
  metadata: { [key: string]: JsonValue };
  createdAt: Micros;
  expiresAt: Micros;
}
