/** What the actor use cases need from storage. */
import type { ActorOwnership, ActorRecord, ActorRef, KeyIdentity, NewActor } from "../model/actors.js";

/** The parts of a channel that decide whose actors may be mentioned in it. */
export interface MentionScope {
  id: string;
  access: string;
  createdByKeyId: string;
}

export interface ActorStore {
  findDefault(keyId: string): Promise<ActorRef | undefined>;
  /** The key's default actor, created (named after its agent label) unless it has one. */
  ensureDefault(key: KeyIdentity): Promise<ActorRef & { created: boolean }>;
  /** The actor an id or alias names, with its creating key. */
  findRef(ref: string): Promise<ActorOwnership | undefined>;
  /** One of the key's actors by name: its default actor first, then the oldest. */
  findOwnByName(keyId: string, name: string): Promise<ActorRef | undefined>;
  /** The creating key's actor with this name, created when it has none; concurrent calls create one actor. */
  findOrCreateOwnByName(actor: NewActor): Promise<ActorRef>;
  insert(actor: NewActor): Promise<ActorRecord>;
  /** The full actor by id or alias. */
  find(identifier: string): Promise<ActorRecord | undefined>;
  /** The actors the refs (ids or aliases) name that may read the channel, in the order first named, de-duplicated. */
  resolveMentions(refs: readonly string[], channel: MentionScope): Promise<ActorRef[]>;
  /**
   * Adds an alias (one global namespace for actors) and returns the actor;
   * "conflict" when another actor holds it or a look-alike; undefined when the actor is gone.
   */
  addAlias(actorId: string, alias: string, aliasKey: string): Promise<ActorRecord | "conflict" | undefined>;
}
