/** ScheduleService handlers: requests to domain calls, domain results to responses (docs/decisions.md#schedules). */
import type { ScheduledMessage as ScheduledMessageProto } from "../../gen/agentbus/v1/schedule_pb.js";
import { ScheduleService } from "../../gen/agentbus/v1/schedule_service_pb.js";
import type { ScheduledMessageInput, Schedules } from "../domain/schedules.js";
import type { JsonValue } from "../model/json.js";
import type { ScheduleRecord } from "../model/schedules.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

const timestamp = (t: number | null) => (t === null ? undefined : toProtoTimestamp(t));

function renderSchedule(s: ScheduleRecord) {
  return {
    id: s.id,
    channelId: s.channelId,
    cron: s.cron,
    timezone: s.timezone,
    message: {
      content: s.message.content,
      metadata: s.message.metadata,
      groupKey: s.message.groupKey ?? undefined,
      priority: s.message.priority ?? undefined,
    },
    nextRunAt: timestamp(s.nextRunAt),
    paused: s.paused,
    createdAt: toProtoTimestamp(s.createdAt),
    updatedAt: toProtoTimestamp(s.updatedAt),
    createdByKeyId: s.createdByKeyId,
    lastRunAt: timestamp(s.lastRunAt),
    lastMessageId: s.lastMessageId ?? undefined,
    lastError: s.lastError ?? undefined,
    runs: s.runs,
  };
}

const messageInput = (m: ScheduledMessageProto | undefined): ScheduledMessageInput | undefined =>
  m === undefined
    ? undefined
    : { content: m.content, metadata: m.metadata as { [key: string]: JsonValue } | undefined, groupKey: m.groupKey, priority: m.priority };

export function scheduleService(schedules: Schedules): ServiceEntry {
  return serviceEntry(ScheduleService, {
    async createSchedule(request, ctx) {
      return renderSchedule(
        await schedules.create(callerOf(ctx), { channel: request.channel, cron: request.cron, timezone: request.timezone, message: messageInput(request.message), paused: request.paused }),
      );
    },
    async listSchedules(request, ctx) {
      return { data: (await schedules.list(callerOf(ctx), request.channel)).map(renderSchedule) };
    },
    async getSchedule(request, ctx) {
      return renderSchedule(await schedules.get(callerOf(ctx), request.id));
    },
    async updateSchedule(request, ctx) {
      const u = request.update;
      const change = { cron: u?.cron, timezone: u?.timezone, message: messageInput(u?.message), paused: u?.paused };
      return renderSchedule(await schedules.update(callerOf(ctx), request.id, change, request.updateMask?.paths));
    },
    async deleteSchedule(request, ctx) {
      await schedules.delete(callerOf(ctx), request.id);
      return {};
    },
  });
}
