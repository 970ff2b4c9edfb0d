/** SQL for shared limits (0027_dispatch_and_limits.sql: limits, limit_deliveries; channels' and messages' limit_ids). */
import type { LimitBounds, LimitRecord, LimitView } from "../model/limits.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { LimitStore } from "../ports/limits.js";
import type { Db } from "./db.js";

interface LimitRow {
  id: string;
  owner_key_id: string;
  name: string;
  max_in_flight: number | null;
  rate_count: number | null;
  rate_per_seconds: number | null;
  created_at: Micros;
  updated_at: Micros;
  in_flight: number;
  used_in_window: number;
}

/**
 * A limit's columns and its live use at $1 (now):
 * - in_flight: its holders as a receive counts them (agentbus_limit_holders:
 *   messages of its owner's channels holding it that are claimed, not
 *   acknowledged, not expired, and whose lease, if any, has not lapsed);
 * - used_in_window: its deliveries after now - per_seconds (0 without a rate).
 */
const LIMIT_FIELDS = `l.id, l.owner_key_id, l.name, l.max_in_flight, l.rate_count, l.rate_per_seconds, l.created_at, l.updated_at,
  (SELECT h.holding::int FROM agentbus_limit_holders(l.owner_key_id, l.id, $1::timestamptz) h) AS in_flight,
  CASE WHEN l.rate_per_seconds IS NULL THEN 0 ELSE
    (SELECT coalesce(sum(d.n), 0)::int FROM limit_deliveries d
      WHERE d.limit_id = l.id AND d.delivered_at > $1::timestamptz - make_interval(secs => l.rate_per_seconds))
  END AS used_in_window`;

const toView = (r: LimitRow): LimitView => ({
  id: r.id,
  ownerKeyId: r.owner_key_id,
  name: r.name,
  maxInFlight: r.max_in_flight,
  rate: r.rate_count === null || r.rate_per_seconds === null ? null : { count: r.rate_count, perSeconds: r.rate_per_seconds },
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  inFlight: r.in_flight,
  usedInWindow: r.used_in_window,
});

export class PgLimitStore implements LimitStore {
  /** `onChannelsChanged`: forgets remembered channel lookups (a delete changes channels' limit_ids). */
  constructor(
    private readonly db: Db,
    private readonly onChannelsChanged: () => void = () => {},
  ) {}

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  insert(limit: LimitRecord, maxPerOwner: number): Promise<"inserted" | "exists" | "limit_reached"> {
    return this.db.transaction(async () => {
      // One owner's creates queue here, so the count below cannot be stale.
      await this.db.query("SELECT pg_advisory_xact_lock(hashtextextended('limits:' || $1, 0))", [limit.ownerKeyId]);
      const { rows } = await this.db.query<{ n: number; taken: boolean | null }>(
        "SELECT count(*)::int AS n, bool_or(name = $2) AS taken FROM limits WHERE owner_key_id = $1",
        [limit.ownerKeyId, limit.name],
      );
      if (rows[0]?.taken) return "exists";
      if ((rows[0]?.n ?? 0) >= maxPerOwner) return "limit_reached";
      const inserted = await this.db.query(
        `INSERT INTO limits (id, owner_key_id, name, max_in_flight, rate_count, rate_per_seconds, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (owner_key_id, name) DO NOTHING`,
        [
          limit.id,
          limit.ownerKeyId,
          limit.name,
          limit.maxInFlight,
          limit.rate?.count ?? null,
          limit.rate?.perSeconds ?? null,
          formatTimestamp(limit.createdAt),
          formatTimestamp(limit.updatedAt),
        ],
      );
      return (inserted.rowCount ?? 0) > 0 ? "inserted" : "exists";
    });
  }

  async find(ownerKeyId: string, name: string, now: Micros, lock = false): Promise<LimitView | undefined> {
    const { rows } = await this.db.query<LimitRow>(
      `SELECT ${LIMIT_FIELDS} FROM limits l WHERE l.owner_key_id = $2 AND l.name = $3${lock ? " FOR UPDATE OF l" : ""}`,
      [formatTimestamp(now), ownerKeyId, name],
    );
    return rows[0] && toView(rows[0]);
  }

  async list(ownerKeyId: string, now: Micros): Promise<LimitView[]> {
    // Byte order ("C"), whatever the database's collation: the same order in every deployment and in clients.
    const { rows } = await this.db.query<LimitRow>(
      `SELECT ${LIMIT_FIELDS} FROM limits l WHERE l.owner_key_id = $2 ORDER BY l.name COLLATE "C"`,
      [formatTimestamp(now), ownerKeyId],
    );
    return rows.map(toView);
  }

  async saveBounds(id: string, bounds: LimitBounds, updatedAt: Micros): Promise<void> {
    await this.db.query("UPDATE limits SET max_in_flight = $2, rate_count = $3, rate_per_seconds = $4, updated_at = $5 WHERE id = $1", [
      id,
      bounds.maxInFlight,
      bounds.rate?.count ?? null,
      bounds.rate?.perSeconds ?? null,
      formatTimestamp(updatedAt),
    ]);
  }

  delete(ownerKeyId: string, name: string): Promise<boolean> {
    return this.db.announceChange(
      this.db.transaction(async () => {
        // The limit's row first (its deliveries go with it, ON DELETE CASCADE), then the rows naming it.
        const { rows } = await this.db.query<{ id: string }>("DELETE FROM limits WHERE owner_key_id = $1 AND name = $2 RETURNING id", [ownerKeyId, name]);
        const id = rows[0]?.id;
        if (id === undefined) return false;
        await this.db.query("UPDATE channels SET limit_ids = array_remove(limit_ids, $1::uuid) WHERE limit_ids @> ARRAY[$1::uuid]", [id]);
        // A message names only its channel's owner's limits, so only the owner's channels are looked through.
        await this.db.query(
          `UPDATE messages m SET limit_ids = array_remove(m.limit_ids, $1::uuid)
             FROM channels c
            WHERE c.created_by_key_id = $2 AND m.channel_id = c.id AND m.limit_ids @> ARRAY[$1::uuid]`,
          [id, ownerKeyId],
        );
        return true;
      }),
      this.onChannelsChanged,
    );
  }
}
