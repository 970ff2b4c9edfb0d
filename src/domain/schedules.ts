/**
 * Schedules (issue 29, item 6; docs/decisions.md#schedules): a message
 * posted to a channel at each tick of a cron expression, as the key that
 * created the schedule. This module is the resource (create, read, change,
 * delete) and the cron rules; running the ticks is schedule-ticks.ts.
 *
 * Any key that may post to the channel creates a schedule and reads the
 * channel's schedules; the creator or the channel's owner changes or
 * deletes one. A schedule of a channel the caller cannot use does not
 * exist for it (404 schedule_not_found).
 */
import { randomUUID } from "node:crypto";
import { Cron } from "croner";
import type { Caller } from "../model/caller.js";
import type { ChannelView } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import type { JsonValue } from "../model/json.js";
import type { ScheduleRecord, ScheduledMessage } from "../model/schedules.js";
import type { Clock, Micros } from "../model/time.js";
import type { ChannelStore } from "../ports/channels.js";
import type { ScheduleStore } from "../ports/schedules.js";
import { canUse, namedChannel } from "./channel.js";
import { validateGroupKey, validatePriority } from "./dispatch-rules.js";
import { byteLength, MAX_METADATA_BYTES } from "./message-rules.js";
import { updateMaskParser } from "./update-mask.js";

export const SCHEDULE_RULES = {
  /** Characters of a cron expression. */
  maxCronLength: 256,
  /** Characters of a time zone name. */
  maxTimezoneLength: 64,
  /** Schedules one key may have: storage, and ticks, one key may take. */
  maxPerKey: 100,
} as const;

/**
 * The tick after `after` (strictly), in the time zone; null when the
 * expression fires no more. Croner (a maintained, dependency-free parser)
 * reads five fields, or six with seconds first, and walks DST changes in
 * the zone as cron does (legacy mode: day-of-month and day-of-week are OR'ed).
 */
export function nextTick(cron: string, timezone: string, after: Micros): Micros | null {
  const next = new Cron(cron, { timezone, paused: true }).nextRun(new Date(Math.floor(after / 1000)));
  return next === null ? null : next.getTime() * 1000;
}

export function validateCron(cron: string, timezone: string, now: Micros): string {
  const text = cron.trim().replace(/\s+/g, " ");
  const fields = text.split(" ").length;
  if (text === "" || text.length > SCHEDULE_RULES.maxCronLength || fields < 5 || fields > 6) {
    throw new ApiError("invalid_cron", "A cron expression has five fields (minute hour day month weekday), or six with seconds first", { details: { field: "cron" } });
  }
  let next: Micros | null;
  try {
    next = nextTick(text, timezone, now);
  } catch (err) {
    throw new ApiError("invalid_cron", `Invalid cron expression: ${err instanceof Error ? err.message : String(err)}`.slice(0, 300), { details: { field: "cron" } });
  }
  if (next === null) throw new ApiError("invalid_cron", "This cron expression never fires", { details: { field: "cron" } });
  return text;
}

export function validateTimezone(timezone: string | undefined): string {
  const zone = timezone === undefined || timezone === "" ? "UTC" : timezone;
  if (zone.length > SCHEDULE_RULES.maxTimezoneLength) throw new ApiError("invalid_timezone", undefined, { details: { field: "timezone" } });
  try {
    // Canonical spelling ("utc" is "UTC"): the IANA name as the runtime knows it.
    return new Intl.DateTimeFormat("en-US", { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw new ApiError("invalid_timezone", `Unknown time zone '${zone}'`, { details: { field: "timezone" } });
  }
}

export interface ScheduledMessageInput {
  content: string | undefined;
  metadata: { [key: string]: JsonValue } | undefined;
  groupKey: string | undefined;
  priority: number | undefined;
}

export interface NewScheduleInput {
  channel: string;
  cron: string;
  timezone: string | undefined;
  message: ScheduledMessageInput | undefined;
  paused: boolean | undefined;
}

export interface ScheduleChangeInput {
  cron: string | undefined;
  timezone: string | undefined;
  message: ScheduledMessageInput | undefined;
  paused: boolean | undefined;
}

/** The ScheduleUpdate fields, by their proto (REST) names. */
export const SCHEDULE_UPDATABLE_FIELDS = ["cron", "timezone", "message", "paused"] as const;
const parseMask = updateMaskParser(SCHEDULE_UPDATABLE_FIELDS, "ScheduleUpdate");

export interface SchedulesOptions {
  clock: Clock;
  /** A post's content limit (AGENTBUS_MAX_CONTENT_BYTES). */
  maxContentBytes: number;
  newId?: () => string;
}

const notFound = () => new ApiError("schedule_not_found");

export class Schedules {
  private readonly newId: () => string;

  constructor(
    private readonly store: ScheduleStore,
    private readonly channels: Pick<ChannelStore, "findView">,
    private readonly options: SchedulesOptions,
  ) {
    this.newId = options.newId ?? randomUUID;
  }

  async create(caller: Caller, input: NewScheduleInput): Promise<ScheduleRecord> {
    const now = this.options.clock.now();
    const timezone = validateTimezone(input.timezone);
    const cron = validateCron(input.cron, timezone, now);
    const message = this.checkMessage(input.message);
    const channel = namedChannel(await this.channels.findView(input.channel, caller.keyId), input.channel);
    if (!canUse(channel, caller)) throw new ApiError("channel_access_denied");
    const paused = input.paused ?? false;
    const schedule: ScheduleRecord = {
      id: this.newId(),
      channelId: channel.id,
      createdByKeyId: caller.keyId,
      cron,
      timezone,
      message,
      paused,
      nextRunAt: paused ? null : nextTick(cron, timezone, now),
      lastRunAt: null,
      lastMessageId: null,
      lastError: null,
      runs: 0,
      createdAt: now,
      updatedAt: now,
    };
    if ((await this.store.insert(schedule, SCHEDULE_RULES.maxPerKey)) === "limit_reached") {
      throw new ApiError("too_many_schedules", `A key may have at most ${SCHEDULE_RULES.maxPerKey} schedules`, { details: { limit: SCHEDULE_RULES.maxPerKey } });
    }
    return schedule;
  }

  /** A channel's schedules (for those who may use it), or the caller's own. */
  async list(caller: Caller, channelIdentifier: string | undefined): Promise<ScheduleRecord[]> {
    if (channelIdentifier === undefined || channelIdentifier === "") return this.store.list({ createdByKeyId: caller.keyId });
    const channel = namedChannel(await this.channels.findView(channelIdentifier, caller.keyId), channelIdentifier);
    if (!canUse(channel, caller)) throw new ApiError("channel_access_denied");
    return this.store.list({ channelId: channel.id });
  }

  async get(caller: Caller, id: string): Promise<ScheduleRecord> {
    return (await this.readable(caller, id)).schedule;
  }

  /**
   * Changes the fields the mask names (over REST always given: the body's
   * keys); without one, the fields that are set. A new cron or time zone,
   * or a resume, takes the next tick from now. Under the row's lock, so it
   * is judged against the schedule as it is, not as a tick left it.
   */
  async update(caller: Caller, id: string, change: ScheduleChangeInput, mask: readonly string[] | undefined): Promise<ScheduleRecord> {
    const fields = mask === undefined ? SCHEDULE_UPDATABLE_FIELDS.filter((f) => change[f] !== undefined) : parseMask(mask);
    return this.store.atomically(async () => {
      const { schedule } = await this.changeable(caller, id);
      const now = this.options.clock.now();
      const next = { ...schedule, updatedAt: now };
      if (fields.includes("timezone")) next.timezone = validateTimezone(change.timezone);
      if (fields.includes("cron")) {
        if (change.cron === undefined) throw new ApiError("invalid_cron", "A schedule needs a cron expression", { details: { field: "cron" } });
        next.cron = change.cron;
      }
      if (fields.includes("cron") || fields.includes("timezone")) next.cron = validateCron(next.cron, next.timezone, now);
      if (fields.includes("message")) next.message = this.checkMessage(change.message);
      if (fields.includes("paused")) next.paused = change.paused ?? false;
      const retimed = fields.includes("cron") || fields.includes("timezone") || (schedule.paused && !next.paused);
      if (next.paused) next.nextRunAt = null;
      else if (retimed || next.nextRunAt === null) next.nextRunAt = nextTick(next.cron, next.timezone, now);
      await this.store.save(next);
      return next;
    });
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.store.atomically(async () => {
      await this.changeable(caller, id);
      await this.store.delete(id);
    });
  }

  /** The schedule and its channel as the caller sees it; 404 when either is not the caller's to see. */
  private async readable(caller: Caller, id: string): Promise<{ schedule: ScheduleRecord; channel: ChannelView }> {
    if (!isUuid(id)) throw notFound();
    const schedule = await this.store.find(id);
    if (!schedule) throw notFound();
    const channel = await this.channels.findView(schedule.channelId, caller.keyId);
    if (channel === undefined || !canUse(channel, caller)) throw notFound();
    return { schedule, channel };
  }

  private async changeable(caller: Caller, id: string): Promise<{ schedule: ScheduleRecord; channel: ChannelView }> {
    const found = await this.readable(caller, id);
    if (found.schedule.createdByKeyId !== caller.keyId && found.channel.createdByKeyId !== caller.keyId) {
      throw new ApiError("forbidden", "Only the key that created a schedule, or the channel's owner, may change or delete it");
    }
    return found;
  }

  private checkMessage(input: ScheduledMessageInput | undefined): ScheduledMessage {
    const content = input?.content ?? "";
    if (content === "") throw new ApiError("invalid_schedule", "A schedule's message needs content", { details: { field: "message.content" } });
    const bytes = byteLength(content);
    if (bytes > this.options.maxContentBytes) {
      throw new ApiError("content_too_large", `'message.content' is ${bytes} bytes; the limit is ${this.options.maxContentBytes}`, { details: { field: "message.content" } });
    }
    const metadata = input?.metadata ?? {};
    if (byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) throw new ApiError("metadata_too_large", undefined, { details: { field: "message.metadata" } });
    return {
      content,
      metadata,
      groupKey: validateGroupKey(input?.groupKey),
      priority: input?.priority === undefined ? null : validatePriority(input.priority),
    };
  }
}
