/** SQL for channels: lookup by id, alias or owned name on behalf of a caller, create, discovery, update, delete, aliases, pause. */
import type { Caller } from "../model/caller.js";
import {
  type ChannelA2a,
  type ChannelA2aForward,
  type ChannelChanges,
  type ChannelLookup,
  type ChannelRecord,
  type ChannelResource,
  type ChannelSummary,
  type ChannelView,
  type LockedChannel,
  type NewChannel,
  type RelatedChannelRef,
  SUMMARY_COUNT_CAP,
} from "../model/channels.js";
import type { ChannelStore, ChannelUpdate } from "../ports/channels.js";
import type { JsonValue } from "../model/json.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { Db } from "./db.js";
import { isUuid } from "../model/ids.js";
import { deleteAlias, insertAlias, type AliasNamespace } from "./aliases.js";

const CHANNEL_ALIASES: AliasNamespace = { aliasTable: "channel_aliases", ownerColumn: "channel_id", ownerTable: "channels" };

export interface ChannelRow {
  id: string;
  name: string;
  mode: "broadcast" | "claimable";
  access: "open" | "restricted";
  discoverable: boolean;
  description: string;
  owner_id: string;
  created_by_key_id: string;
  metadata_schema: { [key: string]: JsonValue };
  pinned_message: string | null;
  webhook_url: string | null;
  webhook_secret: string | null;
  ttl_seconds: number;
  retention_days: number;
  max_messages: number | null;
  max_writes_per_minute: number | null;
  max_deliveries: number | null;
  dead_letter_channel_id: string | null;
  paused: boolean;
  created_at: Micros;
  updated_at: Micros;
  group_concurrency: number | null;
  dispatch: "fifo" | "fair";
  priority_aging_seconds: number | null;
  limit_ids: string[];
  limit_names: string[];
  limited_messages: boolean;
  a2a: ChannelA2a | null;
  a2a_forward: ChannelA2aForward | null;
}

export const CHANNEL_COLUMNS = `c.id, c.name, c.mode, c.access, c.discoverable, c.description, c.owner_id, c.created_by_key_id,
  c.metadata_schema, c.pinned_message, c.webhook_url, c.webhook_secret, c.ttl_seconds, c.retention_days,
  c.max_messages, c.max_writes_per_minute, c.max_deliveries, c.dead_letter_channel_id, c.paused, c.created_at, c.updated_at,
  c.group_concurrency, c.dispatch, c.priority_aging_seconds, c.limit_ids::text[] AS limit_ids, c.limited_messages, c.a2a, c.a2a_forward,
  ARRAY(SELECT l.name FROM limits l WHERE l.id = ANY (c.limit_ids) ORDER BY l.name) AS limit_names`;

export function toChannelRecord(row: ChannelRow): ChannelRecord {
  return {
    id: row.id,
    name: row.name,
    mode: row.mode,
    access: row.access,
    discoverable: row.discoverable,
    description: row.description,
    ownerId: row.owner_id,
    createdByKeyId: row.created_by_key_id,
    metadataSchema: row.metadata_schema,
    pinnedMessage: row.pinned_message,
    webhookUrl: row.webhook_url,
    webhookSecret: row.webhook_secret,
    ttlSeconds: row.ttl_seconds,
    retentionDays: row.retention_days,
    maxMessages: row.max_messages,
    maxWritesPerMinute: row.max_writes_per_minute,
    maxDeliveries: row.max_deliveries,
    deadLetterChannelId: row.dead_letter_channel_id,
    paused: row.paused,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    groupConcurrency: row.group_concurrency,
    dispatch: row.dispatch,
    priorityAgingSeconds: row.priority_aging_seconds,
    limitIds: row.limit_ids,
    limits: row.limit_names,
    limitedMessages: row.limited_messages,
    a2a: row.a2a,
    a2aForward: row.a2a_forward,
  };
}

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
/**
 * A listed channel's message counts, each a scan of at most SUMMARY_COUNT_CAP
 * entries of the channel's own messages (open work as a receive sees it: due,
 * unacknowledged, unclaimed or its lease lapsed).
 */
const SUMMARY_COUNTS = `
  (SELECT count(*)::int FROM (SELECT 1 FROM messages m WHERE m.channel_id = c.id AND m.expires_at > clock_timestamp() LIMIT ${SUMMARY_COUNT_CAP}) x) AS live_messages,
  CASE WHEN c.mode = 'claimable' THEN (SELECT count(*)::int FROM (
    SELECT 1 FROM messages m WHERE m.channel_id = c.id AND m.expires_at > clock_timestamp()
      AND (m.available_at IS NULL OR m.available_at <= clock_timestamp()) AND m.acknowledged_by = '[]'::jsonb
      AND (m.claimed_by_key_id IS NULL OR m.lease_expires_at <= clock_timestamp())
      AND (c.max_deliveries IS NULL OR m.delivery_count < c.max_deliveries)
    LIMIT ${SUMMARY_COUNT_CAP}) y) ELSE 0 END AS open_messages`;

const SUMMARY_SCOPES = {
  discoverable: "c.discoverable",
  mine: "c.id IN (SELECT m.channel_id FROM channel_members m WHERE m.key_id = $1 UNION ALL SELECT o.id FROM channels o WHERE o.created_by_key_id = $1)",
} as const;

export async function discoverChannels(
  db: Db,
  callerKeyId: string,
  before: Micros | undefined,
  limit: number,
  scope: keyof typeof SUMMARY_SCOPES = "discoverable",
): Promise<ChannelSummary[]> {
  const select = `SELECT c.id, c.name, c.mode, c.access, c.description, c.created_at, c.owner_id,
       (c.created_by_key_id = $1 OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.key_id = $1)) AS is_member,
       ${SUMMARY_COUNTS}
     FROM channels c`;
  const where = SUMMARY_SCOPES[scope];
  const { rows } = await db.query<
    Pick<ChannelRow, "id" | "name" | "mode" | "access" | "description" | "created_at" | "owner_id"> & { is_member: boolean; live_messages: number; open_messages: number }
  >(
    before === undefined
      ? `${select} WHERE ${where} ORDER BY c.created_at DESC LIMIT $2`
      : `${select} WHERE ${where} AND c.created_at < $3::timestamptz ORDER BY c.created_at DESC LIMIT $2`,
    before === undefined ? [callerKeyId, limit] : [callerKeyId, limit, formatTimestamp(before)],
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    mode: r.mode,
    access: r.access,
    description: r.description,
    createdAt: r.created_at,
    isMember: r.is_member,
    ownerId: r.owner_id,
    liveMessages: r.live_messages,
    openMessages: r.open_messages,
  }));
}

/** Locks the channel row for an update and reads it with its related channel ids; undefined when gone. */
export async function lockChannel(db: Db, id: string): Promise<LockedChannel | undefined> {
  const { rows } = await db.query<ChannelRow & { related_ids: string[] }>(
    `SELECT ${CHANNEL_COLUMNS},
       ARRAY(SELECT l.related_channel_id::text FROM channel_links l WHERE l.channel_id = c.id) AS related_ids
     FROM channels c WHERE c.id = $1 FOR NO KEY UPDATE OF c`,
    [id],
  );
  const row = rows[0];
  return row && { record: toChannelRecord(row), relatedIds: row.related_ids };
}

const CHANGE_COLUMNS: Record<keyof ChannelChanges, string> = {
  name: "name",
  mode: "mode",
  access: "access",
  discoverable: "discoverable",
  description: "description",
  metadataSchema: "metadata_schema",
  pinnedMessage: "pinned_message",
  retentionDays: "retention_days",
  maxMessages: "max_messages",
  maxWritesPerMinute: "max_writes_per_minute",
  maxDeliveries: "max_deliveries",
  deadLetterChannelId: "dead_letter_channel_id",
  paused: "paused",
  webhookUrl: "webhook_url",
  webhookSecret: "webhook_secret",
  groupConcurrency: "group_concurrency",
  dispatch: "dispatch",
  priorityAgingSeconds: "priority_aging_seconds",
  limitIds: "limit_ids",
  a2a: "a2a",
  a2aForward: "a2a_forward",
};

/** Columns written as JSON text and cast. */
const JSONB_CHANGES = new Set<keyof ChannelChanges>(["metadataSchema", "a2a", "a2aForward"]);

/**
 * Writes the changed columns and, when given, replaces the related channels;
 * moves updated_at strictly forward. Callers pass only real changes.
 */
export async function updateChannel(db: Db, id: string, changes: ChannelChanges, relatedIds: readonly string[] | undefined): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const [key, value] of Object.entries(changes) as Array<[keyof ChannelChanges, unknown]>) {
    const column = CHANGE_COLUMNS[key];
    const json = JSONB_CHANGES.has(key);
    values.push(json && value !== null ? JSON.stringify(value) : value);
    sets.push(`${column} = $${values.length}${json ? "::jsonb" : key === "limitIds" ? "::uuid[]" : ""}`);
  }
  sets.push("updated_at = greatest(clock_timestamp(), updated_at + interval '1 microsecond')");
  await db.query(`UPDATE channels SET ${sets.join(", ")} WHERE id = $1`, values);
  if (relatedIds !== undefined) {
    await db.query("DELETE FROM channel_links WHERE channel_id = $1", [id]);
    await db.query(
      `INSERT INTO channel_links (channel_id, related_channel_id)
       SELECT $1, r.id FROM channels r WHERE r.id = ANY($2::uuid[]) AND r.id <> $1`,
      [id, relatedIds],
    );
  }
}

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
