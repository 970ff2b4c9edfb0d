/**
 * Actors: the named identities a key posts, claims and acks as (contract
 * docs/decisions.md#actors). Every key has a default actor named
 * after its agent label, created with the key. An actor belongs to the key
 * that created it: only that key may act as it or add aliases to it; anyone
 * may look it up or mention it.
 */
import type { Caller } from "../model/caller.js";
import type { ActorRecord, ActorRef } from "../model/actors.js";
import type { ChannelView } from "../model/channels.js";
import { hasNulChar, validateAlias, validateText } from "./channels.js";
import { nameKey } from "./labels.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import type { ActorStore } from "../ports/actors.js";

export interface CreateActorInput {
  name: string | undefined;
  description: string | undefined;
  metadata: { [key: string]: JsonValue } | undefined;
}

export const MAX_ACTOR_NAME_LENGTH = 200;
/** Same cap as message metadata (docs/decisions.md#size-limits). */
export const MAX_ACTOR_METADATA_BYTES = 16 * 1024;
/** Our own bound: bounds the one lookup query of a message's mentions. */
export const MAX_MENTIONS = 100;

const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;
const UUID_SHAPED = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DEFAULT_CACHE_SIZE = 10_000;

/** An actor name: required, non-blank, ≤ 200 characters, nothing invisible; stored verbatim. */
export function validateActorName(value: string | undefined, field = "name"): string {
  if (value === undefined || value.trim() === "") {
    throw new ApiError("missing_field", `'${field}' is required and must not be blank`, { details: { field } });
  }
  if ([...value].length > MAX_ACTOR_NAME_LENGTH || INVISIBLE.test(value)) {
    throw new ApiError("invalid_string", `'${field}' must be at most ${MAX_ACTOR_NAME_LENGTH} visible characters`, {
      details: { field },
      suggestion: "Use a short name without control, bidi or zero-width characters.",
    });
  }
  return value;
}

/** A reference to an actor given in a request (`actor` of a message, claim or ack). */
function validateActorRef(ref: string, field: string): string {
  if (ref.trim() === "" || hasNulChar(ref)) {
    throw new ApiError("invalid_string", `'${field}' must be a non-empty string without U+0000: an actor id, alias or name`, {
      details: { field },
    });
  }
  return ref;
}

const actorNotFound = (ref: string) => new ApiError("actor_not_found", `Actor '${ref}' not found`);
const actorForbidden = (ref: string) =>
  new ApiError("actor_forbidden", `Actor '${ref}' was created by another key; you may only act as your own actors`);

export class Actors {
  private readonly defaults = new Map<string, ActorRef>();

  constructor(
    private readonly store: ActorStore,
    /** Runs fn after the current transaction commits (at once outside one). */
    private readonly afterCommit: (fn: () => void) => void,
  ) {}

  /** The caller's default actor (cached per key in-process; it never changes). */
  async defaultActor(caller: Caller): Promise<ActorRef> {
    const cached = this.defaults.get(caller.keyId);
    if (cached) return cached;
    const found = await this.store.findDefault(caller.keyId);
    if (found) {
      this.remember(caller.keyId, found);
      return found;
    }
    // Keys get their default actor when minted (and migration 0002 backfilled
    // older keys); this only repairs a key that somehow has none.
    const ensured = await this.store.ensureDefault(caller);
    const ref = { id: ensured.id, name: ensured.name };
    // Cache only what is committed: a rolled-back insert must not be remembered.
    this.afterCommit(() => this.remember(caller.keyId, ref));
    return ref;
  }

  /**
   * For createMessage's `actor`: id or alias of an actor; 404 actor_not_found
   * when none, 403 actor_forbidden when it was created by another key.
   */
  async resolveOwn(caller: Caller, ref: string): Promise<ActorRef> {
    validateActorRef(ref, "actor");
    const actor = await this.store.findRef(ref);
    if (!actor) throw actorNotFound(ref);
    if (actor.createdByKeyId !== caller.keyId) throw actorForbidden(ref);
    return { id: actor.id, name: actor.name };
  }

  /**
   * For claim/ack/release `actor` (docs/decisions.md#actors): undefined → the default
   * actor; else the caller's actor with that id or alias, else the caller's
   * actor with that NAME (its default actor first, then the oldest); an id or
   * alias of another key's actor → 403 actor_forbidden; an unknown UUID →
   * 404 actor_not_found; any other unknown name creates an actor for the
   * caller. The caller's own names win over another key's alias, so nobody
   * can break a key's claims by registering its actor names as aliases.
   */
  async resolveForClaim(caller: Caller, ref: string | undefined): Promise<ActorRef> {
    if (ref === undefined) return this.defaultActor(caller);
    validateActorRef(ref, "actor");
    const byRef = await this.store.findRef(ref);
    if (byRef && byRef.createdByKeyId === caller.keyId) return { id: byRef.id, name: byRef.name };
    const byName = await this.store.findOwnByName(caller.keyId, ref);
    if (byName) return byName;
    if (byRef) throw actorForbidden(ref);
    if (UUID_SHAPED.test(ref)) throw actorNotFound(ref);
    const name = validateActorName(ref, "actor");
    return this.store.findOrCreateOwnByName({
      name,
      description: "",
      metadata: {},
      ownerId: caller.ownerId,
      createdByKeyId: caller.keyId,
    });
  }

  /**
   * For createMessage's `mentions`: each entry an actor id or alias (global);
   * kept only when the channel is open or the actor's creating key is the
   * owner or a member (so it can read the channel); de-duplicated, order kept;
   * unknown or ineligible entries silently dropped. Blank entries (or more
   * than MAX_MENTIONS) → 422 invalid_mentions. One query for the whole list.
   */
  async resolveMentions(refs: readonly string[], channel: ChannelView): Promise<ActorRef[]> {
    refs.forEach((ref, i) => {
      if (typeof ref !== "string" || ref.trim() === "") {
        throw new ApiError("invalid_mentions", `'mentions[${i}]' must be an actor id or alias, not a blank string`, {
          details: { field: "mentions" },
        });
      }
    });
    if (refs.length > MAX_MENTIONS) {
      throw new ApiError("invalid_mentions", `'mentions' may name at most ${MAX_MENTIONS} actors`, { details: { field: "mentions" } });
    }
    // A ref with U+0000 cannot name an actor (PostgreSQL text cannot hold it): dropped like any unknown ref.
    const candidates = [...new Set(refs)].filter((ref) => !hasNulChar(ref));
    if (candidates.length === 0) return [];
    return this.store.resolveMentions(candidates, channel);
  }

  /** POST /v1/actors: a new actor owned by the caller. */
  async create(caller: Caller, input: CreateActorInput): Promise<ActorRecord> {
    const name = validateActorName(input.name);
    const description = validateText(input.description ?? "", "description");
    const metadata = input.metadata ?? {};
    if (hasNulChar(metadata)) {
      throw new ApiError("invalid_object", "'metadata' must not contain the NUL character (U+0000)", { details: { field: "metadata" } });
    }
    const size = Buffer.byteLength(JSON.stringify(metadata));
    if (size > MAX_ACTOR_METADATA_BYTES) {
      throw new ApiError("metadata_too_large", `'metadata' is ${size} bytes; at most ${MAX_ACTOR_METADATA_BYTES} are allowed`, {
        details: { field: "metadata", max_metadata_bytes: MAX_ACTOR_METADATA_BYTES, received_bytes: size },
      });
    }
    return this.store.insert({
      name,
      description,
      metadata,
      ownerId: caller.ownerId,
      createdByKeyId: caller.keyId,
    });
  }

  /** GET /v1/actors/{identifier}: any key, by id or alias. */
  async get(identifier: string): Promise<ActorRecord> {
    const actor = await this.store.find(identifier);
    if (!actor) throw actorNotFound(identifier);
    return actor;
  }

  /**
   * POST /v1/actors/{actor_id}/aliases: only the key that created the actor.
   * Actor aliases are one global namespace (separate from channel aliases):
   * another actor's alias → 409 alias_conflict; the actor's own alias again →
   * 201 (idempotent).
   */
  async addAlias(caller: Caller, actorRef: string, alias: string | undefined): Promise<ActorRecord> {
    const valid = validateAlias(alias);
    const actor = await this.store.find(actorRef);
    if (!actor) throw actorNotFound(actorRef);
    if (actor.createdByKeyId !== caller.keyId) {
      throw new ApiError("actor_forbidden", "Only the key that created this actor may add aliases to it", {
        suggestion: "Add aliases to your own actors, or create one with POST /v1/actors.",
      });
    }
    const outcome = await this.store.addAlias(actor.id, valid, nameKey(valid));
    if (outcome === "conflict") {
      throw new ApiError("alias_conflict", `The alias '${valid}', or one that looks the same (case, spacing, full-width forms), is already taken`, { details: { alias: valid } });
    }
    if (!outcome) throw actorNotFound(actorRef);
    return outcome;
  }

  private remember(keyId: string, ref: ActorRef): void {
    this.defaults.set(keyId, ref);
    // Map iteration order is insertion order: the first entry is the oldest.
    if (this.defaults.size > DEFAULT_CACHE_SIZE) this.defaults.delete(this.defaults.keys().next().value as string);
  }
}
