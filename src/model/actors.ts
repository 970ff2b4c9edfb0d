/** Actors as stored and read back. */
import type { JsonValue } from "./json.js";
import type { Micros } from "./time.js";

/** An actor as messages, claims and acknowledgements name it. */
export interface ActorRef {
  id: string;
  name: string;
}

export interface ActorRecord {
  id: string;
  name: string;
  description: string;
  ownerId: string;
  createdByKeyId: string;
  metadata: { [key: string]: JsonValue };
  isDefault: boolean;
  /** Sorted by code point. */
  aliases: string[];
  createdAt: Micros;
  updatedAt: Micros;
}

/** An actor as the resolvers need it. */
export interface ActorOwnership extends ActorRef {
  createdByKeyId: string;
}

export interface NewActor {
  name: string;
  description: string;
  metadata: { [key: string]: JsonValue };
  ownerId: string;
  createdByKeyId: string;
}

/** The key a default actor belongs to and is named after. */
export interface KeyIdentity {
  keyId: string;
  agentLabel: string;
  ownerId: string;
}
