/** What the sessions use case needs from storage (sessions, session_members). */
import type { JsonObject } from "../model/json.js";
import type { SessionMemberRecord, SessionRecord, SessionView } from "../model/sessions.js";
import type { Micros } from "../model/time.js";

export interface SessionStore {
  /** Runs fn in one transaction (a savepoint inside one). */
  atomically<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Inserts the session unless its owner key already has `maxPerOwner` live
   * ones; owners are serialised, so concurrent creates cannot overshoot.
   */
  insert(session: SessionRecord, now: Micros, maxPerOwner: number): Promise<"inserted" | "limit_reached">;
  /** A live session as keyId sees it; `lock` holds its row until the transaction ends. */
  find(id: string, keyId: string, now: Micros, lock?: boolean): Promise<SessionView | undefined>;
  /** Live sessions keyId owns or was given, newest first, after the previous page's last (createdAt, id). */
  list(keyId: string, now: Micros, after: { createdAt: Micros; id: string } | null, limit: number): Promise<SessionView[]>;
  saveState(id: string, change: { state: JsonObject; version: number; ttlSeconds: number; updatedAt: Micros; expiresAt: Micros }): Promise<void>;
  delete(id: string): Promise<void>;
  isActiveKey(keyId: string): Promise<boolean>;
  listMembers(sessionId: string): Promise<SessionMemberRecord[]>;
  /**
   * Adds the member unless it is one or the session has `maxMembers`; the
   * member row either way, "limit_reached", or "gone" when the session was
   * deleted or expired meanwhile.
   */
  addMember(sessionId: string, keyId: string, at: Micros, maxMembers: number): Promise<{ member: SessionMemberRecord; created: boolean } | "limit_reached" | "gone">;
  /** True when a member row went. */
  removeMember(sessionId: string, keyId: string): Promise<boolean>;
}
