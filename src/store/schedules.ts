/** SQL for schedules (0035_schedules.sql; docs/decisions.md#schedules). */
import type { JsonValue } from "../model/json.js";
import type { DueSchedule, ScheduleRecord } from "../model/schedules.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { ScheduleStore } from "../ports/schedules.js";
import type { Db } from "./db.js";

interface ScheduleRow {
  id: string;
  channel_id: string;
  created_by_key_id: string;
  cron: string;
  timezone: string;
  message: { content: string; metadata?: { [key: string]: JsonValue }; group_key?: string | null; priority?: number | null };
  paused: boolean;
  next_run_at: Micros | null;
  last_run_at: Micros | null;
  last_message_id: string | null;
  last_error: string | null;
  runs: number;
  created_at: Micros;
  updated_at: Micros;
  creator_label?: string | null;
  creator_may_post?: boolean;
}

const FIELDS = `s.id, s.channel_id, s.created_by_key_id, s.cron, s.timezone, s.message, s.paused, s.next_run_at, s.last_run_at,
  s.last_message_id, s.last_error, s.runs, s.created_at, s.updated_at`;

const toRecord = (r: ScheduleRow): ScheduleRecord => ({
  id: r.id,
  channelId: r.channel_id,
  createdByKeyId: r.created_by_key_id,
  cron: r.cron,
  timezone: r.timezone,
  message: { content: r.message.content, metadata: r.message.metadata ?? {}, groupKey: r.message.group_key ?? null, priority: r.message.priority ?? null },
  paused: r.paused,
  nextRunAt: r.next_run_at,
  lastRunAt: r.last_run_at,
  lastMessageId: r.last_message_id,
  lastError: r.last_error,
  runs: r.runs,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

const messageJson = (s: ScheduleRecord) =>
  JSON.stringify({ content: s.message.content, metadata: s.message.metadata, group_key: s.message.groupKey, priority: s.message.priority });

const at = (t: Micros | null) => (t === null ? null : formatTimestamp(t));

export class PgScheduleStore implements ScheduleStore {
  constructor(private readonly db: Db) {}

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  insert(s: ScheduleRecord, maxPerKey: number): Promise<"inserted" | "limit_reached"> {
    return this.db.transaction(async () => {
      // One key's creates queue here, so the count below cannot be stale.
      await this.db.query("SELECT pg_advisory_xact_lock(hashtextextended('schedules:' || $1, 0))", [s.createdByKeyId]);
      const { rows } = await this.db.query<{ n: number }>("SELECT count(*)::int AS n FROM schedules WHERE created_by_key_id = $1", [s.createdByKeyId], "schedule_count");
      if ((rows[0]?.n ?? 0) >= maxPerKey) return "limit_reached";
      await this.db.query(
        `INSERT INTO schedules (id, channel_id, created_by_key_id, cron, timezone, message, paused, next_run_at, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
        [s.id, s.channelId, s.createdByKeyId, s.cron, s.timezone, messageJson(s), s.paused, at(s.nextRunAt), formatTimestamp(s.createdAt)],
        "schedule_insert",
      );
      return "inserted";
    });
  }

  async find(id: string): Promise<ScheduleRecord | undefined> {
    // Inside a transaction the row stays locked until it ends: a change is judged against the row as it is.
    const lock = this.db.inTransaction ? " FOR UPDATE" : "";
    const { rows } = await this.db.query<ScheduleRow>(`SELECT ${FIELDS} FROM schedules s WHERE s.id = $1${lock}`, [id]);
    return rows[0] && toRecord(rows[0]);
  }

  async list(filter: { channelId: string } | { createdByKeyId: string }): Promise<ScheduleRecord[]> {
    const [column, value] = "channelId" in filter ? ["channel_id", filter.channelId] : ["created_by_key_id", filter.createdByKeyId];
    const { rows } = await this.db.query<ScheduleRow>(`SELECT ${FIELDS} FROM schedules s WHERE s.${column} = $1 ORDER BY s.created_at, s.id LIMIT 1000`, [value]);
    return rows.map(toRecord);
  }

  async save(s: ScheduleRecord): Promise<void> {
    await this.db.query(
      "UPDATE schedules SET cron = $2, timezone = $3, message = $4, paused = $5, next_run_at = $6, updated_at = $7 WHERE id = $1",
      [s.id, s.cron, s.timezone, messageJson(s), s.paused, at(s.nextRunAt), formatTimestamp(s.updatedAt)],
      "schedule_save",
    );
  }

  async delete(id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM schedules WHERE id = $1", [id]);
    return (rowCount ?? 0) > 0;
  }

  async takeDue(now: Micros, limit: number): Promise<DueSchedule[]> {
    const { rows } = await this.db.query<ScheduleRow>(
      `SELECT ${FIELDS}, k.agent_label AS creator_label, (k.scopes IS NULL OR 'messages:write' = ANY (k.scopes)) AS creator_may_post
       FROM schedules s LEFT JOIN api_keys k ON k.key_id = s.created_by_key_id AND k.revoked_at IS NULL
       WHERE s.next_run_at <= $1 AND NOT s.paused
       ORDER BY s.next_run_at LIMIT $2 FOR UPDATE OF s SKIP LOCKED`,
      [formatTimestamp(now), limit],
      "schedules_due",
    );
    return rows.map((r) => ({ ...toRecord(r), creatorLabel: r.creator_label ?? null, creatorMayPost: r.creator_may_post === true }));
  }

  async recordRun(run: { scheduleId: string; scheduledFor: Micros; ranAt: Micros; messageId: string | null; error: string | null; nextRunAt: Micros | null }): Promise<boolean> {
    const { rowCount } = await this.db.query(
      `INSERT INTO schedule_runs (schedule_id, scheduled_for, ran_at, message_id, error) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (schedule_id, scheduled_for) DO NOTHING`,
      [run.scheduleId, formatTimestamp(run.scheduledFor), formatTimestamp(run.ranAt), run.messageId, run.error],
      "schedule_run_insert",
    );
    if ((rowCount ?? 0) === 0) return false;
    await this.db.query(
      `UPDATE schedules SET next_run_at = $2, last_run_at = $3, last_message_id = $4, last_error = $5, runs = runs + 1 WHERE id = $1`,
      [run.scheduleId, at(run.nextRunAt), formatTimestamp(run.scheduledFor), run.messageId, run.error],
      "schedule_after_run",
    );
    return true;
  }

  async nextDue(): Promise<Micros | null> {
    const { rows } = await this.db.query<{ next: Micros | null }>("SELECT min(next_run_at) AS next FROM schedules WHERE next_run_at IS NOT NULL", [], "schedules_next_due");
    return rows[0]?.next ?? null;
  }
}
