/** SQL for channels: lookup by id, alias or owned name on behalf of a caller, create, delete, aliases, pause; discovery and update have their own files. */
import type { Caller } from "../model/caller.js";
import type { ChannelLookup, ChannelResource, ChannelSummary, ChannelView, LockedChannel, NewChannel, RelatedChannelRef } from "../model/channels.js";
import type { ChannelStore, ChannelUpdate } from "../ports/channels.js";
import type { Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { isUuid } from "../model/ids.js";
import { deleteAlias, insertAlias, type AliasNamespace } from "./aliases.js";
import { discoverChannels } from "./channel-discovery.js";
import { CHANNEL_COLUMNS, toChannelRecord, type ChannelRow } from "./channel-rows.js";
import { lockChannel, updateChannel } from "./channel-update.js";

const CHANNEL_ALIASES: AliasNamespace = { aliasTable: "channel_aliases", ownerColumn: "channel_id", ownerTable: "channels" };

/** PostgreSQL text cannot hold U+0000: such an identifier names nothing (and must not reach a query). */
export const hasNul = (text: string): boolean => text.includes("\u0000");

/**
 * The one rule for what a `{identifier}` names (docs/decisions.md#channel-names), as the CTE
 * `named(id)`: the channel with that id; else the channel holding that alias; else the newest
 * channel the caller's key created under that name (a key may give many channels one name).
 * Parameters: $1 the identifier when it is a UUID (else null), $2 the identifier, $3 the caller's
 * key id (null: no names resolve). Each branch is one index probe: the primary key,
 * channel_aliases' primary key, and the first entry of channels_by_owner_key_and_name (ordered
 * newest first within a name, so a key with thousands of channels of one name costs no sort).
 */
const NAMED_CHANNELS = `named_candidates AS (
    SELECT c.id, 1 AS precedence FROM channels c WHERE c.id = $1::uuid
    UNION ALL
    SELECT a.channel_id, 2 FROM channel_aliases a WHERE a.alias = $2
    UNION ALL
    (SELECT c.id, 3 FROM channels c WHERE c.created_by_key_id = $3 AND c.name = $2
     ORDER BY c.created_at DESC, c.id DESC LIMIT 1)
  ), named AS (
    SELECT id FROM named_candidates WHERE precedence = (SELECT min(precedence) FROM named_candidates)
  )`;

/** NAMED_CHANNELS' first three parameters for an identifier. */
const namedParams = (identifier: string, callerKeyId: string | null): [string | null, string, string | null] => [
  isUuid(identifier) ? identifier : null,
  identifier,
  callerKeyId,
];

/** The one row a look-up finds, or undefined. */
function oneNamed<R extends { id: string }, T extends ChannelView>(rows: R[], toFound: (row: R) => T): ChannelLookup<T> {
  const first = rows[0];
  return first === undefined ? undefined : toFound(first);
}

/** The caller's standing in the channel: owner or a member row. $3 is the caller's key id. */
const IS_MEMBER = `(c.created_by_key_id = $3 OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.key_id = $3)) AS is_member`;

/** The channel the identifier names for the caller. Exported for the query-plan test. */
export const CHANNEL_VIEW_SQL = `WITH ${NAMED_CHANNELS}
  SELECT ${CHANNEL_COLUMNS}, ${IS_MEMBER}
  FROM named JOIN channels c ON c.id = named.id`;

/** The channel the identifier names, with the caller's membership, or undefined when none. */
export async function findChannelView(db: Db, identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelView>> {
  if (hasNul(identifier)) return undefined;
  const { rows } = await db.query<ChannelRow & { is_member: boolean }>(
    CHANNEL_VIEW_SQL,
    namedParams(identifier, callerKeyId),
    "channel_view",
  );
  return oneNamed(rows, (row) => ({ ...toChannelRecord(row), callerIsMember: row.is_member }));
}

// ---------------------------------------------------------------------------
// Create, render, discover, update, delete, aliases (issue 3)

/** The channel's aliases (sorted by code point) and related channels ({id, name, mode}, sorted by name), as two columns. */
const CHANNEL_EXTRAS = `
  COALESCE((SELECT array_agg(a.alias ORDER BY a.alias COLLATE "C") FROM channel_aliases a WHERE a.channel_id = c.id), '{}') AS aliases,
  COALESCE((SELECT json_agg(json_build_object('id', r.id, 'name', r.name, 'mode', r.mode) ORDER BY r.name COLLATE "C", r.id)
            FROM channel_links l JOIN channels r ON r.id = l.related_channel_id
            WHERE l.channel_id = c.id), '[]'::json) AS related_channels`;

interface ChannelExtrasRow {
  aliases: string[];
  related_channels: RelatedChannelRef[];
}

const toResource = (row: ChannelRow & ChannelExtrasRow): ChannelResource => ({
  ...toChannelRecord(row),
  aliases: row.aliases,
  relatedChannels: row.related_channels,
});

/**
 * Serialises channel creation so that created_at (UNIQUE, the discovery
 * cursor) is strictly increasing in commit order: a channel committed after
 * a discovery page was read is always newer than that page, so paging never
 * repeats or skips one. The lock is transaction-scoped: held until commit.
 */
const CHANNEL_CREATE_LOCK = "7018141376633893235"; // "agentbus" as a 64-bit integer

/**
 * Inserts a validated channel with the caller as owner and first member, and
 * its links. Must run inside a transaction (the advisory lock is held until
 * it commits). Returns the new id.
 */
export async function insertChannel(db: Db, channel: NewChannel, relatedIds: readonly string[], owner: Caller, maxOwned: number | null = null): Promise<string | "quota_exceeded"> {
  await db.query("SELECT pg_advisory_xact_lock($1::bigint)", [CHANNEL_CREATE_LOCK]);
  if (maxOwned !== null) {
    // Creates are serialised by the lock: the count cannot be stale.
    const { rows } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM channels WHERE created_by_key_id = $1", [owner.keyId], "owned_channels");
    if ((rows[0]?.n ?? 0) >= maxOwned) return "quota_exceeded";
  }
  const { rows } = await db.query<{ id: string }>(
    `WITH stamp AS (
       SELECT greatest(clock_timestamp(), (SELECT max(created_at) FROM channels) + interval '1 microsecond') AS at
     ), created AS (
       INSERT INTO channels (name, mode, access, discoverable, description, owner_id, created_by_key_id, metadata_schema,
                             pinned_message, webhook_url, webhook_secret, ttl_seconds, retention_days, max_messages,
                             max_writes_per_minute, max_deliveries, dead_letter_channel_id, created_at, updated_at,
                             group_concurrency, dispatch, priority_aging_seconds, limit_ids, a2a, a2a_forward)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12, $13, $14, $15, $17, $18, stamp.at, stamp.at,
         $19, $20, $21, $22::uuid[], $23::jsonb, $24::jsonb FROM stamp
       RETURNING id, created_at
     ), member AS (
       -- The owner's membership dates from the channel's creation, so it lists first.
       INSERT INTO channel_members (channel_id, key_id, granted_at) SELECT id, $7, created_at FROM created
     ), links AS (
       INSERT INTO channel_links (channel_id, related_channel_id)
       SELECT created.id, r.id FROM created JOIN channels r ON r.id = ANY($16::uuid[])
     )
     SELECT id FROM created`,
    [
      channel.name,
      channel.mode,
      channel.access,
      channel.discoverable,
      channel.description,
      owner.ownerId,
      owner.keyId,
      JSON.stringify(channel.metadataSchema),
      channel.pinnedMessage,
      channel.webhookUrl,
      channel.webhookSecret,
      channel.ttlSeconds,
      channel.retentionDays,
      channel.maxMessages,
      channel.maxWritesPerMinute,
      relatedIds,
      channel.maxDeliveries,
      channel.deadLetterChannelId,
      channel.groupConcurrency,
      channel.dispatch,
      channel.priorityAgingSeconds,
      channel.limitIds,
      channel.a2a === null ? null : JSON.stringify(channel.a2a),
      channel.a2aForward === null ? null : JSON.stringify(channel.a2aForward),
    ],
  );
  const id = rows[0]?.id;
  if (id === undefined) throw new Error("INSERT INTO channels returned no row");
  return id;
}

/** The full channel resource by id; undefined when none. */
export async function loadChannelResource(db: Db, id: string): Promise<ChannelResource | undefined> {
  if (!isUuid(id)) return undefined;
  const { rows } = await db.query<ChannelRow & ChannelExtrasRow>(
    `SELECT ${CHANNEL_COLUMNS}, ${CHANNEL_EXTRAS} FROM channels c WHERE c.id = $1`,
    [id],
  );
  const row = rows[0];
  return row && toResource(row);
}

/** findChannelView plus aliases and related channels, in one query (GET). */
export async function findChannelResource(
  db: Db,
  identifier: string,
  callerKeyId: string,
): Promise<ChannelLookup<ChannelResource & ChannelView>> {
  if (hasNul(identifier)) return undefined;
  const { rows } = await db.query<ChannelRow & ChannelExtrasRow & { is_member: boolean }>(
    `WITH ${NAMED_CHANNELS}
     SELECT ${CHANNEL_COLUMNS}, ${CHANNEL_EXTRAS}, ${IS_MEMBER}
     FROM named JOIN channels c ON c.id = named.id`,
    namedParams(identifier, callerKeyId),
  );
  return oneNamed(rows, (row) => ({ ...toResource(row), callerIsMember: row.is_member }));
}

/** For each ref (channel id or alias), the channel id it names, or null; in input order. */
export async function resolveChannelRefs(db: Db, refs: readonly string[]): Promise<Array<string | null>> {
  const { rows } = await db.query<{ id: string | null }>(
    `SELECT coalesce((SELECT c.id FROM channels c WHERE c.id = i.ref_id),
                     (SELECT a.channel_id FROM channel_aliases a WHERE a.alias = i.ref))::text AS id
     FROM unnest($1::text[], $2::uuid[]) WITH ORDINALITY AS i(ref, ref_id, ord)
     ORDER BY i.ord`,
    [refs, refs.map((ref) => (isUuid(ref) ? ref : null))],
  );
  return rows.map((r) => r.id);
}

/** Discoverable channels, newest first, created before `before` when given; is_member for the caller. */
/** Which channels a summary page lists: the discoverable ones, or the caller's own and those it is a member of. */
/** Deletes the channel; every table that references it cascades. */
export async function deleteChannel(db: Db, id: string): Promise<void> {
  await db.query("DELETE FROM channels WHERE id = $1", [id]);
}

/**
 * Sets paused on the channel named by id or alias (the operator has no key,
 * so no name resolves); returns its id, or undefined when there is none. The channel row is locked like a write
 * locks it, so a message being posted either commits before the pause or
 * sees it. updated_at moves only when the value changes, so pausing a
 * paused channel changes nothing.
 */
export async function setChannelPaused(db: Db, identifier: string, paused: boolean): Promise<string | undefined> {
  if (hasNul(identifier)) return undefined;
  const { rows } = await db.query<{ id: string }>(
    `WITH ${NAMED_CHANNELS}, target AS (
       SELECT c.id, c.paused FROM channels c
       WHERE c.id = (SELECT id FROM named LIMIT 1)
       FOR NO KEY UPDATE
     ), changed AS (
       UPDATE channels c SET paused = $4, updated_at = greatest(clock_timestamp(), c.updated_at + interval '1 microsecond')
       FROM target t WHERE c.id = t.id AND t.paused <> $4
     )
     SELECT id FROM target`,
    [...namedParams(identifier, null), paused],
  );
  return rows[0]?.id;
}

export class PgChannelStore implements ChannelStore {
  /** `onChange` hears of every change to a channel (settings, aliases, pause, deletion), at once and at commit. */
  constructor(
    private readonly db: Db,
    private readonly onChange: () => void = () => {},
  ) {}

  private changed<T>(change: Promise<T>): Promise<T> {
    return this.db.announceChange(change, this.onChange);
  }

  findView(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelView>> {
    return findChannelView(this.db, identifier, callerKeyId);
  }

  findResource(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelResource & ChannelView>> {
    return findChannelResource(this.db, identifier, callerKeyId);
  }

  resolveRefs(refs: readonly string[]): Promise<Array<string | null>> {
    return resolveChannelRefs(this.db, refs);
  }

  create(channel: NewChannel, relatedIds: readonly string[], owner: Caller, maxOwned: number | null = null): Promise<ChannelResource | "quota_exceeded" | undefined> {
    return this.changed(
      this.db.transaction(async () => {
        const id = await insertChannel(this.db, channel, relatedIds, owner, maxOwned);
        return id === "quota_exceeded" ? id : loadChannelResource(this.db, id);
      }),
    );
  }

  discover(callerKeyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]> {
    return discoverChannels(this.db, callerKeyId, before, limit);
  }

  listForKey(keyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]> {
    return discoverChannels(this.db, keyId, before, limit, "mine");
  }

  update(id: string, plan: (current: LockedChannel) => ChannelUpdate): Promise<ChannelResource | undefined> {
    return this.changed(
      this.db.transaction(async () => {
        const current = await lockChannel(this.db, id);
        if (!current) return undefined;
        const { changes, relatedIds } = plan(current);
        if (Object.keys(changes).length > 0 || relatedIds !== undefined) await updateChannel(this.db, id, changes, relatedIds);
        return loadChannelResource(this.db, id);
      }),
    );
  }

  delete(id: string): Promise<void> {
    return this.changed(deleteChannel(this.db, id));
  }

  addAlias(id: string, alias: string, aliasKey: string): Promise<ChannelResource | "conflict" | undefined> {
    return this.changed(
      this.db.transaction(async () => {
        const outcome = await insertAlias(this.db, CHANNEL_ALIASES, id, alias, aliasKey);
        if (outcome === "conflict") return outcome;
        return loadChannelResource(this.db, id);
      }),
    );
  }

  removeAlias(id: string, alias: string): Promise<ChannelResource | "not_held" | undefined> {
    return this.changed(
      this.db.transaction(async () => {
        if (!(await deleteAlias(this.db, CHANNEL_ALIASES, id, alias))) return "not_held";
        return loadChannelResource(this.db, id);
      }),
    );
  }

  setPaused(identifier: string, paused: boolean): Promise<ChannelResource | undefined> {
    return this.changed(
      this.db.transaction(async () => {
        const id = await setChannelPaused(this.db, identifier, paused);
        return id === undefined ? undefined : loadChannelResource(this.db, id);
      }),
    );
  }

  async limitIds(ownerKeyId: string, names: readonly string[]): Promise<Map<string, string>> {
    const { rows } = await this.db.query<{ id: string; name: string }>("SELECT id, name FROM limits WHERE owner_key_id = $1 AND name = ANY ($2::text[])", [ownerKeyId, names]);
    return new Map(rows.map((r) => [r.name, r.id]));
  }
}
