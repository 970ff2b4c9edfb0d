/** SQL for waitpoints (0034_waitpoints.sql; docs/decisions.md#waitpoints). */
import type { ActorRef } from "../model/actors.js";
import type { JsonValue } from "../model/json.js";
import type { MessageRecord } from "../model/messages.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { WaitpointRecord } from "../model/waitpoints.js";
import type {
  CompleteWaitpointOutcome,
  InsertWaitpointOutcome,
  NewWaitpoint,
  WaitpointPage,
  WaitpointStore,
} from "../ports/waitpoints.js";
import type { Db } from "./db.js";
import { GIVEN_BACK, RELEASABLE } from "./claim-sql.js";
import { COLUMNS, toRecord, type MessageRow } from "./message-rows.js";

interface WaitpointRow {
  id: string;
  owner_key_id: string;
  description: string | null;
  idempotency_key: string | null;
  data: { [key: string]: JsonValue } | null;
  completed_at: Micros | null;
  created_at: Micros;
  expires_at: Micros;
  waiting_messages: number;
  token_hash?: Buffer;
}

/** A waitpoint's columns and its open waiting messages (messages_waitpoint). */
const FIELDS = `w.id, w.owner_key_id, w.description, w.idempotency_key, w.data, w.completed_at, w.created_at, w.expires_at,
  (SELECT count(*)::int FROM messages m WHERE m.waitpoint_id = w.id AND m.claimed_by_key_id IS NULL AND m.waitpoint_outcome IS NULL
     AND m.available_at > $1::timestamptz AND m.expires_at > $1::timestamptz) AS waiting_messages`;

const toWaitpoint = (r: WaitpointRow): WaitpointRecord => ({
  id: r.id,
  ownerKeyId: r.owner_key_id,
  description: r.description,
  idempotencyKey: r.idempotency_key,
  data: r.data,
  completedAt: r.completed_at,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  waitingMessages: r.waiting_messages,
});

/** The state filter of a listing at $1 (now). */
const STATE_CONDITION = {
  waiting: "w.completed_at IS NULL AND w.expires_at > $1::timestamptz",
  completed: "w.completed_at IS NOT NULL",
  timed_out: "w.completed_at IS NULL AND w.expires_at <= $1::timestamptz",
} as const;

/**
 * $1 message, $2 key, $3 actor id, $4 now, $5 waitpoint: gives back a claim
 * this key and actor hold (as RELEASE_SQL) to wait for the key's
 * waitpoint, locked (shared) first so a completion running now is waited
 * for and read: open again at its timeout, or now carrying its data when
 * it is completed; the delivery is not counted.
 */
const RELEASE_UNTIL_SQL = `WITH w AS (
    SELECT w.id, w.completed_at, w.data, w.expires_at FROM waitpoints w WHERE w.id = $5 AND w.owner_key_id = $2 FOR SHARE
  )
  UPDATE messages m SET ${GIVEN_BACK("$4")},
    delivery_count = greatest(m.delivery_count - 1, 0),
    waitpoint_id = w.id,
    waitpoint_outcome = CASE WHEN w.completed_at IS NOT NULL THEN jsonb_build_object('data', coalesce(w.data, '{}'::jsonb)) END,
    available_at = CASE WHEN w.completed_at IS NOT NULL THEN $4::timestamptz ELSE greatest(w.expires_at, $4::timestamptz) END
  FROM w
  WHERE ${RELEASABLE}
  RETURNING ${COLUMNS}`;

/** A release to wait for a waitpoint (RELEASE_UNTIL_SQL), for the message store: see MessageStore.releaseUntil. */
export async function releaseUntilWaitpoint(db: Db, messageId: string, keyId: string, actor: ActorRef, waitpointId: string, now: Micros): Promise<MessageRecord | "waitpoint_not_found" | undefined> {
  const { rows } = await db.query<MessageRow>(RELEASE_UNTIL_SQL, [messageId, keyId, actor.id, formatTimestamp(now), waitpointId], "release_until_waitpoint");
  if (rows[0]) return toRecord(rows[0]);
  const { rows: owned } = await db.query("SELECT 1 FROM waitpoints w WHERE w.id = $1 AND w.owner_key_id = $2", [waitpointId, keyId], "waitpoint_owned");
  return owned.length === 0 ? "waitpoint_not_found" : undefined;
}

export class PgWaitpointStore implements WaitpointStore {
  constructor(private readonly db: Db) {}

  insert(waitpoint: NewWaitpoint, maxWaiting: number, now: Micros): Promise<InsertWaitpointOutcome> {
    return this.db.transaction(async () => {
      // One owner's creates queue here: the count and the idempotency key below cannot be stale.
      await this.db.query("SELECT pg_advisory_xact_lock(hashtextextended('waitpoints:' || $1, 0))", [waitpoint.ownerKeyId]);
      const at = formatTimestamp(now);
      if (waitpoint.idempotencyKey !== null) {
        // A repeat: the same waitpoint; while it waits, the new token replaces the old (the old is never shown again).
        const { rows } = await this.db.query<WaitpointRow & { replaced: boolean }>(
          `WITH w AS (SELECT * FROM waitpoints WHERE owner_key_id = $2 AND idempotency_key = $3 FOR UPDATE),
            renewed AS (UPDATE waitpoints x SET token_hash = $4 FROM w
              WHERE x.id = w.id AND w.completed_at IS NULL AND w.expires_at > $1::timestamptz RETURNING x.id)
          SELECT ${FIELDS}, EXISTS (SELECT 1 FROM renewed) AS replaced FROM w`,
          [at, waitpoint.ownerKeyId, waitpoint.idempotencyKey, waitpoint.tokenHash],
          "waitpoint_replay",
        );
        if (rows[0]) return { outcome: "replayed", waitpoint: toWaitpoint(rows[0]), tokenReplaced: rows[0].replaced };
      }
      const { rows: counted } = await this.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM waitpoints w WHERE w.owner_key_id = $1 AND w.completed_at IS NULL AND w.expires_at > $2",
        [waitpoint.ownerKeyId, at],
        "waitpoint_count",
      );
      if ((counted[0]?.n ?? 0) >= maxWaiting) return { outcome: "limit_reached" };
      await this.db.query(
        `INSERT INTO waitpoints (id, owner_key_id, token_hash, description, idempotency_key, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [waitpoint.id, waitpoint.ownerKeyId, waitpoint.tokenHash, waitpoint.description, waitpoint.idempotencyKey, formatTimestamp(waitpoint.createdAt), formatTimestamp(waitpoint.expiresAt)],
        "waitpoint_insert",
      );
      return {
        outcome: "inserted",
        waitpoint: {
          id: waitpoint.id, ownerKeyId: waitpoint.ownerKeyId, description: waitpoint.description, idempotencyKey: waitpoint.idempotencyKey,
          data: null, completedAt: null, createdAt: waitpoint.createdAt, expiresAt: waitpoint.expiresAt, waitingMessages: 0,
        },
      };
    });
  }

  async findWithToken(id: string, now: Micros): Promise<{ waitpoint: WaitpointRecord; tokenHash: Buffer } | undefined> {
    const { rows } = await this.db.query<WaitpointRow & { token_hash: Buffer }>(
      `SELECT ${FIELDS}, w.token_hash FROM waitpoints w WHERE w.id = $2`,
      [formatTimestamp(now), id],
      "waitpoint_by_token",
    );
    const row = rows[0];
    return row && { waitpoint: toWaitpoint(row), tokenHash: row.token_hash };
  }

  async find(ownerKeyId: string, id: string, now: Micros): Promise<WaitpointRecord | undefined> {
    const { rows } = await this.db.query<WaitpointRow>(
      `SELECT ${FIELDS} FROM waitpoints w WHERE w.id = $2 AND w.owner_key_id = $3`,
      [formatTimestamp(now), id, ownerKeyId],
      "waitpoint_find",
    );
    return rows[0] && toWaitpoint(rows[0]);
  }

  async list(page: WaitpointPage): Promise<WaitpointRecord[]> {
    const conditions = ["w.owner_key_id = $2"];
    const values: unknown[] = [formatTimestamp(page.now), page.ownerKeyId, page.limit];
    if (page.state !== null) conditions.push(STATE_CONDITION[page.state]);
    if (page.after !== null) {
      values.push(formatTimestamp(page.after.createdAt), page.after.id);
      conditions.push("(w.created_at, w.id) < ($4::timestamptz, $5::uuid)");
    }
    const { rows } = await this.db.query<WaitpointRow>(
      `SELECT ${FIELDS} FROM waitpoints w WHERE ${conditions.join(" AND ")} ORDER BY w.created_at DESC, w.id DESC LIMIT $3`,
      values,
    );
    return rows.map(toWaitpoint);
  }

  complete(id: string, data: { [key: string]: JsonValue }, now: Micros): Promise<CompleteWaitpointOutcome> {
    return this.db.transaction(async () => {
      const at = formatTimestamp(now);
      // First the waitpoint, row-locked: a release to wait for it now is waited for (its FOR SHARE), or waits for this.
      const { rows } = await this.db.query<WaitpointRow>(
        `UPDATE waitpoints w SET completed_at = $1, data = $3 WHERE w.id = $2 AND w.completed_at IS NULL AND w.expires_at > $1
         RETURNING ${FIELDS}`,
        [at, id, JSON.stringify(data)],
        "waitpoint_complete",
      );
      const completed = rows[0];
      if (!completed) {
        const { rows: found } = await this.db.query<{ completed: boolean }>("SELECT w.completed_at IS NOT NULL AS completed FROM waitpoints w WHERE w.id = $1", [id]);
        if (!found[0]) return { outcome: "not_found" };
        return { outcome: found[0].completed ? "already_completed" : "timed_out" };
      }
      // A second statement, so a release committed while the update above waited is seen.
      const { rows: freed } = await this.db.query<{ channel_id: string }>(
        `UPDATE messages m SET available_at = $1, waitpoint_outcome = jsonb_build_object('data', $3::jsonb)
         WHERE m.waitpoint_id = $2 AND m.claimed_by_key_id IS NULL AND m.waitpoint_outcome IS NULL AND m.expires_at > $1
         RETURNING m.channel_id`,
        [at, id, JSON.stringify(data)],
        "waitpoint_free_messages",
      );
      return { outcome: "completed", waitpoint: { ...toWaitpoint(completed), waitingMessages: 0 }, channelIds: [...new Set(freed.map((r) => r.channel_id))] };
    });
  }
}
