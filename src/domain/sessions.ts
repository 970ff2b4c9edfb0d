/**
 * Shared sessions (issue 17, docs/decisions.md#sessions): a small JSON state
 * agents coordinate through. The key that created a session owns it (as
 * with channels, the key and not its label: a key minted later with a freed
 * label gets nothing) and may share it with other keys; owner and members
 * read and change the state, only the owner deletes it, changes its
 * ttl_seconds or changes who shares it.
 * Every change adds one to the version, which callers may name to make a
 * change compare-and-set. A session lives ttl_seconds after its last change.
 */
import { randomUUID } from "node:crypto";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import type { JsonObject } from "../model/json.js";
import type { SessionMemberRecord, SessionView } from "../model/sessions.js";
import { MICROS_PER_SECOND, type Clock, type Micros } from "../model/time.js";
import type { SessionStore } from "../ports/sessions.js";
import type { SecurityAudit } from "./audit.js";
import { validateText } from "./channels.js";
import { displayName } from "./labels.js";
import { requireActiveKeyId, validateKeyIdField } from "./membership.js";
import { formatTimeIdCursor, parseTimeIdCursor, validatePageLimit } from "./paging.js";

export const SESSION_LIMITS = {
  /** The state serialised as JSON. */
  maxStateBytes: 64 * 1024,
  maxNameLength: 128,
  ttlSeconds: { min: 300, max: 2_592_000, default: 86_400 },
  /** Live sessions per owner: storage one owner may take. */
  maxPerOwner: 1_000,
  maxMembers: 100,
} as const;

export interface SessionsOptions {
  clock: Clock;
  /** Session ids; random UUIDs unless a test names them. */
  newId?: () => string;
}

export interface NewSessionInput {
  name: string;
  state: JsonObject | undefined;
  ttlSeconds: number | undefined;
}

export interface SessionChange {
  state: JsonObject | undefined;
  /** Compare-and-set: the version the caller read. */
  expectedVersion: number | undefined;
  ttlSeconds: number | undefined;
}

export interface SessionsPage {
  data: SessionView[];
  limit: number;
  nextCursor: string | null;
}

const notFound = (id: string) =>
  new ApiError("session_not_found", `Session '${id.slice(0, 64)}' not found`, { details: { session_id: id.slice(0, 64) } });

export class Sessions {
  private readonly newId: () => string;

  constructor(
    private readonly store: SessionStore,
    private readonly audit: SecurityAudit,
    private readonly options: SessionsOptions,
  ) {
    this.newId = options.newId ?? randomUUID;
  }

  async create(caller: Caller, input: NewSessionInput): Promise<SessionView> {
    const name = validateText(displayName(input.name, "name", "invalid_string", SESSION_LIMITS.maxNameLength), "name");
    const state = checkStateSize(input.state ?? {});
    const ttlSeconds = validateTtl(input.ttlSeconds);
    const now = this.options.clock.now();
    const session = {
      id: this.newId(),
      ownerKeyId: caller.keyId,
      ownerId: caller.ownerId,
      name,
      state,
      version: 1,
      ttlSeconds,
      createdAt: now,
      updatedAt: now,
      expiresAt: expiry(now, ttlSeconds),
    };
    if ((await this.store.insert(session, now, SESSION_LIMITS.maxPerOwner)) === "limit_reached") {
      throw new ApiError("too_many_sessions", `A key may own at most ${SESSION_LIMITS.maxPerOwner} live sessions`, {
        details: { limit: SESSION_LIMITS.maxPerOwner },
      });
    }
    return { ...session, callerIsMember: false };
  }

  async list(caller: Caller, query: { cursor: string | undefined; limit: number | undefined }): Promise<SessionsPage> {
    const limit = validatePageLimit(query.limit);
    const after = parseTimeIdCursor(query.cursor, isUuid, "sessions");
    const data = await this.store.list(caller.keyId, this.options.clock.now(), after, limit);
    const last = data.at(-1);
    return { data, limit, nextCursor: data.length === limit && last ? formatTimeIdCursor(last) : null };
  }

  async get(caller: Caller, id: string): Promise<SessionView> {
    return this.visible(caller, id);
  }

  /**
   * Merges `state` into the session one top-level key at a time, under the
   * session's row lock: concurrent changes apply one after another, and
   * with expectedVersion only the one that read the current version wins.
   */
  async update(caller: Caller, id: string, change: SessionChange): Promise<SessionView> {
    if (change.expectedVersion !== undefined && (!Number.isInteger(change.expectedVersion) || change.expectedVersion < 1)) {
      throw new ApiError("invalid_field", "'expected_version' must be a positive integer: the version you read", { details: { field: "expected_version" } });
    }
    const ttlSeconds = change.ttlSeconds === undefined ? undefined : validateTtl(change.ttlSeconds);
    return this.store.atomically(async () => {
      const current = await this.visible(caller, id, true);
      // A member could otherwise end the session early by shortening its life:
      // deleting is the owner's, and so is how long the session lives.
      if (change.ttlSeconds !== undefined && current.ownerKeyId !== caller.keyId) {
        throw new ApiError("forbidden", "Only the session's owner may change its ttl_seconds", {
          details: { field: "ttl_seconds" },
          suggestion: "Send the change without ttl_seconds (every change already restarts the session's lifetime), or ask the owner to change it.",
        });
      }
      if (change.expectedVersion !== undefined && change.expectedVersion !== current.version) {
        throw new ApiError("version_conflict", `The session is at version ${current.version}, not ${change.expectedVersion}`, {
          details: { session_id: current.id, current_version: current.version, expected_version: change.expectedVersion },
        });
      }
      const state = checkStateSize({ ...current.state, ...(change.state ?? {}) });
      const now = this.options.clock.now();
      const ttl = ttlSeconds ?? current.ttlSeconds;
      const next = { state, version: current.version + 1, ttlSeconds: ttl, updatedAt: now, expiresAt: expiry(now, ttl) };
      await this.store.saveState(current.id, next);
      return { ...current, ...next };
    });
  }

  async delete(caller: Caller, id: string): Promise<void> {
    const session = await this.owned(caller, id);
    await this.store.delete(session.id);
  }

  async listMembers(caller: Caller, id: string): Promise<SessionMemberRecord[]> {
    const session = await this.visible(caller, id);
    return this.store.listMembers(session.id);
  }

  /** Shares the session with an active key (owner only); the existing row when it already is a member. */
  async addMember(caller: Caller, id: string, keyId: string | undefined): Promise<SessionMemberRecord> {
    const given = validateKeyIdField(keyId);
    const session = await this.owned(caller, id);
    const member = await requireActiveKeyId(given, (k) => this.store.isActiveKey(k));
    const outcome = await this.audit.change(
      () => this.store.addMember(session.id, member, this.options.clock.now(), SESSION_LIMITS.maxMembers),
      (result) =>
        typeof result === "object" && result.created
          ? [{ kind: "session.member_added", ownerKeyId: session.ownerKeyId, ownerId: session.ownerId, actorKeyId: caller.keyId, subject: session.id, details: { member_key_id: member } }]
          : [],
    );
    if (outcome === "gone") throw notFound(id);
    if (outcome === "limit_reached") {
      throw new ApiError("too_many_session_members", `A session may be shared with at most ${SESSION_LIMITS.maxMembers} keys`, {
        details: { limit: SESSION_LIMITS.maxMembers },
      });
    }
    return outcome.member;
  }

  /** Stops sharing with the key (owner only); fine when it was not a member. */
  async removeMember(caller: Caller, id: string, keyId: string): Promise<void> {
    if (keyId === "") throw new ApiError("missing_field", "'key_id' is required: the key_id of the member to remove", { details: { field: "key_id" } });
    const session = await this.owned(caller, id);
    await this.audit.change(
      () => this.store.removeMember(session.id, keyId),
      (removed) =>
        removed ? [{ kind: "session.member_removed", ownerKeyId: session.ownerKeyId, ownerId: session.ownerId, actorKeyId: caller.keyId, subject: session.id, details: { member_key_id: keyId } }] : [],
    );
  }

  /** The session when the caller's key owns it or was given it; 404 otherwise, as if it did not exist. */
  private async visible(caller: Caller, id: string, lock = false): Promise<SessionView> {
    if (!isUuid(id)) throw notFound(id);
    const session = await this.store.find(id, caller.keyId, this.options.clock.now(), lock);
    if (!session || (session.ownerKeyId !== caller.keyId && !session.callerIsMember)) throw notFound(id);
    return session;
  }

  private async owned(caller: Caller, id: string): Promise<SessionView> {
    const session = await this.visible(caller, id);
    if (session.ownerKeyId !== caller.keyId) {
      throw new ApiError("forbidden", "Only the session's owner may do this", { suggestion: "Use the key that created the session." });
    }
    return session;
  }
}

const expiry = (now: Micros, ttlSeconds: number): Micros => now + ttlSeconds * MICROS_PER_SECOND;

function validateTtl(value: number | undefined): number {
  const { min, max, default: byDefault } = SESSION_LIMITS.ttlSeconds;
  const ttl = value ?? byDefault;
  if (!Number.isInteger(ttl) || ttl < min || ttl > max) {
    throw new ApiError("invalid_ttl_seconds", `'ttl_seconds' must be an integer from ${min} to ${max}`, { details: { field: "ttl_seconds" } });
  }
  return ttl;
}

function checkStateSize(state: JsonObject): JsonObject {
  const bytes = Buffer.byteLength(JSON.stringify(state));
  if (bytes > SESSION_LIMITS.maxStateBytes) {
    throw new ApiError("state_too_large", `The state would be ${bytes} bytes of JSON; at most ${SESSION_LIMITS.maxStateBytes} are kept`, {
      details: { max_state_bytes: SESSION_LIMITS.maxStateBytes, state_bytes: bytes },
    });
  }
  return state;
}
