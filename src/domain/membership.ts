/**
 * Who belongs to a channel and how they got in (issue 4;
 * docs/decisions.md#membership, #invitations, #owner-only): the owner's member
 * list, invitations, access requests, and the event log that records every
 * change. Each change and its event commit in one transaction.
 */
import { randomBytes } from "node:crypto";
import type { NewAuditEvent } from "../model/audit.js";
import type { Caller } from "../model/caller.js";
import type { SecurityAudit } from "./audit.js";
import type { AccessRequestRecord, ChannelEventRecord, InvitationRecord, MemberRecord } from "../model/membership.js";
import { assertCanUse, assertOwner, isOwner, namedChannel } from "./channel.js";
import type { ChannelView } from "../model/channels.js";
import { validateText } from "./channels.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import { parseCursor } from "./message-rules.js";
import { formatTimeIdCursor, parseTimeIdCursor, validatePageLimit, type TimeIdCursor } from "./paging.js";
import { FixedWindowLimiter } from "./rate-limit.js";
import { formatTimestamp, MICROS_PER_SECOND, type Clock, type Micros } from "../model/time.js";
import type { ChannelStore } from "../ports/channels.js";
import type { ChangeTime, MembershipStore } from "../ports/membership.js";

// ---------------------------------------------------------------------------
// Limits

/** Invitations expire 24 hours after creation (docs/decisions.md#invitations). */
export const INVITATION_TTL_SECONDS = 24 * 60 * 60;
/** Channel events stay readable for 24 hours. */
export const EVENT_TTL_SECONDS = 24 * 60 * 60;
/** Invitation lookups per source address and window. */
export const INVITATION_LOOKUP_LIMIT = { count: 10, windowMs: 60_000 } as const;
export const EVENTS_PAGE = { min: 1, max: 100, default: 50 } as const;
export const INVITATIONS_PAGE = { min: 1, max: 100, default: 50 } as const;
/** Our own bound: keeps the owner's pending list readable and bounded. */
export const MAX_REASON_LENGTH = 2000;
/** Longest key_id accepted before looking it up (key ids are ~19 characters). */
const MAX_KEY_ID_LENGTH = 256;
/** Longest invitation id looked up (ours are 24 characters). */
const MAX_INVITATION_ID_LENGTH = 256;

export const OPEN_CHANNEL_NOTE = "Channel is open; no access request needed — you can already read and post.";

// ---------------------------------------------------------------------------
// Records

export type InvitationState = "active" | "revoked" | "expired" | "invalidated";

/** An invitation as rendered, with its state judged against the clock. */
export interface InvitationView extends InvitationRecord {
  state: InvitationState;
  active: boolean;
}

export interface InvitationsPage {
  data: InvitationView[];
  limit: number;
  /** Set when the page is full (older invitations may follow). */
  nextCursor: string | null;
}

/**
 * Revoked and expired are final and win over invalidated; an invitation
 * whose creator lost the right to invite comes back should the right come
 * back (re-added as a member), as the rule is checked when resolving.
 */
export function invitationState(invitation: InvitationRecord, now: Micros): InvitationState {
  if (invitation.revokedAt !== null) return "revoked";
  if (invitation.expiresAt <= now) return "expired";
  return invitation.creatorMayInvite ? "active" : "invalidated";
}

export type AccessRequestOutcome =
  | { status: "pending"; requestId: string }
  | { status: "open"; note: string }
  | { status: "already_member" };

export interface AccessRequestDecision {
  status: "approved" | "denied";
  requestId: string;
  requesterKeyId: string;
}

export interface EventsQuery {
  since: string | undefined;
  limit: number | undefined;
}

export interface EventsPage {
  data: ChannelEventRecord[];
  limit: number;
  nextCursor: string | null;
}

// ---------------------------------------------------------------------------
// Validation

/** key_id of AddMember: required and non-blank (missing_field). */
export function validateKeyIdField(value: string | undefined): string {
  if (value === undefined || value.trim() === "") {
    throw new ApiError("missing_field", "'key_id' is required: the key_id of the API key to add", { details: { field: "key_id" } });
  }
  return value;
}

/**
 * A member to add must be an active key (422 invalid_key_id otherwise):
 * channels and sessions alike. Checked after the caller's right to add, so
 * a stranger learns nothing about which keys exist.
 */
export async function requireActiveKeyId(keyId: string, isActiveKey: (keyId: string) => Promise<boolean>): Promise<string> {
  if (keyId.length > MAX_KEY_ID_LENGTH || keyId.includes("\u0000") || !(await isActiveKey(keyId))) {
    throw new ApiError("invalid_key_id", `No active API key has key_id '${keyId.slice(0, MAX_KEY_ID_LENGTH)}'`, {
      details: { field: "key_id" },
      suggestion: "Send the key_id of an active key: the part of the key before the dot, as GET /v1/keys/me shows it.",
    });
  }
  return keyId;
}

/** An optional access-request reason: default "", stored verbatim (docs/decisions.md#strings-verbatim), at most MAX_REASON_LENGTH characters. */
export function validateReason(value: string | undefined): string {
  if (value === undefined) return "";
  if ([...value].length > MAX_REASON_LENGTH) {
    throw new ApiError("invalid_string", `'reason' must be at most ${MAX_REASON_LENGTH} characters`, {
      details: { field: "reason" },
      suggestion: "Shorten the reason; the owner reads it in the pending-request list.",
    });
  }
  return validateText(value, "reason");
}

/** limit of the events page: 1..100, default 50 (422 invalid_limit). */
export const validateEventsLimit = (limit: number | undefined): number => validatePageLimit(limit, EVENTS_PAGE);

/** limit of the invitations page: 1..100, default 50 (422 invalid_limit). */
export const validateInvitationsLimit = (limit: number | undefined): number => validatePageLimit(limit, INVITATIONS_PAGE);

const INVITATION_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The invitations cursor: "<created_at in µs>.<id>" of the previous page's last item. */
export const formatInvitationsCursor = (invitation: InvitationRecord): string => formatTimeIdCursor(invitation);

export const parseInvitationsCursor = (cursor: string | undefined): TimeIdCursor | null =>
  parseTimeIdCursor(cursor, (id) => INVITATION_ID.test(id), "invitations");

/** A new invitation id: 18 random bytes as url-safe base64 (24 characters), the link's secret. */
export const newInvitationId = (): string => randomBytes(18).toString("base64url");

/** A channel.member_added or channel.member_removed audit event, in the channel owner key's audit. */
function memberEvent(
  kind: "channel.member_added" | "channel.member_removed",
  channel: { id: string; ownerId: string; createdByKeyId: string },
  caller: Caller,
  memberKeyId: string,
  via: "owner" | "invitation" | "access_request",
  extra: Record<string, string> = {},
): NewAuditEvent {
  return { kind, ownerKeyId: channel.createdByKeyId, ownerId: channel.ownerId, actorKeyId: caller.keyId, subject: channel.id, details: { member_key_id: memberKeyId, via, ...extra } };
}

// ---------------------------------------------------------------------------
// Use cases

export class Membership {
  private readonly lookupLimiter: FixedWindowLimiter;

  constructor(
    private readonly store: MembershipStore,
    private readonly channels: ChannelStore,
    private readonly audit: SecurityAudit,
    private readonly clock: Clock,
  ) {
    this.lookupLimiter = new FixedWindowLimiter(INVITATION_LOOKUP_LIMIT.count, INVITATION_LOOKUP_LIMIT.windowMs, clock);
  }

  // --- Members (owner only) -------------------------------------------------

  async listMembers(caller: Caller, identifier: string): Promise<MemberRecord[]> {
    const channel = await this.ownedChannel(caller, identifier);
    return this.store.listMembers(channel.id);
  }

  /**
   * Grants membership to an active key; the existing row when it already is
   * a member. member_added is recorded only when a row is created.
   */
  async addMember(caller: Caller, identifier: string, keyId: string | undefined): Promise<MemberRecord> {
    const given = validateKeyIdField(keyId);
    const channel = await this.ownedChannel(caller, identifier);
    const valid = await requireActiveKeyId(given, (id) => this.store.isActiveKey(id));
    const added = await this.audit.change(
      () => this.store.addMember(channel.id, valid, caller.keyId, this.changeTime()),
      (result) => (result?.created ? [memberEvent("channel.member_added", channel, caller, valid, "owner")] : []),
    );
    if (!added) throw channelNotFound(identifier);
    return added.member;
  }

  /** Removes a member (not the owner); fine when it was not one. member_removed only when a row went. */
  async removeMember(caller: Caller, identifier: string, keyId: string): Promise<void> {
    // Over REST the path always carries one; a gRPC caller may leave it empty.
    if (keyId === "") {
      throw new ApiError("missing_field", "'key_id' is required: the key_id of the member to remove", { details: { field: "key_id" } });
    }
    const channel = await this.ownedChannel(caller, identifier);
    if (keyId === channel.createdByKeyId) {
      throw new ApiError("cannot_remove_owner", "The owner's key cannot be removed from its channel", { details: { key_id: keyId } });
    }
    if (keyId.includes("\u0000")) return;
    const removed = await this.audit.change(
      () => this.store.removeMember(channel.id, keyId, caller.keyId, this.changeTime()),
      (gone) => (gone === true ? [memberEvent("channel.member_removed", channel, caller, keyId, "owner")] : []),
    );
    if (removed === undefined) throw channelNotFound(identifier);
  }

  // --- Invitations ----------------------------------------------------------

  /** Any key that can use the channel: open → anyone, restricted → owner and members. Expires in 24 h. */
  async createInvitation(caller: Caller, identifier: string): Promise<InvitationView> {
    const channel = namedChannel(await this.channels.findView(identifier, caller.keyId), identifier);
    assertCanUse(channel, caller);
    const now = this.clock.now();
    const created = await this.store.insertInvitation({
      id: newInvitationId(),
      channelId: channel.id,
      ownerId: caller.ownerId,
      createdByKeyId: caller.keyId,
      createdAt: now,
      expiresAt: now + INVITATION_TTL_SECONDS * MICROS_PER_SECOND,
    });
    if (!created) throw channelNotFound(identifier);
    return this.view(created, now);
  }

  /**
   * Resolves an invitation: limited per source address (checked first), then
   * 404 / 410 revoked / 410 expired; on success the caller becomes a member
   * (idempotent; invitations are multi-use) and invitation_resolved is
   * recorded, plus member_added when a member row was created.
   */
  /**
   * What the invitation leads to, without following it: the channel's name, mode and description and the
   * invitation's state. Whoever holds the link may see that much (resolving would show it too); the
   * look-up counts against the same per-address limit as resolving, so previews cannot be used to guess ids.
   */
  async previewInvitation(_caller: Caller, invitationId: string, clientAddress: string): Promise<Pick<InvitationView, "channel" | "state" | "expiresAt">> {
    this.limitLookups(clientAddress);
    const found = await this.findInvitation(invitationId);
    const { channel, state, expiresAt } = this.view(found, this.clock.now());
    return { channel, state, expiresAt };
  }

  private limitLookups(clientAddress: string): void {
    const decision = this.lookupLimiter.hit(clientAddress);
    if (!decision.allowed) {
      throw new ApiError("rate_limit_exceeded", `Too many invitation lookups from this address; at most ${INVITATION_LOOKUP_LIMIT.count} per minute`, {
        details: { retry_after: decision.retryAfterSeconds },
        headers: { "Retry-After": String(decision.retryAfterSeconds) },
      });
    }
  }

  async resolveInvitation(caller: Caller, invitationId: string, clientAddress: string): Promise<InvitationView> {
    this.limitLookups(clientAddress);
    const found = await this.findInvitation(invitationId);
    const at = this.changeTime();
    const now = at.now;
    // The audit belongs to the channel's owner key, which may not be the invitation's creator.
    const channelOwner = { id: found.channel.id, createdByKeyId: found.channelOwnerKeyId, ownerId: found.channelOwnerId };
    const resolve = () => this.store.resolveInvitation(found.channel.id, invitationId, caller.keyId, at, (invitation) => {
      if (invitation.revokedAt !== null) {
        throw new ApiError("invitation_revoked", undefined, { details: { invitation_id: invitation.id } });
      }
      if (invitation.expiresAt <= now) {
        throw new ApiError("invitation_expired", undefined, { details: { invitation_id: invitation.id } });
      }
      // Checked here, not when the right is taken away, so every way of
      // losing it (removal, key revocation, the channel turning restricted,
      // and any added later) ends the invitation without its own bookkeeping.
      if (!invitation.creatorMayInvite) {
        throw new ApiError("invitation_invalidated", undefined, { details: { invitation_id: invitation.id } });
      }
    });
    const resolved = await this.audit.change(resolve, (result) =>
      result?.created
        ? // Not the invitation's id: it is the link's secret, and the audit is readable with channels:read.
          [memberEvent("channel.member_added", channelOwner, caller, caller.keyId, "invitation", { invited_by_key_id: found.createdByKeyId })]
        : [],
    );
    if (!resolved) throw invitationNotFound();
    const { invitation, created } = resolved;
    return this.view(created ? { ...invitation, uses: invitation.uses + 1 } : invitation, now);
  }

  /**
   * Its creator or the channel owner; others 403 forbidden, except that
   * a stranger to a restricted channel gets channel_access_denied first.
   * Idempotent, keeping the first revoked_at.
   */
  async revokeInvitation(caller: Caller, invitationId: string): Promise<InvitationView> {
    const found = await this.findInvitation(invitationId);
    if (caller.keyId !== found.createdByKeyId && caller.keyId !== found.channelOwnerKeyId) {
      const channel = await this.channels.findView(found.channel.id, caller.keyId);
      // By id: one channel or none.
      if (!channel) throw invitationNotFound();
      assertCanUse(channel, caller);
      throw new ApiError("forbidden", "Only the invitation's creator or the channel owner may revoke it", {
        suggestion: "Use the key that created the invitation or the key that owns the channel.",
      });
    }
    const at = this.changeTime();
    const revoked = await this.store.revokeInvitation(found.channel.id, found.id, caller.keyId, at);
    if (!revoked) throw invitationNotFound();
    return this.view(revoked, at.now);
  }

  /** The channel's invitations, newest first, every state included (owner only). */
  async listInvitations(caller: Caller, identifier: string, query: { cursor: string | undefined; limit: number | undefined }): Promise<InvitationsPage> {
    const limit = validateInvitationsLimit(query.limit);
    const after = parseInvitationsCursor(query.cursor);
    const channel = await this.ownedChannel(caller, identifier);
    const now = this.clock.now();
    const data = (await this.store.listInvitations(channel.id, after, limit)).map((i) => this.view(i, now));
    const last = data.at(-1);
    return { data, limit, nextCursor: data.length === limit && last ? formatInvitationsCursor(last) : null };
  }

  // --- Access requests -----------------------------------------------------

  /**
   * Open channel → "open"; owner or member → "already_member"; otherwise the
   * pending request (a repeat, even a concurrent one, gets the same id).
   */
  async requestAccess(caller: Caller, identifier: string, reason: string | undefined): Promise<AccessRequestOutcome> {
    const valid = validateReason(reason);
    for (let attempt = 0; ; attempt++) {
      const channel = namedChannel(await this.channels.findView(identifier, caller.keyId), identifier);
      if (channel.access === "open") return { status: "open", note: OPEN_CHANNEL_NOTE };
      if (channel.callerIsMember || isOwner(channel, caller)) return { status: "already_member" };
      const outcome = await this.store.upsertPendingRequest({ channelId: channel.id, requesterKeyId: caller.keyId, reason: valid, createdAt: this.clock.now() });
      if (outcome === "gone") throw channelNotFound(identifier);
      if (outcome !== "retry") return { status: "pending", requestId: outcome.id };
      // The pending request we collided with was decided in between: look again
      // (approved → already a member; denied → file a new one).
      if (attempt >= 3) throw new Error("access request: pending request kept changing under a repeat");
    }
  }

  /** Pending requests, oldest first (owner only). */
  async listAccessRequests(caller: Caller, identifier: string): Promise<AccessRequestRecord[]> {
    const channel = await this.ownedChannel(caller, identifier);
    return this.store.listPendingRequests(channel.id);
  }

  /**
   * Approves or denies a pending request (owner only). Checks: channel 404 →
   * owner 403 → request of this channel 404 → pending 409. Approval makes the
   * requester a member (member_added when a row was created).
   */
  async decideAccessRequest(caller: Caller, identifier: string, requestId: string, status: "approved" | "denied"): Promise<AccessRequestDecision> {
    const channel = await this.ownedChannel(caller, identifier);
    if (!isUuid(requestId)) throw accessRequestNotFound(requestId);
    const result = await this.audit.change(
      () => this.store.decideRequest(channel.id, requestId, { status, byKeyId: caller.keyId, at: this.changeTime() }),
      (outcome) =>
        typeof outcome === "object" && "decided" in outcome && outcome.memberAdded
          ? [memberEvent("channel.member_added", channel, caller, outcome.decided.requesterKeyId, "access_request", { access_request_id: outcome.decided.id })]
          : [],
    );
    if (result === "channel_gone") throw channelNotFound(identifier);
    if (result === "not_found") throw accessRequestNotFound(requestId);
    if ("current" in result) {
      throw new ApiError("access_request_resolved", `Access request already ${result.current}`, {
        details: { access_request_id: requestId, status: result.current },
      });
    }
    return { status, requestId: result.decided.id, requesterKeyId: result.decided.requesterKeyId };
  }

  // --- Events (owner only) -------------------------------------------------

  /** Live events after `since`, oldest first; next_cursor = last created_at, else the given since (null when none). */
  async listEvents(caller: Caller, identifier: string, query: EventsQuery): Promise<EventsPage> {
    const limit = validateEventsLimit(query.limit);
    const since = parseCursor("since", query.since);
    const channel = await this.ownedChannel(caller, identifier);
    const data = await this.store.listEvents(channel.id, since, limit, this.clock.now());
    const last = data.at(-1);
    const given = query.since === undefined || query.since === "" ? null : query.since;
    return { data, limit, nextCursor: last ? formatTimestamp(last.createdAt) : given };
  }

  // --- Helpers -------------------------------------------------------------

  private async ownedChannel(caller: Caller, identifier: string): Promise<ChannelView> {
    const channel = namedChannel(await this.channels.findView(identifier, caller.keyId), identifier);
    assertOwner(channel, caller);
    return channel;
  }

  private async findInvitation(invitationId: string): Promise<InvitationRecord> {
    if (invitationId === "" || invitationId.length > MAX_INVITATION_ID_LENGTH || invitationId.includes("\u0000")) throw invitationNotFound();
    const found = await this.store.findInvitation(invitationId);
    if (!found) throw invitationNotFound();
    return found;
  }

  private changeTime(): ChangeTime {
    return { now: this.clock.now(), eventTtlSeconds: EVENT_TTL_SECONDS };
  }

  private view(invitation: InvitationRecord, now: Micros): InvitationView {
    const state = invitationState(invitation, now);
    return { ...invitation, state, active: state === "active" };
  }
}

const channelNotFound = (identifier: string) => new ApiError("channel_not_found", `Channel '${identifier}' not found`);
const invitationNotFound = () => new ApiError("invitation_not_found");
const accessRequestNotFound = (requestId: string) =>
  new ApiError("access_request_not_found", `No access request '${requestId}' on this channel`, { details: { access_request_id: requestId } });
