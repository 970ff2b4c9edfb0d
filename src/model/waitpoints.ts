/** Waitpoints (docs/decisions.md#waitpoints). */
import type { JsonValue } from "./json.js";
import type { Micros } from "./time.js";

export type WaitpointState = "waiting" | "completed" | "timed_out";
export const WAITPOINT_STATES: readonly WaitpointState[] = ["waiting", "completed", "timed_out"];

export interface WaitpointRecord {
  id: string;
  /** The key that created it: the only key that reads or resolves it. */
  ownerKeyId: string;
  description: string | null;
  idempotencyKey: string | null;
  /** What the completion sent; null until completed. */
  data: { [key: string]: JsonValue } | null;
  completedAt: Micros | null;
  createdAt: Micros;
  /** It times out then unless completed first. */
  expiresAt: Micros;
  /** Open messages released to wait for it (live count at the read). */
  waitingMessages: number;
}

/** A completed waitpoint is completed for good; else it waits until its expiry. */
export function waitpointState(w: Pick<WaitpointRecord, "completedAt" | "expiresAt">, now: Micros): WaitpointState {
  if (w.completedAt !== null) return "completed";
  return w.expiresAt > now ? "waiting" : "timed_out";
}
