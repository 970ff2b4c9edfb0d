/** HistoryStore over an array. */
import type { HistoryRecord } from "../../../src/model/history.js";
import type { Micros } from "../../../src/model/time.js";
import type { HistoryStore } from "../../../src/ports/history.js";

export class FakeHistoryStore implements HistoryStore {
  readonly records: HistoryRecord[] = [];

  async list(channelId: string, before: Micros | null, limit: number): Promise<HistoryRecord[]> {
    return this.records
      .filter((r) => r.channelId === channelId && (before === null || r.createdAt < before))
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, limit);
  }
}
