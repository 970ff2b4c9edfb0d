/** What the shared-limits use case needs from storage (limits, limit_deliveries; channels' and messages' limit_ids). */
import type { LimitBounds, LimitRecord, LimitView } from "../model/limits.js";
import type { Micros } from "../model/time.js";

export interface LimitStore {
  /** Runs fn in one transaction (a savepoint inside one). */
  atomically<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Inserts the limit unless its owner already has one of that name
   * ("exists") or has `maxPerOwner` limits ("limit_reached"); one owner's
   * creates are serialised, so concurrent ones cannot overshoot.
   */
  insert(limit: LimitRecord, maxPerOwner: number): Promise<"inserted" | "exists" | "limit_reached">;
  /** The owner's limit of that name with its live use at `now`; `lock` holds its row until the transaction ends. */
  find(ownerKeyId: string, name: string, now: Micros, lock?: boolean): Promise<LimitView | undefined>;
  /** The owner's limits by name, with their live use at `now`. */
  list(ownerKeyId: string, now: Micros): Promise<LimitView[]>;
  saveBounds(id: string, bounds: LimitBounds, updatedAt: Micros): Promise<void>;
  /**
   * Deletes the owner's limit of that name and, in the same transaction,
   * removes its id from every channel's limit_ids and from the limit_ids of
   * the owner's channels' messages; false when there was none.
   */
  delete(ownerKeyId: string, name: string): Promise<boolean>;
}
