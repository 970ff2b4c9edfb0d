/**
 * Idempotency records (docs/decisions.md#idempotency): the stored outcome of a state-changing
 * call under its caller's key id and Idempotency-Key. The transport's
 * Idempotency runs claim, handler and complete inside one transaction of
 * this store: the placeholder's primary key is what makes a concurrent
 * duplicate wait, and the record only exists, with its response, if the
 * handler's writes commit too.
 */

/** A live record found under the caller's key, after any running first request ended. */
export interface StoredOutcome {
  requestHash: Buffer;
  /** Encoded response; null only for a placeholder, which is never committed. */
  response: Buffer | null;
  status: number | null;
}

/**
 * claimed: this transaction holds the key, run the handler. stored: replay or
 * refuse. in_progress: the wait timed out; the transaction is aborted and
 * must be rolled back.
 */
export type ClaimResult = { outcome: "claimed" } | { outcome: "stored"; stored: StoredOutcome } | { outcome: "in_progress" };

export interface ClaimParams {
  keyId: string;
  idempotencyKey: string;
  requestHash: Buffer;
  windowSeconds: number;
  /** How long to wait for a transaction holding the same key before giving up. */
  lockTimeoutMs: number;
}

export interface IdempotencyStore {
  /**
   * Runs `work` atomically. The other stores' writes made while it runs (the
   * handler's) join the same transaction, so a record commits with its
   * effects or not at all.
   */
  transaction<T>(work: () => Promise<T>): Promise<T>;
  /**
   * Inserts the placeholder for (keyId, idempotencyKey), or finds the live
   * record already there, waiting at most lockTimeoutMs for a transaction
   * that holds the key. Call inside transaction().
   */
  claim(params: ClaimParams): Promise<ClaimResult>;
  /** Fills the claimed placeholder with the handler's response. Call inside the claim's transaction(). */
  complete(keyId: string, idempotencyKey: string, response: Uint8Array, status: number): Promise<void>;
}
