/**
 * SQL for idempotency_records (docs/decisions.md#idempotency). claim and complete must run
 * inside the transaction that also runs the handler (see
 * ports/idempotency.ts and server/rpc/idempotency.ts).
 */
import type { ClaimParams, ClaimResult, IdempotencyStore } from "../ports/idempotency.js";
import type { Db } from "./db.js";

const LOCK_NOT_AVAILABLE = "55P03";

interface RecordRow {
  request_hash: Buffer;
  response: Buffer | null;
  status: number | null;
}

export class PgIdempotencyStore implements IdempotencyStore {
  constructor(private readonly db: Db) {}

  /** A transaction of the shared Db, which every store's queries join while it runs. */
  transaction<T>(work: () => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /**
   * Inserts the placeholder for (keyId, idempotencyKey), or finds the live
   * record already there. If another transaction holds the key (its request
   * is running), the INSERT waits on the primary key until that transaction
   * ends: committed → its record is returned; rolled back → this one claims
   * the key. Waiting longer than lockTimeoutMs → in_progress.
   * An expired record counts as absent and is overwritten in place.
   */
  async claim(p: ClaimParams): Promise<ClaimResult> {
    // Only the claim itself waits with a bound; the handler's own statements
    // keep the session's lock_timeout (reset below).
    await this.db.query("SELECT set_config('lock_timeout', $1, true)", [`${Math.max(1, Math.trunc(p.lockTimeoutMs))}ms`]);
    let inserted: number | null;
    try {
      ({ rowCount: inserted } = await this.db.query(
        `INSERT INTO idempotency_records AS r (key_id, idempotency_key, request_hash, expires_at)
         VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
         ON CONFLICT (key_id, idempotency_key) DO UPDATE
           SET request_hash = EXCLUDED.request_hash, response = NULL, status = NULL,
               created_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
           WHERE r.expires_at <= clock_timestamp()
         RETURNING 1`,
        [p.keyId, p.idempotencyKey, p.requestHash, p.windowSeconds],
      ));
    } catch (err) {
      if ((err as { code?: string }).code === LOCK_NOT_AVAILABLE) return { outcome: "in_progress" };
      throw err;
    }
    await this.db.query("SET LOCAL lock_timeout TO DEFAULT");
    if (inserted === 1) return { outcome: "claimed" };
    // ON CONFLICT DO UPDATE locked the live row even though its WHERE was
    // false, so it cannot change before this transaction ends; this statement's
    // fresh snapshot sees the committed version.
    const { rows } = await this.db.query<RecordRow>(
      "SELECT request_hash, response, status FROM idempotency_records WHERE key_id = $1 AND idempotency_key = $2",
      [p.keyId, p.idempotencyKey],
    );
    const row = rows[0];
    if (!row) throw new Error("idempotency record vanished while locked");
    return { outcome: "stored", stored: { requestHash: row.request_hash, response: row.response, status: row.status } };
  }

  /** Fills the claimed placeholder with the handler's response. */
  async complete(keyId: string, idempotencyKey: string, response: Uint8Array, status: number): Promise<void> {
    const { rowCount } = await this.db.query(
      "UPDATE idempotency_records SET response = $3, status = $4 WHERE key_id = $1 AND idempotency_key = $2",
      [keyId, idempotencyKey, Buffer.from(response.buffer, response.byteOffset, response.byteLength), status],
    );
    if (rowCount !== 1) throw new Error("idempotency placeholder missing at completion");
  }
}
