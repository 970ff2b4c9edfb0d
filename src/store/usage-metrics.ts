/** SQL for the usage figures (GET /v1/observability/metrics): counts over the channels and sessions a key owns. */
import { formatTimestamp, type Micros } from "../model/time.js";
import type { OwnedFigures, UsageMetricsStore } from "../ports/usage-metrics.js";
import type { Db } from "./db.js";

/**
 * One statement: the key's channels through channels_by_owner_key_and_name,
 * their live messages through each channel's message index. $1 key, $2 now.
 */
export const OWNED_FIGURES_SQL = `WITH owned AS (
    SELECT c.id FROM channels c WHERE c.created_by_key_id = $1
  ), live AS (
    SELECT m.claimed_by_key_id IS NOT NULL AND (m.lease_expires_at IS NULL OR m.lease_expires_at > $2) AND m.acknowledged_by = '[]'::jsonb AS claimed,
      m.acknowledged_by <> '[]'::jsonb AS acknowledged
    FROM owned o JOIN messages m ON m.channel_id = o.id
    WHERE m.expires_at > $2
  )
  SELECT (SELECT count(*)::int FROM owned) AS channels_owned,
    (SELECT count(*)::int FROM live) AS messages,
    (SELECT count(*)::int FROM live WHERE claimed) AS claimed,
    (SELECT count(*)::int FROM live WHERE acknowledged) AS acknowledged,
    (SELECT count(*)::int FROM sessions s WHERE s.owner_key_id = $1 AND s.expires_at > $2) AS active_sessions`;

export class PgUsageMetricsStore implements UsageMetricsStore {
  constructor(private readonly db: Db) {}

  async ownedFigures(keyId: string, now: Micros): Promise<OwnedFigures> {
    const { rows } = await this.db.query<{ channels_owned: number; messages: number; claimed: number; acknowledged: number; active_sessions: number }>(
      OWNED_FIGURES_SQL,
      [keyId, formatTimestamp(now)],
      "owned_figures",
    );
    const row = rows[0]!;
    return { channelsOwned: row.channels_owned, messages: row.messages, claimed: row.claimed, acknowledged: row.acknowledged, activeSessions: row.active_sessions };
  }
}
