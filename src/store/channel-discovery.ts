/** SQL for the channel lists: discoverable channels and a key's own, newest first, with their message counts. */
import { SUMMARY_COUNT_CAP, type ChannelSummary } from "../model/channels.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { ChannelRow } from "./channel-rows.js";
import type { Db } from "./db.js";

/**
 * A listed channel's message counts, each a scan of at most SUMMARY_COUNT_CAP
 * entries of the channel's own messages (open work as a receive sees it: due,
 * unacknowledged, unclaimed or its lease lapsed).
 */
const SUMMARY_COUNTS = `
  (SELECT count(*)::int FROM (SELECT 1 FROM messages m WHERE m.channel_id = c.id AND m.expires_at > clock_timestamp() LIMIT ${SUMMARY_COUNT_CAP}) x) AS live_messages,
  CASE WHEN c.mode = 'claimable' THEN (SELECT count(*)::int FROM (
    SELECT 1 FROM messages m WHERE m.channel_id = c.id AND m.expires_at > clock_timestamp()
      AND (m.available_at IS NULL OR m.available_at <= clock_timestamp()) AND m.acknowledged_by = '[]'::jsonb
      AND (m.claimed_by_key_id IS NULL OR m.lease_expires_at <= clock_timestamp())
      AND (c.max_deliveries IS NULL OR m.delivery_count < c.max_deliveries)
    LIMIT ${SUMMARY_COUNT_CAP}) y) ELSE 0 END AS open_messages`;

const SUMMARY_SCOPES = {
  discoverable: "c.discoverable",
  mine: "c.id IN (SELECT m.channel_id FROM channel_members m WHERE m.key_id = $1 UNION ALL SELECT o.id FROM channels o WHERE o.created_by_key_id = $1)",
} as const;

export async function discoverChannels(
  db: Db,
  callerKeyId: string,
  before: Micros | undefined,
  limit: number,
  scope: keyof typeof SUMMARY_SCOPES = "discoverable",
): Promise<ChannelSummary[]> {
  const select = `SELECT c.id, c.name, c.mode, c.access, c.description, c.created_at, c.owner_id,
       (c.created_by_key_id = $1 OR EXISTS (SELECT 1 FROM channel_members m WHERE m.channel_id = c.id AND m.key_id = $1)) AS is_member,
       ${SUMMARY_COUNTS}
     FROM channels c`;
  const where = SUMMARY_SCOPES[scope];
  const { rows } = await db.query<
    Pick<ChannelRow, "id" | "name" | "mode" | "access" | "description" | "created_at" | "owner_id"> & { is_member: boolean; live_messages: number; open_messages: number }
  >(
    before === undefined
      ? `${select} WHERE ${where} ORDER BY c.created_at DESC LIMIT $2`
      : `${select} WHERE ${where} AND c.created_at < $3::timestamptz ORDER BY c.created_at DESC LIMIT $2`,
    before === undefined ? [callerKeyId, limit] : [callerKeyId, limit, formatTimestamp(before)],
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    mode: r.mode,
    access: r.access,
    description: r.description,
    createdAt: r.created_at,
    isMember: r.is_member,
    ownerId: r.owner_id,
    liveMessages: r.live_messages,
    openMessages: r.open_messages,
  }));
}

