/** What the waitpoints use case needs from storage (waitpoints; messages' waitpoint_id, waitpoint_outcome). */
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";
import type { WaitpointRecord, WaitpointState } from "../model/waitpoints.js";

export interface NewWaitpoint {
  id: string;
  ownerKeyId: string;
  tokenHash: Buffer;
  description: string | null;
  idempotencyKey: string | null;
  createdAt: Micros;
  expiresAt: Micros;
}

export type InsertWaitpointOutcome =
  | { outcome: "inserted"; waitpoint: WaitpointRecord }
  /** The owner's waitpoint of that idempotency key, its token replaced by the new one when it still waits. */
  | { outcome: "replayed"; waitpoint: WaitpointRecord; tokenReplaced: boolean }
  | { outcome: "limit_reached" };

export type CompleteWaitpointOutcome =
  /** Completed now; the channels of the messages it made open work again. */
  | { outcome: "completed"; waitpoint: WaitpointRecord; channelIds: string[] }
  | { outcome: "already_completed" | "timed_out" | "not_found" };

export interface WaitpointPage {
  ownerKeyId: string;
  state: WaitpointState | null;
  /** Continue after this (created_at, id); null for the first page. */
  after: { createdAt: Micros; id: string } | null;
  limit: number;
  now: Micros;
}

export interface WaitpointStore {
  /**
   * Inserts the waitpoint unless its owner has `maxWaiting` waiting ones
   * ("limit_reached"), or already has one with that idempotency key: then
   * that one, its token hash replaced while it waits. One owner's creates
   * are serialised, so concurrent ones cannot overshoot or double.
   */
  insert(waitpoint: NewWaitpoint, maxWaiting: number, now: Micros): Promise<InsertWaitpointOutcome>;
  /** The waitpoint with its token hash, whoever owns it (a completion by token). */
  findWithToken(id: string, now: Micros): Promise<{ waitpoint: WaitpointRecord; tokenHash: Buffer } | undefined>;
  /** The owner's waitpoint; undefined for another key's. */
  find(ownerKeyId: string, id: string, now: Micros): Promise<WaitpointRecord | undefined>;
  list(page: WaitpointPage): Promise<WaitpointRecord[]>;
  /**
   * Completes the waitpoint if it still waits at `now`, and in the same
   * transaction makes every open message waiting for it open work at `now`,
   * carrying `data`.
   */
  complete(id: string, data: { [key: string]: JsonValue }, now: Micros): Promise<CompleteWaitpointOutcome>;
}
