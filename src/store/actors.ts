/** SQL for actors and their aliases (one global namespace, separate from channel aliases). */
import type { ActorOwnership, ActorRecord, ActorRef, KeyIdentity, NewActor } from "../model/actors.js";
import type { ActorStore, MentionScope } from "../ports/actors.js";
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { isUuid } from "../model/ids.js";
import { hasNul } from "./channels.js";
import { insertAlias, type AliasNamespace } from "./aliases.js";

const ACTOR_ALIASES: AliasNamespace = { aliasTable: "actor_aliases", ownerColumn: "actor_id", ownerTable: "actors" };

interface ActorRow {
  id: string;
  name: string;
  description: string;
  owner_id: string;
  created_by_key_id: string;
  metadata: { [key: string]: JsonValue };
  is_default: boolean;
  aliases: string[];
  created_at: Micros;
  updated_at: Micros;
}

const ACTOR_COLUMNS = `a.id, a.name, a.description, a.owner_id, a.created_by_key_id, a.metadata, a.is_default,
  COALESCE((SELECT array_agg(x.alias ORDER BY x.alias COLLATE "C") FROM actor_aliases x WHERE x.actor_id = a.id), '{}') AS aliases,
  a.created_at, a.updated_at`;

const toActorRecord = (row: ActorRow): ActorRecord => ({
  id: row.id,
  name: row.name,
  description: row.description,
  ownerId: row.owner_id,
  createdByKeyId: row.created_by_key_id,
  metadata: row.metadata,
  isDefault: row.is_default,
  aliases: row.aliases,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

/**
 * Creates the key's default actor (named after its agent label) unless it has
 * one; returns it either way. No unique violation is ever raised, so this is
 * safe inside a caller's transaction.
 */
export async function ensureDefaultActor(db: Db, key: KeyIdentity): Promise<ActorRef & { created: boolean }> {
  const inserted = await db.query<ActorRef>(
    `INSERT INTO actors (name, owner_id, created_by_key_id, is_default) VALUES ($1, $2, $3, true)
     ON CONFLICT (created_by_key_id) WHERE is_default DO NOTHING
     RETURNING id, name`,
    [key.agentLabel, key.ownerId, key.keyId],
  );
  const row = inserted.rows[0];
  if (row) return { id: row.id, name: row.name, created: true };
  const found = await findDefaultActor(db, key.keyId);
  if (!found) throw new Error(`default actor of key ${key.keyId} neither inserted nor found`);
  return { ...found, created: false };
}

export async function findDefaultActor(db: Db, keyId: string): Promise<ActorRef | undefined> {
  const { rows } = await db.query<ActorRef>("SELECT id, name FROM actors WHERE created_by_key_id = $1 AND is_default", [keyId]);
  return rows[0];
}

export async function insertActor(db: Db, actor: NewActor): Promise<ActorRecord> {
  const { rows } = await db.query<ActorRow>(
    `WITH a AS (
       INSERT INTO actors (name, description, metadata, owner_id, created_by_key_id) VALUES ($1, $2, $3::jsonb, $4, $5)
       RETURNING *
     )
     SELECT a.id, a.name, a.description, a.owner_id, a.created_by_key_id, a.metadata, a.is_default, '{}'::text[] AS aliases,
            a.created_at, a.updated_at
     FROM a`,
    [actor.name, actor.description, JSON.stringify(actor.metadata), actor.ownerId, actor.createdByKeyId],
  );
  const row = rows[0];
  if (!row) throw new Error("INSERT INTO actors returned no row");
  return toActorRecord(row);
}

/** The full actor by id or alias; undefined when none. */
export async function findActor(db: Db, identifier: string): Promise<ActorRecord | undefined> {
  if (hasNul(identifier)) return undefined;
  const { rows } = await db.query<ActorRow>(
    `SELECT ${ACTOR_COLUMNS} FROM actors a
     WHERE a.id = $1::uuid OR a.id = (SELECT x.actor_id FROM actor_aliases x WHERE x.alias = $2)
     LIMIT 1`,
    [isUuid(identifier) ? identifier : null, identifier],
  );
  const row = rows[0];
  return row && toActorRecord(row);
}

/** The actor an id or alias names, with its creating key; undefined when none. */
export async function findActorRef(db: Db, ref: string): Promise<ActorOwnership | undefined> {
  if (hasNul(ref)) return undefined;
  const { rows } = await db.query<{ id: string; name: string; created_by_key_id: string }>(
    `SELECT a.id, a.name, a.created_by_key_id FROM actors a
     WHERE a.id = $1::uuid OR a.id = (SELECT x.actor_id FROM actor_aliases x WHERE x.alias = $2)
     LIMIT 1`,
    [isUuid(ref) ? ref : null, ref],
  );
  const row = rows[0];
  return row && { id: row.id, name: row.name, createdByKeyId: row.created_by_key_id };
}

/** One of the key's actors by name: its default actor first, then the oldest. */
export async function findOwnActorByName(db: Db, keyId: string, name: string): Promise<ActorRef | undefined> {
  const { rows } = await db.query<ActorRef>(
    `SELECT id, name FROM actors WHERE created_by_key_id = $1 AND name = $2
     ORDER BY is_default DESC, created_at, id LIMIT 1`,
    [keyId, name],
  );
  return rows[0];
}

/**
 * Serialises "find or create the actor named X for key K" across
 * transactions, so two concurrent claims as a new name create one actor.
 * Held until the surrounding transaction ends.
 */
export async function lockActorName(db: Db, keyId: string, name: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", [JSON.stringify(["actor-name", keyId, name])]);
}

/**
 * The mentioned actors a channel's readers include, in the order first
 * mentioned: each ref is an actor id or alias; an actor is kept when the
 * channel is open, or its creating key owns the channel or is a member.
 * One query for the whole list.
 */
export async function resolveMentionRefs(
  db: Db,
  refs: readonly string[],
  channel: MentionScope,
): Promise<ActorRef[]> {
  const { rows } = await db.query<ActorRef>(
    `SELECT a.id, a.name
     FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(ref, ref_id, ord)
     JOIN actors a ON a.id = coalesce((SELECT x.id FROM actors x WHERE x.id = i.ref_id),
                                      (SELECT y.actor_id FROM actor_aliases y WHERE y.alias = i.ref))
     WHERE $3 = 'open'
        OR a.created_by_key_id = $4
        OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = $5::uuid AND m.key_id = a.created_by_key_id)
     ORDER BY i.ord`,
    [refs, refs.map((r) => (isUuid(r) ? r : null)), channel.access, channel.createdByKeyId, channel.id],
  );
  const seen = new Set<string>();
  return rows.filter((r) => (seen.has(r.id) ? false : (seen.add(r.id), true))).map((r) => ({ id: r.id, name: r.name }));
}

export class PgActorStore implements ActorStore {
  constructor(private readonly db: Db) {}

  findDefault(keyId: string): Promise<ActorRef | undefined> {
    return findDefaultActor(this.db, keyId);
  }

  ensureDefault(key: KeyIdentity): Promise<ActorRef & { created: boolean }> {
    return ensureDefaultActor(this.db, key);
  }

  findRef(ref: string): Promise<ActorOwnership | undefined> {
    return findActorRef(this.db, ref);
  }

  findOwnByName(keyId: string, name: string): Promise<ActorRef | undefined> {
    return findOwnActorByName(this.db, keyId, name);
  }

  findOrCreateOwnByName(actor: NewActor): Promise<ActorRef> {
    return this.db.transaction(async () => {
      await lockActorName(this.db, actor.createdByKeyId, actor.name);
      const raced = await findOwnActorByName(this.db, actor.createdByKeyId, actor.name);
      if (raced) return raced;
      const created = await insertActor(this.db, actor);
      return { id: created.id, name: created.name };
    });
  }

  insert(actor: NewActor): Promise<ActorRecord> {
    return insertActor(this.db, actor);
  }

  find(identifier: string): Promise<ActorRecord | undefined> {
    return findActor(this.db, identifier);
  }

  resolveMentions(refs: readonly string[], channel: MentionScope): Promise<ActorRef[]> {
    return resolveMentionRefs(this.db, refs, channel);
  }

  addAlias(actorId: string, alias: string, aliasKey: string): Promise<ActorRecord | "conflict" | undefined> {
    return this.db.transaction(async () => {
      const outcome = await insertAlias(this.db, ACTOR_ALIASES, actorId, alias, aliasKey);
      if (outcome === "conflict") return outcome;
      return findActor(this.db, actorId);
    });
  }
}
