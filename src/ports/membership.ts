/**
 * What the membership use cases need from storage. Every change that
 * records a channel event is one method: the change and its event commit
 * together, under the channel's membership lock.
 */
import type {
  AccessRequestRecord,
  AccessRequestStatus,
  ChannelEventRecord,
  InvitationRecord,
  MemberRecord,
  NewAccessRequest,
  NewInvitation,
} from "../model/membership.js";
import type { Micros } from "../model/time.js";

/** When a change happens, and how long the events it records stay readable. */
export interface ChangeTime {
  now: Micros;
  eventTtlSeconds: number;
}

export interface MembershipStore {
  /** The channel's members (the owner's row included), by granted_at. */
  listMembers(channelId: string): Promise<MemberRecord[]>;
  /** True when an API key with this id exists and is not revoked. */
  isActiveKey(keyId: string): Promise<boolean>;
  /** Adds the member unless it is one (member_added by byKeyId when a row is created); undefined when the channel is gone. */
  addMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<{ member: MemberRecord; created: boolean } | undefined>;
  /** Removes the member (member_removed when a row went); true when one went, undefined when the channel is gone. */
  removeMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<boolean | undefined>;

  /** undefined when the channel is gone. */
  insertInvitation(invitation: NewInvitation): Promise<InvitationRecord | undefined>;
  findInvitation(id: string): Promise<InvitationRecord | undefined>;
  /** Newest first, after the (createdAt, id) of the previous page's last item. */
  listInvitations(channelId: string, after: { createdAt: Micros; id: string } | null, limit: number): Promise<InvitationRecord[]>;
  /**
   * Under the membership lock of channelId, reads the invitation again and
   * hands it to `admit`, which throws to refuse it (nothing is written);
   * then makes keyId a member through it: invitation_resolved always,
   * member_added and one more use when a member row was created. `invitation`
   * is as read before that use was counted. undefined when the channel or the
   * invitation is gone.
   */
  resolveInvitation(
    channelId: string,
    invitationId: string,
    keyId: string,
    at: ChangeTime,
    admit: (invitation: InvitationRecord) => void,
  ): Promise<{ invitation: InvitationRecord; created: boolean } | undefined>;
  /** Revokes unless revoked already (invitation_revoked when this call did), and returns it; undefined when gone. */
  revokeInvitation(channelId: string, invitationId: string, byKeyId: string, at: ChangeTime): Promise<InvitationRecord | undefined>;

  /**
   * Files a pending request, or finds the one already pending for the
   * requester; "gone" when the channel is, "retry" when the pending one
   * it collided with was decided before it could be read.
   */
  upsertPendingRequest(request: NewAccessRequest): Promise<{ id: string } | "gone" | "retry">;
  /** Pending requests of the channel, oldest first. */
  listPendingRequests(channelId: string): Promise<AccessRequestRecord[]>;
  /**
   * Decides a pending request of the channel; approval makes the requester a
   * member (member_added and the channel webhook's notice when a row is
   * created). "channel_gone" when the channel is.
   */
  decideRequest(
    channelId: string,
    requestId: string,
    decision: { status: "approved" | "denied"; byKeyId: string; at: ChangeTime },
  ): Promise<{ decided: AccessRequestRecord; memberAdded: boolean } | { current: AccessRequestStatus } | "not_found" | "channel_gone">;

  /** Live events of the channel created after `since` (everything when null), oldest first. */
  listEvents(channelId: string, since: Micros | null, limit: number, now: Micros): Promise<ChannelEventRecord[]>;
}
