/** SQL for sessions and session_members (0021_sessions.sql). */
import type { JsonObject } from "../model/json.js";
import type { SessionMemberRecord, SessionRecord, SessionView } from "../model/sessions.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { SessionStore } from "../ports/sessions.js";
import type { Db } from "./db.js";
import { isActiveKey } from "./membership.js";

interface SessionRow {
  id: string;
  owner_key_id: string;
  owner_id: string;
  name: string;
  state: JsonObject;
  version: number;
  ttl_seconds: number;
  created_at: Micros;
  updated_at: Micros;
  expires_at: Micros;
  is_member: boolean;
}

interface MemberRow {
  session_id: string;
  key_id: string;
  added_at: Micros;
}

/** $2: the key the session is seen by. */
const SESSION_FIELDS = `s.id, s.owner_key_id, s.owner_id, s.name, s.state, s.version, s.ttl_seconds, s.created_at, s.updated_at, s.expires_at,
  EXISTS (SELECT 1 FROM session_members m WHERE m.session_id = s.id AND m.key_id = $2) AS is_member`;

const toView = (r: SessionRow): SessionView => ({
  id: r.id,
  ownerKeyId: r.owner_key_id,
  ownerId: r.owner_id,
  name: r.name,
  state: r.state,
  version: r.version,
  ttlSeconds: r.ttl_seconds,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  expiresAt: r.expires_at,
  callerIsMember: r.is_member,
});

const toMember = (r: MemberRow): SessionMemberRecord => ({ sessionId: r.session_id, keyId: r.key_id, addedAt: r.added_at });

export class PgSessionStore implements SessionStore {
  constructor(private readonly db: Db) {}

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  insert(session: SessionRecord, now: Micros, maxPerOwner: number): Promise<"inserted" | "limit_reached"> {
    return this.db.transaction(async () => {
      // One owner's creates queue here, so the count below cannot be stale.
      await this.db.query("SELECT pg_advisory_xact_lock(hashtextextended('sessions:' || $1, 0))", [session.ownerKeyId]);
      const { rows } = await this.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM sessions WHERE owner_key_id = $1 AND expires_at > $2",
        [session.ownerKeyId, formatTimestamp(now)],
      );
      if ((rows[0]?.n ?? 0) >= maxPerOwner) return "limit_reached";
      await this.db.query(
        `INSERT INTO sessions (id, owner_key_id, owner_id, name, state, version, ttl_seconds, created_at, updated_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
        [
          session.id,
          session.ownerKeyId,
          session.ownerId,
          session.name,
          JSON.stringify(session.state),
          session.version,
          session.ttlSeconds,
          formatTimestamp(session.createdAt),
          formatTimestamp(session.updatedAt),
          formatTimestamp(session.expiresAt),
        ],
      );
      return "inserted";
    });
  }

  async find(id: string, keyId: string, now: Micros, lock = false): Promise<SessionView | undefined> {
    const { rows } = await this.db.query<SessionRow>(
      `SELECT ${SESSION_FIELDS} FROM sessions s WHERE s.id = $1 AND s.expires_at > $3${lock ? " FOR UPDATE OF s" : ""}`,
      [id, keyId, formatTimestamp(now)],
    );
    return rows[0] && toView(rows[0]);
  }

  async list(keyId: string, now: Micros, after: { createdAt: Micros; id: string } | null, limit: number): Promise<SessionView[]> {
    // Two indexed branches, each already in page order (owned: sessions_by_owner;
    // shared: session_members_by_key), merged and cut to the page.
    // $2 is the key, as SESSION_FIELDS expects.
    const page = `s.expires_at > $1 AND ($3::timestamptz IS NULL OR (s.created_at, s.id) < ($3::timestamptz, $4::uuid))`;
    const { rows } = await this.db.query<SessionRow>(
      `SELECT * FROM (
         (SELECT ${SESSION_FIELDS} FROM sessions s WHERE s.owner_key_id = $2 AND ${page} ORDER BY s.created_at DESC, s.id DESC LIMIT $5)
         UNION
         (SELECT ${SESSION_FIELDS} FROM session_members m JOIN sessions s ON s.id = m.session_id
           WHERE m.key_id = $2 AND ${page} ORDER BY s.created_at DESC, s.id DESC LIMIT $5)
       ) both_kinds ORDER BY created_at DESC, id DESC LIMIT $5`,
      [formatTimestamp(now), keyId, after ? formatTimestamp(after.createdAt) : null, after?.id ?? null, limit],
    );
    return rows.map(toView);
  }

  async saveState(id: string, change: { state: JsonObject; version: number; ttlSeconds: number; updatedAt: Micros; expiresAt: Micros }): Promise<void> {
    await this.db.query("UPDATE sessions SET state = $2, version = $3, ttl_seconds = $4, updated_at = $5, expires_at = $6 WHERE id = $1", [
      id,
      JSON.stringify(change.state),
      change.version,
      change.ttlSeconds,
      formatTimestamp(change.updatedAt),
      formatTimestamp(change.expiresAt),
    ]);
  }

  async delete(id: string): Promise<void> {
    await this.db.query("DELETE FROM sessions WHERE id = $1", [id]);
  }

  isActiveKey(keyId: string): Promise<boolean> {
    return isActiveKey(this.db, keyId);
  }

  async listMembers(sessionId: string): Promise<SessionMemberRecord[]> {
    const { rows } = await this.db.query<MemberRow>(
      "SELECT session_id, key_id, added_at FROM session_members WHERE session_id = $1 ORDER BY added_at, key_id",
      [sessionId],
    );
    return rows.map(toMember);
  }

  addMember(sessionId: string, keyId: string, at: Micros, maxMembers: number): Promise<{ member: SessionMemberRecord; created: boolean } | "limit_reached" | "gone"> {
    return this.db.transaction(async () => {
      // The session row is the lock that serialises its member changes; deleted or expired since it was read, it is gone.
      const locked = await this.db.query("SELECT 1 FROM sessions WHERE id = $1 AND expires_at > $2 FOR UPDATE", [sessionId, formatTimestamp(at)]);
      if (locked.rows.length === 0) return "gone";
      const existing = await this.db.query<MemberRow>("SELECT session_id, key_id, added_at FROM session_members WHERE session_id = $1 AND key_id = $2", [
        sessionId,
        keyId,
      ]);
      if (existing.rows[0]) return { member: toMember(existing.rows[0]), created: false };
      const { rows: count } = await this.db.query<{ n: number }>("SELECT count(*)::int AS n FROM session_members WHERE session_id = $1", [sessionId]);
      if ((count[0]?.n ?? 0) >= maxMembers) return "limit_reached";
      const { rows } = await this.db.query<MemberRow>(
        "INSERT INTO session_members (session_id, key_id, added_at) VALUES ($1, $2, $3) RETURNING session_id, key_id, added_at",
        [sessionId, keyId, formatTimestamp(at)],
      );
      return { member: toMember(rows[0] as MemberRow), created: true };
    });
  }

  async removeMember(sessionId: string, keyId: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM session_members WHERE session_id = $1 AND key_id = $2", [sessionId, keyId]);
    return (rowCount ?? 0) > 0;
  }
}
