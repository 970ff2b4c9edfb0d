/** What a channel's history needs from storage. */
import type { HistoryRecord } from "../model/history.js";
import type { Micros } from "../model/time.js";

export interface HistoryStore {
  /** One page, newest first, created before `before` (null: from the newest). */
  list(channelId: string, before: Micros | null, limit: number): Promise<HistoryRecord[]>;
}
