/** MembershipStore over Maps; member rows live in the FakeChannelStore, so channel lookups see them. */
import { randomUUID } from "node:crypto";
import type {
  AccessRequestRecord,
  AccessRequestStatus,
  ChannelEventRecord,
  ChannelEventType,
  InvitationRecord,
  MemberRecord,
  NewAccessRequest,
  NewInvitation,
} from "../../../src/model/membership.js";
import { MICROS_PER_SECOND, type Micros } from "../../../src/model/time.js";
import type { ChangeTime, MembershipStore } from "../../../src/ports/membership.js";
import type { FakeChannelStore } from "./channels.js";

type StoredInvitation = NewInvitation & { revokedAt: Micros | null; uses: number };

export class FakeMembershipStore implements MembershipStore {
  readonly activeKeys = new Set<string>();
  readonly invitations = new Map<string, StoredInvitation>();
  readonly requests = new Map<string, AccessRequestRecord>();
  readonly events: ChannelEventRecord[] = [];

  constructor(private readonly channels: FakeChannelStore) {}

  private read(stored: StoredInvitation): InvitationRecord | undefined {
    const channel = this.channels.channels.get(stored.channelId);
    if (!channel) return undefined;
    const creator = stored.createdByKeyId;
    return {
      id: stored.id,
      ownerId: stored.ownerId,
      createdByKeyId: creator,
      createdAt: stored.createdAt,
      expiresAt: stored.expiresAt,
      revokedAt: stored.revokedAt,
      channel: { id: channel.id, name: channel.name, mode: channel.mode, description: channel.description },
      channelOwnerKeyId: channel.createdByKeyId,
      channelOwnerId: channel.ownerId,
      uses: stored.uses,
      creatorMayInvite:
        this.activeKeys.has(creator) && (channel.access === "open" || channel.createdByKeyId === creator || this.channels.isMember(channel.id, creator)),
    };
  }

  private record(channelId: string, eventType: ChannelEventType, actorKeyId: string, subjectKeyId: string | null, invitationId: string | null, at: ChangeTime): void {
    const last = this.events.filter((e) => e.channelId === channelId).at(-1)?.createdAt ?? -Infinity;
    const createdAt = Math.max(at.now, last + 1);
    this.events.push({ id: randomUUID(), channelId, eventType, actorKeyId, subjectKeyId, invitationId, metadata: {}, createdAt, expiresAt: createdAt + at.eventTtlSeconds * MICROS_PER_SECOND });
  }

  private insertMember(channelId: string, keyId: string, now: Micros, via: string | null): { member: MemberRecord; created: boolean } {
    const key = `${channelId} ${keyId}`;
    const existing = this.channels.members.get(key);
    if (existing) return { member: existing, created: false };
    // The fake knows no key labels; the key id stands in for one.
    const member = { id: randomUUID(), channelId, keyId, agentLabel: keyId, grantedAt: now, grantedViaInvitationId: via };
    this.channels.members.set(key, member);
    return { member, created: true };
  }

  async listMembers(channelId: string): Promise<MemberRecord[]> {
    return [...this.channels.members.values()].filter((m) => m.channelId === channelId).sort((a, b) => a.grantedAt - b.grantedAt);
  }

  async isActiveKey(keyId: string): Promise<boolean> {
    return this.activeKeys.has(keyId);
  }

  async addMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<{ member: MemberRecord; created: boolean } | undefined> {
    if (!this.channels.channels.has(channelId)) return undefined;
    const added = this.insertMember(channelId, keyId, at.now, null);
    if (added.created) this.record(channelId, "member_added", byKeyId, keyId, null, at);
    return added;
  }

  async removeMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<boolean | undefined> {
    if (!this.channels.channels.has(channelId)) return undefined;
    const removed = this.channels.members.delete(`${channelId} ${keyId}`);
    if (removed) this.record(channelId, "member_removed", byKeyId, keyId, null, at);
    return removed;
  }

  async insertInvitation(invitation: NewInvitation): Promise<InvitationRecord | undefined> {
    if (!this.channels.channels.has(invitation.channelId)) return undefined;
    const stored = { ...invitation, revokedAt: null, uses: 0 };
    this.invitations.set(invitation.id, stored);
    return this.read(stored);
  }

  async findInvitation(id: string): Promise<InvitationRecord | undefined> {
    const stored = this.invitations.get(id);
    return stored && this.read(stored);
  }

  async listInvitations(channelId: string, after: { createdAt: Micros; id: string } | null, limit: number): Promise<InvitationRecord[]> {
    return [...this.invitations.values()]
      .filter((i) => i.channelId === channelId && (after === null || i.createdAt < after.createdAt || (i.createdAt === after.createdAt && i.id < after.id)))
      .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
      .slice(0, limit)
      .flatMap((i) => this.read(i) ?? []);
  }

  async resolveInvitation(
    channelId: string,
    invitationId: string,
    keyId: string,
    at: ChangeTime,
    admit: (invitation: InvitationRecord) => void,
  ): Promise<{ invitation: InvitationRecord; created: boolean } | undefined> {
    if (!this.channels.channels.has(channelId)) return undefined;
    const stored = this.invitations.get(invitationId);
    const invitation = stored && this.read(stored);
    if (!stored || !invitation) return undefined;
    admit(invitation);
    const { created } = this.insertMember(invitation.channel.id, keyId, at.now, invitation.id);
    this.record(invitation.channel.id, "invitation_resolved", keyId, keyId, invitation.id, at);
    if (created) {
      this.record(invitation.channel.id, "member_added", keyId, keyId, invitation.id, at);
      stored.uses++;
    }
    return { invitation, created };
  }

  async revokeInvitation(channelId: string, invitationId: string, byKeyId: string, at: ChangeTime): Promise<InvitationRecord | undefined> {
    if (!this.channels.channels.has(channelId)) return undefined;
    const stored = this.invitations.get(invitationId);
    if (!stored) return undefined;
    if (stored.revokedAt === null) {
      stored.revokedAt = at.now;
      this.record(channelId, "invitation_revoked", byKeyId, null, invitationId, at);
    }
    return this.read(stored);
  }

  async upsertPendingRequest(request: NewAccessRequest): Promise<{ id: string } | "gone" | "retry"> {
    if (!this.channels.channels.has(request.channelId)) return "gone";
    const pending = [...this.requests.values()].find(
      (r) => r.channelId === request.channelId && r.requesterKeyId === request.requesterKeyId && r.status === "pending",
    );
    if (pending) return { id: pending.id };
    const id = randomUUID();
    // The fake knows no key labels; the key id stands in for one.
    this.requests.set(id, { ...request, id, status: "pending", requesterLabel: request.requesterKeyId });
    return { id };
  }

  async listPendingRequests(channelId: string): Promise<AccessRequestRecord[]> {
    return [...this.requests.values()].filter((r) => r.channelId === channelId && r.status === "pending").sort((a, b) => a.createdAt - b.createdAt);
  }

  async decideRequest(
    channelId: string,
    requestId: string,
    decision: { status: "approved" | "denied"; byKeyId: string; at: ChangeTime },
  ): Promise<{ decided: AccessRequestRecord; memberAdded: boolean } | { current: AccessRequestStatus } | "not_found" | "channel_gone"> {
    if (!this.channels.channels.has(channelId)) return "channel_gone";
    const request = this.requests.get(requestId);
    if (!request || request.channelId !== channelId) return "not_found";
    if (request.status !== "pending") return { current: request.status };
    const decided = { ...request, status: decision.status };
    this.requests.set(requestId, decided);
    let memberAdded = false;
    if (decision.status === "approved") {
      const { created } = this.insertMember(channelId, request.requesterKeyId, decision.at.now, null);
      memberAdded = created;
      if (created) this.record(channelId, "member_added", decision.byKeyId, request.requesterKeyId, null, decision.at);
    }
    return { decided, memberAdded };
  }

  async listEvents(channelId: string, since: Micros | null, limit: number, now: Micros): Promise<ChannelEventRecord[]> {
    return this.events.filter((e) => e.channelId === channelId && e.createdAt > (since ?? -Infinity) && e.expiresAt > now).slice(0, limit);
  }
}
