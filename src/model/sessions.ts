/** Shared sessions (docs/decisions.md#sessions). */
import type { JsonObject } from "./json.js";
import type { Micros } from "./time.js";

export interface SessionRecord {
  id: string;
  /** The key that created it: the owner (a later key with the same label is not). */
  ownerKeyId: string;
  /** That key's label, shown. */
  ownerId: string;
  name: string;
  state: JsonObject;
  version: number;
  ttlSeconds: number;
  createdAt: Micros;
  updatedAt: Micros;
  expiresAt: Micros;
}

/** A session as a given key sees it. */
export interface SessionView extends SessionRecord {
  /** The key is one of the session's members (it may also be the owner's). */
  callerIsMember: boolean;
}

export interface SessionMemberRecord {
  sessionId: string;
  keyId: string;
  addedAt: Micros;
}
