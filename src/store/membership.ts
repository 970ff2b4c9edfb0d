/**
 * SQL for membership: members, invitations, access requests and channel
 * events. Every "now" is a parameter (the injected clock). Nothing here
 * raises a unique violation: inserts that may collide use ON CONFLICT, so
 * they are safe inside a caller's transaction.
 *
 * Locking: a transaction that changes membership or records an event first
 * takes the channel's membership lock (lockMembership), then touches rows.
 * That one order everywhere keeps these transactions free of deadlocks, and
 * serialises a channel's events so each is stamped after the previous one.
 */
import type { ChannelMode } from "../model/channels.js";
import type { JsonValue } from "../model/json.js";
import type {
  AccessRequestRecord,
  AccessRequestStatus,
  ChannelEventRecord,
  ChannelEventType,
  InvitationRecord,
  MemberRecord,
  NewAccessRequest,
  NewInvitation,
} from "../model/membership.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { ChangeTime, MembershipStore } from "../ports/membership.js";
import type { Db } from "./db.js";
import { enqueueMemberAdded } from "./webhooks.js";

/**
 * Namespace of the per-channel membership locks (the two-int4 form of
 * pg_advisory_xact_lock, so it cannot collide with the bigint locks used
 * elsewhere); the second int is a hash of the channel id. Two channels whose
 * ids hash alike merely wait for each other.
 */
const MEMBERSHIP_LOCK_SPACE = 0x61626d62; // "abmb"

/**
 * Takes the channel's membership lock until the transaction ends, and holds
 * the channel row against deletion (FOR KEY SHARE does not block message
 * writers). False when the channel is gone. Must run inside a transaction.
 */
export async function lockMembership(db: Db, channelId: string): Promise<boolean> {
  await db.query("SELECT pg_advisory_xact_lock($1::int4, hashtext($2::text))", [MEMBERSHIP_LOCK_SPACE, channelId], "membership_lock");
  return holdChannel(db, channelId);
}

/** Holds the channel row against deletion until the transaction ends; false when it is gone. */
async function holdChannel(db: Db, channelId: string): Promise<boolean> {
  const { rowCount } = await db.query("SELECT 1 FROM channels WHERE id = $1 FOR KEY SHARE", [channelId], "membership_hold_channel");
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------
// Members

interface MemberRow {
  id: string;
  channel_id: string;
  key_id: string;
  granted_at: Micros;
  granted_via_invitation_id: string | null;
  agent_label: string | null;
}

const MEMBER_COLUMNS = `m.id, m.channel_id, m.key_id, m.granted_at, m.granted_via_invitation_id,
  (SELECT k.agent_label FROM api_keys k WHERE k.key_id = m.key_id) AS agent_label`;

const toMember = (r: MemberRow): MemberRecord => ({
  id: r.id,
  channelId: r.channel_id,
  keyId: r.key_id,
  agentLabel: r.agent_label ?? "",
  grantedAt: r.granted_at,
  grantedViaInvitationId: r.granted_via_invitation_id,
});

/** The channel's members (the owner's row included), by granted_at. */
export async function listMembers(db: Db, channelId: string): Promise<MemberRecord[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM channel_members m WHERE m.channel_id = $1 ORDER BY m.granted_at, m.key_id COLLATE "C"`,
    [channelId],
  );
  return rows.map(toMember);
}

/** Adds a member unless the key already is one; `created` tells which. */
export async function insertMember(
  db: Db,
  channelId: string,
  keyId: string,
  grantedAt: Micros,
  viaInvitationId: string | null,
): Promise<{ member: MemberRecord; created: boolean }> {
  const { rows } = await db.query<MemberRow>(
    `INSERT INTO channel_members AS m (channel_id, key_id, granted_at, granted_via_invitation_id)
     VALUES ($1, $2, $3, $4)
     ON CONFLICT (channel_id, key_id) DO NOTHING
     RETURNING ${MEMBER_COLUMNS}`,
    [channelId, keyId, formatTimestamp(grantedAt), viaInvitationId],
  );
  const inserted = rows[0];
  if (inserted) return { member: toMember(inserted), created: true };
  // A fresh statement sees the row even when it committed after the INSERT's snapshot.
  const existing = await db.query<MemberRow>(`SELECT ${MEMBER_COLUMNS} FROM channel_members m WHERE m.channel_id = $1 AND m.key_id = $2`, [
    channelId,
    keyId,
  ]);
  const row = existing.rows[0];
  // Callers hold the membership lock, so nothing removes the row in between.
  if (!row) throw new Error("channel_members: conflicting row vanished under the membership lock");
  return { member: toMember(row), created: false };
}

/** Removes a member; true when a row was removed. */
export async function deleteMember(db: Db, channelId: string, keyId: string): Promise<boolean> {
  const { rowCount } = await db.query("DELETE FROM channel_members WHERE channel_id = $1 AND key_id = $2", [channelId, keyId]);
  return (rowCount ?? 0) > 0;
}

/** True when an API key with this id exists and is not revoked. */
export async function isActiveKey(db: Db, keyId: string): Promise<boolean> {
  const { rowCount } = await db.query("SELECT 1 FROM api_keys WHERE key_id = $1 AND revoked_at IS NULL", [keyId]);
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------
// Invitations

interface InvitationRow {
  id: string;
  channel_id: string;
  owner_id: string;
  created_by_key_id: string;
  created_at: Micros;
  expires_at: Micros;
  revoked_at: Micros | null;
  channel_name: string;
  channel_mode: ChannelMode;
  channel_description: string;
  channel_owner_key_id: string;
  channel_owner_id: string;
  uses: number;
  creator_may_invite: boolean;
}

/**
 * creator_may_invite repeats the rule of createInvitation (an active key
 * that can use the channel) against the present state, so whatever takes
 * that right away (removal, key revocation, the channel turning restricted)
 * also ends the invitations the key created.
 */
const INVITATION_COLUMNS = `i.id, i.channel_id, i.owner_id, i.created_by_key_id, i.created_at, i.expires_at, i.revoked_at, i.uses,
  c.name AS channel_name, c.mode AS channel_mode, c.description AS channel_description, c.created_by_key_id AS channel_owner_key_id,
  c.owner_id AS channel_owner_id,
  (EXISTS (SELECT 1 FROM api_keys k WHERE k.key_id = i.created_by_key_id AND k.revoked_at IS NULL)
   AND (c.access = 'open' OR c.created_by_key_id = i.created_by_key_id
        OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.key_id = i.created_by_key_id))) AS creator_may_invite`;

const toInvitation = (r: InvitationRow): InvitationRecord => ({
  id: r.id,
  ownerId: r.owner_id,
  createdByKeyId: r.created_by_key_id,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  channel: { id: r.channel_id, name: r.channel_name, mode: r.channel_mode, description: r.channel_description },
  channelOwnerKeyId: r.channel_owner_key_id,
  channelOwnerId: r.channel_owner_id,
  uses: r.uses,
  creatorMayInvite: r.creator_may_invite,
});

/**
 * Inserts an invitation to the channel; undefined when the channel is gone
 * (FOR KEY SHARE waits for a concurrent delete and then skips the row, so a
 * racing delete is a miss, not a foreign-key error).
 */
export async function insertInvitation(
  db: Db,
  invitation: NewInvitation,
): Promise<InvitationRecord | undefined> {
  const { rows } = await db.query<InvitationRow>(
    `WITH c AS (
       SELECT id, name, mode, access, description, created_by_key_id, owner_id FROM channels WHERE id = $2 FOR KEY SHARE
     ), i AS (
       INSERT INTO channel_invitations (id, channel_id, owner_id, created_by_key_id, created_at, expires_at)
       SELECT $1, c.id, $3, $4, $5, $6 FROM c
       RETURNING *
     )
     SELECT ${INVITATION_COLUMNS} FROM i JOIN c ON c.id = i.channel_id`,
    [
      invitation.id,
      invitation.channelId,
      invitation.ownerId,
      invitation.createdByKeyId,
      formatTimestamp(invitation.createdAt),
      formatTimestamp(invitation.expiresAt),
    ],
  );
  const row = rows[0];
  return row && toInvitation(row);
}

/** The invitation with its channel; undefined when none. */
export async function findInvitation(db: Db, id: string): Promise<InvitationRecord | undefined> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM channel_invitations i JOIN channels c ON c.id = i.channel_id WHERE i.id = $1`,
    [id],
    "find_invitation",
  );
  const row = rows[0];
  return row && toInvitation(row);
}

/**
 * The channel's invitations, newest first, after the (created_at, id) of the
 * previous page's last item (NULL for the newest).
 */
export async function listInvitations(
  db: Db,
  channelId: string,
  after: { createdAt: Micros; id: string } | null,
  limit: number,
): Promise<InvitationRecord[]> {
  const { rows } = await db.query<InvitationRow>(
    `SELECT ${INVITATION_COLUMNS} FROM channel_invitations i JOIN channels c ON c.id = i.channel_id
     WHERE i.channel_id = $1 AND ($2::timestamptz IS NULL OR (i.created_at, i.id) < ($2::timestamptz, $3::text))
     ORDER BY i.created_at DESC, i.id DESC
     LIMIT $4`,
    [channelId, after && formatTimestamp(after.createdAt), after?.id ?? null, limit],
    "list_invitations",
  );
  return rows.map(toInvitation);
}

/** Counts a key that became a member through the invitation. */
export async function countInvitationUse(db: Db, id: string): Promise<void> {
  await db.query("UPDATE channel_invitations SET uses = uses + 1 WHERE id = $1", [id]);
}

/** Sets revoked_at unless it is set already; true when this call revoked it. */
export async function revokeInvitation(db: Db, id: string, now: Micros): Promise<boolean> {
  const { rowCount } = await db.query("UPDATE channel_invitations SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", [
    id,
    formatTimestamp(now),
  ]);
  return (rowCount ?? 0) > 0;
}

// ---------------------------------------------------------------------------
// Access requests

interface AccessRequestRow {
  id: string;
  channel_id: string;
  requester_key_id: string;
  reason: string;
  status: AccessRequestStatus;
  created_at: Micros;
  requester_label: string | null;
}

const REQUEST_COLUMNS = `r.id, r.channel_id, r.requester_key_id, r.reason, r.status, r.created_at,
  (SELECT k.agent_label FROM api_keys k WHERE k.key_id = r.requester_key_id) AS requester_label`;

const toAccessRequest = (r: AccessRequestRow): AccessRequestRecord => ({
  id: r.id,
  channelId: r.channel_id,
  requesterKeyId: r.requester_key_id,
  requesterLabel: r.requester_label ?? "",
  reason: r.reason,
  status: r.status,
  createdAt: r.created_at,
});

/**
 * Files a pending request, or finds the one already pending for this
 * requester (one per channel and requester, by a partial unique index, so
 * concurrent repeats converge on one row). "gone" when the channel was
 * deleted; "retry" in the rare case that the pending request it collided
 * with was decided before it could be read.
 */
export async function upsertPendingRequest(
  db: Db,
  request: NewAccessRequest,
): Promise<{ id: string } | "gone" | "retry"> {
  const { rows } = await db.query<{ id: string | null; channel_exists: boolean }>(
    `WITH c AS (
       SELECT id FROM channels WHERE id = $1 FOR KEY SHARE
     ), ins AS (
       INSERT INTO access_requests (channel_id, requester_key_id, reason, created_at)
       SELECT c.id, $2, $3, $4 FROM c
       ON CONFLICT (channel_id, requester_key_id) WHERE status = 'pending' DO NOTHING
       RETURNING id
     )
     SELECT (SELECT id FROM ins)::text AS id, EXISTS (SELECT 1 FROM c) AS channel_exists`,
    [request.channelId, request.requesterKeyId, request.reason, formatTimestamp(request.createdAt)],
  );
  const row = rows[0];
  if (!row?.channel_exists) return "gone";
  if (row.id !== null) return { id: row.id };
  const pending = await db.query<{ id: string }>(
    "SELECT id::text AS id FROM access_requests WHERE channel_id = $1 AND requester_key_id = $2 AND status = 'pending'",
    [request.channelId, request.requesterKeyId],
  );
  const existing = pending.rows[0];
  return existing ? { id: existing.id } : "retry";
}

/** Pending requests of the channel, oldest first. */
export async function listPendingRequests(db: Db, channelId: string): Promise<AccessRequestRecord[]> {
  const { rows } = await db.query<AccessRequestRow>(
    `SELECT ${REQUEST_COLUMNS} FROM access_requests r
     WHERE r.channel_id = $1 AND r.status = 'pending'
     ORDER BY r.created_at, r.id`,
    [channelId],
  );
  return rows.map(toAccessRequest);
}

/**
 * Decides a pending request of the channel. The row lock makes exactly one
 * of two concurrent decisions match; the other re-checks after the first
 * commits, matches nothing and is told the status it found.
 */
export async function decideRequest(
  db: Db,
  channelId: string,
  requestId: string,
  decision: { status: "approved" | "denied"; byKeyId: string; at: Micros },
): Promise<{ decided: AccessRequestRecord } | { current: AccessRequestStatus } | "not_found"> {
  const { rows } = await db.query<AccessRequestRow>(
    `UPDATE access_requests r SET status = $3, resolved_at = $4, resolved_by_key_id = $5
     WHERE r.id = $1 AND r.channel_id = $2 AND r.status = 'pending'
     RETURNING ${REQUEST_COLUMNS}`,
    [requestId, channelId, decision.status, formatTimestamp(decision.at), decision.byKeyId],
  );
  const decided = rows[0];
  if (decided) return { decided: toAccessRequest(decided) };
  const found = await db.query<{ status: AccessRequestStatus }>("SELECT status FROM access_requests WHERE id = $1 AND channel_id = $2", [
    requestId,
    channelId,
  ]);
  const current = found.rows[0];
  return current ? { current: current.status } : "not_found";
}

// ---------------------------------------------------------------------------
// Channel events

interface EventRow {
  id: string;
  channel_id: string;
  event_type: ChannelEventType;
  actor_key_id: string;
  subject_key_id: string | null;
  invitation_id: string | null;
  metadata: { [key: string]: JsonValue };
  created_at: Micros;
  expires_at: Micros;
}

const EVENT_COLUMNS = "e.id, e.channel_id, e.event_type, e.actor_key_id, e.subject_key_id, e.invitation_id, e.metadata, e.created_at, e.expires_at";

const toEvent = (r: EventRow): ChannelEventRecord => ({
  id: r.id,
  channelId: r.channel_id,
  eventType: r.event_type,
  actorKeyId: r.actor_key_id,
  subjectKeyId: r.subject_key_id,
  invitationId: r.invitation_id,
  metadata: r.metadata,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
});

/**
 * Records an event, stamped greatest(now, the channel's previous event + 1 µs)
 * so created_at is unique per channel and follows commit order. The caller
 * must hold the channel's membership lock (lockMembership).
 */
export async function insertEvent(
  db: Db,
  event: {
    channelId: string;
    eventType: ChannelEventType;
    actorKeyId: string;
    subjectKeyId: string | null;
    invitationId: string | null;
    now: Micros;
    ttlSeconds: number;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO channel_events (channel_id, event_type, actor_key_id, subject_key_id, invitation_id, created_at, expires_at)
     SELECT $1, $2, $3, $4, $5, s.at, s.at + make_interval(secs => $7)
     FROM (SELECT greatest($6::timestamptz,
                           (SELECT max(e.created_at) FROM channel_events e WHERE e.channel_id = $1) + interval '1 microsecond') AS at) s`,
    [event.channelId, event.eventType, event.actorKeyId, event.subjectKeyId, event.invitationId, formatTimestamp(event.now), event.ttlSeconds],
    "insert_channel_event",
  );
}

/** Live events of the channel created after `since` (everything when null), oldest first. */
export async function listEvents(db: Db, channelId: string, since: Micros | null, limit: number, now: Micros): Promise<ChannelEventRecord[]> {
  const { rows } = await db.query<EventRow>(
    `SELECT ${EVENT_COLUMNS} FROM channel_events e
     WHERE e.channel_id = $1 AND e.created_at > $2::timestamptz AND e.expires_at > $4::timestamptz
     ORDER BY e.created_at
     LIMIT $3`,
    [channelId, since === null ? "-infinity" : formatTimestamp(since), limit, formatTimestamp(now)],
    "list_channel_events",
  );
  return rows.map(toEvent);
}

export class PgMembershipStore implements MembershipStore {
  /** `onChange` hears of every change to a channel's members, at once and at commit. */
  constructor(
    private readonly db: Db,
    private readonly onChange: () => void = () => {},
  ) {}

  private changed<T>(change: Promise<T>): Promise<T> {
    return this.db.announceChange(change, this.onChange);
  }

  listMembers(channelId: string): Promise<MemberRecord[]> {
    return listMembers(this.db, channelId);
  }

  isActiveKey(keyId: string): Promise<boolean> {
    return isActiveKey(this.db, keyId);
  }

  addMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<{ member: MemberRecord; created: boolean } | undefined> {
    return this.changed(this.db.transaction(async () => {
      if (!(await lockMembership(this.db, channelId))) return undefined;
      const added = await insertMember(this.db, channelId, keyId, at.now, null);
      if (added.created) await this.record(channelId, "member_added", byKeyId, keyId, null, at);
      return added;
    }));
  }

  removeMember(channelId: string, keyId: string, byKeyId: string, at: ChangeTime): Promise<boolean | undefined> {
    return this.changed(this.db.transaction(async () => {
      if (!(await lockMembership(this.db, channelId))) return undefined;
      const removed = await deleteMember(this.db, channelId, keyId);
      if (removed) await this.record(channelId, "member_removed", byKeyId, keyId, null, at);
      return removed;
    }));
  }

  insertInvitation(invitation: NewInvitation): Promise<InvitationRecord | undefined> {
    return insertInvitation(this.db, invitation);
  }

  findInvitation(id: string): Promise<InvitationRecord | undefined> {
    return findInvitation(this.db, id);
  }

  listInvitations(channelId: string, after: { createdAt: Micros; id: string } | null, limit: number): Promise<InvitationRecord[]> {
    return listInvitations(this.db, channelId, after, limit);
  }

  resolveInvitation(
    channelId: string,
    invitationId: string,
    keyId: string,
    at: ChangeTime,
    admit: (invitation: InvitationRecord) => void,
  ): Promise<{ invitation: InvitationRecord; created: boolean } | undefined> {
    return this.changed(this.db.transaction(async () => {
      if (!(await lockMembership(this.db, channelId))) return undefined;
      // Read again under the lock: a revoke that committed meanwhile counts.
      const invitation = await findInvitation(this.db, invitationId);
      if (!invitation) return undefined;
      admit(invitation);
      const target = invitation.channel.id;
      const { created } = await insertMember(this.db, target, keyId, at.now, invitation.id);
      await this.record(target, "invitation_resolved", keyId, keyId, invitation.id, at);
      if (created) {
        await this.record(target, "member_added", keyId, keyId, invitation.id, at);
        await countInvitationUse(this.db, invitation.id);
      }
      return { invitation, created };
    }));
  }

  revokeInvitation(channelId: string, invitationId: string, byKeyId: string, at: ChangeTime): Promise<InvitationRecord | undefined> {
    return this.db.transaction(async () => {
      if (!(await lockMembership(this.db, channelId))) return undefined;
      if (await revokeInvitation(this.db, invitationId, at.now)) {
        await this.record(channelId, "invitation_revoked", byKeyId, null, invitationId, at);
      }
      return findInvitation(this.db, invitationId);
    });
  }

  upsertPendingRequest(request: NewAccessRequest): Promise<{ id: string } | "gone" | "retry"> {
    return this.db.transaction(() => upsertPendingRequest(this.db, request));
  }

  listPendingRequests(channelId: string): Promise<AccessRequestRecord[]> {
    return listPendingRequests(this.db, channelId);
  }

  decideRequest(
    channelId: string,
    requestId: string,
    decision: { status: "approved" | "denied"; byKeyId: string; at: ChangeTime },
  ): Promise<{ decided: AccessRequestRecord; memberAdded: boolean } | { current: AccessRequestStatus } | "not_found" | "channel_gone"> {
    return this.changed(this.db.transaction(async () => {
      if (!(await lockMembership(this.db, channelId))) return "channel_gone";
      const now = decision.at.now;
      const result = await decideRequest(this.db, channelId, requestId, { status: decision.status, byKeyId: decision.byKeyId, at: now });
      if (result === "not_found" || "current" in result) return result;
      let memberAdded = false;
      if (decision.status === "approved") {
        const requester = result.decided.requesterKeyId;
        const { created } = await insertMember(this.db, channelId, requester, now, null);
        memberAdded = created;
        if (created) {
          await this.record(channelId, "member_added", decision.byKeyId, requester, null, decision.at);
          // The channel's webhook hears of the approval; queued in this transaction.
          await enqueueMemberAdded(this.db, { channelId, memberKeyId: requester, approvedByKeyId: decision.byKeyId }, now);
        }
      }
      return { ...result, memberAdded };
    }));
  }

  listEvents(channelId: string, since: Micros | null, limit: number, now: Micros): Promise<ChannelEventRecord[]> {
    return listEvents(this.db, channelId, since, limit, now);
  }

  private record(
    channelId: string,
    eventType: ChannelEventType,
    actorKeyId: string,
    subjectKeyId: string | null,
    invitationId: string | null,
    at: ChangeTime,
  ): Promise<void> {
    return insertEvent(this.db, { channelId, eventType, actorKeyId, subjectKeyId, invitationId, now: at.now, ttlSeconds: at.eventTtlSeconds });
  }
}
