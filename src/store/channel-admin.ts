/** SQL for operator actions on channels (AdminService). */
import { hasNul, isUuid } from "./channels.js";
import type { Db } from "./db.js";

/**
 * Sets paused on the channel named by id or alias; returns its id, or
 * undefined when there is none. The channel row is locked like a write
 * locks it, so a message being posted either commits before the pause or
 * sees it. updated_at moves only when the value changes, so pausing a
 * paused channel changes nothing.
 */
export async function setChannelPaused(db: Db, identifier: string, paused: boolean): Promise<string | undefined> {
  if (hasNul(identifier)) return undefined;
  const { rows } = await db.query<{ id: string }>(
    `WITH target AS (
       SELECT c.id, c.paused FROM channels c
       WHERE c.id = $1::uuid OR c.id = (SELECT a.channel_id FROM channel_aliases a WHERE a.alias = $2)
       LIMIT 1
       FOR NO KEY UPDATE
     ), changed AS (
       UPDATE channels c SET paused = $3, updated_at = greatest(clock_timestamp(), c.updated_at + interval '1 microsecond')
       FROM target t WHERE c.id = t.id AND t.paused <> $3
     )
     SELECT id FROM target`,
    [isUuid(identifier) ? identifier : null, identifier, paused],
  );
  return rows[0]?.id;
}
