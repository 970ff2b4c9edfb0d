/**
 * SQL for storage quotas (migration 0025): a key's usage is the sum of its
 * key_usage shards (kept by triggers on messages and message_history) and
 * its count of channels; its limits are api_keys' quota columns.
 */
import type { QuotaOverrides, QuotaUsage } from "../model/quotas.js";
import type { QuotaStore } from "../ports/quotas.js";
import type { Db } from "./db.js";

export class PgQuotaStore implements QuotaStore {
  constructor(private readonly db: Db) {}

  async usage(keyId: string): Promise<QuotaUsage> {
    const { rows } = await this.db.query<{ stored_bytes: string | null; live_messages: string | null; channels: number }>(
      `SELECT (SELECT sum(u.stored_bytes) FROM key_usage u WHERE u.key_id = $1) AS stored_bytes,
         (SELECT sum(u.live_messages) FROM key_usage u WHERE u.key_id = $1) AS live_messages,
         (SELECT count(*)::int FROM channels c WHERE c.created_by_key_id = $1) AS channels`,
      [keyId],
      "key_usage",
    );
    const row = rows[0]!;
    return { stored_bytes: Math.max(0, Number(row.stored_bytes ?? 0)), live_messages: Math.max(0, Number(row.live_messages ?? 0)), channels: row.channels };
  }

  async overrides(keyId: string): Promise<QuotaOverrides | undefined> {
    const { rows } = await this.db.query<{ quota_stored_bytes: string | null; quota_live_messages: string | null; quota_channels: number | null }>(
      "SELECT quota_stored_bytes, quota_live_messages, quota_channels FROM api_keys WHERE key_id = $1",
      [keyId],
      "key_quota_overrides",
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    const set: QuotaOverrides = {};
    if (row.quota_stored_bytes !== null) set.stored_bytes = Number(row.quota_stored_bytes);
    if (row.quota_live_messages !== null) set.live_messages = Number(row.quota_live_messages);
    if (row.quota_channels !== null) set.channels = row.quota_channels;
    return set;
  }

  async setOverrides(keyId: string, overrides: QuotaOverrides): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "UPDATE api_keys SET quota_stored_bytes = $2, quota_live_messages = $3, quota_channels = $4 WHERE key_id = $1",
      [keyId, overrides.stored_bytes ?? null, overrides.live_messages ?? null, overrides.channels ?? null],
    );
    return (rowCount ?? 0) > 0;
  }
}
