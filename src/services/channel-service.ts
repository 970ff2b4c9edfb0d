/**
 * ChannelService handlers for the channel itself: create, discover, get,
 * update, delete and aliases. Other modules contribute the rest of the
 * service's methods; services/index.ts merges them into one entry.
 */
import type { Channels } from "../domain/channels.js";
import { callerOf } from "../protocol/context.js";
import type { ChannelHandlers } from "./handlers.js";
import { accessFromProto, dispatchFromProto, modeFromProto, renderChannel, renderChannelSummary } from "./render-channel.js";

export function channelHandlers(channels: Channels): ChannelHandlers {
  return {
    async createChannel(request, ctx) {
      const channel = await channels.create(callerOf(ctx), {
        name: request.name,
        mode: modeFromProto(request.mode),
        access: accessFromProto(request.access),
        discoverable: request.discoverable,
        description: request.description,
        metadataSchema: request.metadataSchema,
        pinnedMessage: request.pinnedMessage,
        webhookUrl: request.webhookUrl,
        webhookSecret: request.webhookSecret,
        relatedChannels: request.relatedChannels,
        ttlSeconds: request.ttlSeconds,
        retentionDays: request.retentionDays,
        maxMessages: request.maxMessages,
        maxWritesPerMinute: request.maxWritesPerMinute,
        maxDeliveries: request.maxDeliveries,
        deadLetterChannel: request.deadLetterChannel,
        groupConcurrency: request.groupConcurrency,
        dispatch: dispatchFromProto(request.dispatch),
        priorityAgingSeconds: request.priorityAgingSeconds,
        limits: request.limits,
        a2a: request.a2a,
        a2aForward: request.a2aForward,
      });
      return renderChannel(channel, callerOf(ctx).keyId);
    },

    async discoverChannels(request, ctx) {
      const page = await channels.discover(callerOf(ctx), { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderChannelSummary), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },

    async listMyChannels(request, ctx) {
      const page = await channels.listMine(callerOf(ctx), { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderChannelSummary), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },

    async getChannel(request, ctx) {
      const caller = callerOf(ctx);
      return renderChannel(await channels.get(caller, request.identifier), caller.keyId);
    },

    async updateChannel(request, ctx) {
      const update = request.channel;
      // Over REST the transcoder always sets the mask (the body's keys, nulls
      // included). A gRPC caller that sends no mask gets the fields it set
      // (those with presence, non-zero enums, a non-empty related_channels):
      // see buildChannelPatch.
      const mask = request.updateMask?.paths;
      const channel = await channels.update(
        callerOf(ctx),
        request.identifier,
        {
          name: update?.name,
          mode: update ? modeFromProto(update.mode) : undefined,
          access: update ? accessFromProto(update.access) : undefined,
          discoverable: update?.discoverable,
          description: update?.description,
          metadataSchema: update?.metadataSchema,
          pinnedMessage: update?.pinnedMessage,
          relatedChannels: update?.relatedChannels ?? [],
          retentionDays: update?.retentionDays,
          maxMessages: update?.maxMessages,
          maxWritesPerMinute: update?.maxWritesPerMinute,
          paused: update?.paused,
          webhookUrl: update?.webhookUrl,
          webhookSecret: update?.webhookSecret,
          maxDeliveries: update?.maxDeliveries,
          deadLetterChannel: update?.deadLetterChannel,
          groupConcurrency: update?.groupConcurrency,
          dispatch: update ? dispatchFromProto(update.dispatch) : undefined,
          priorityAgingSeconds: update?.priorityAgingSeconds,
          limits: update?.limits ?? [],
          a2a: update?.a2a,
          a2aForward: update?.a2aForward,
        },
        mask,
      );
      return renderChannel(channel, callerOf(ctx).keyId);
    },

    async deleteChannel(request, ctx) {
      await channels.delete(callerOf(ctx), request.identifier);
      return {};
    },

    async addChannelAlias(request, ctx) {
      const caller = callerOf(ctx);
      return renderChannel(await channels.addAlias(caller, request.identifier, request.alias), caller.keyId);
    },

    async removeChannelAlias(request, ctx) {
      const caller = callerOf(ctx);
      return renderChannel(await channels.removeAlias(caller, request.identifier, request.alias), caller.keyId);
    },
  };
}
