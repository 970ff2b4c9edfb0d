/**
 * Every service of the API with its handlers. A service whose issue has not
 * landed is registered with no handlers: each method answers
 * 501 / Unimplemented with error code not_implemented.
 */
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import type { WakeBus } from "../bus/wake-bus.js";
import type { Config } from "../platform/config.js";
import { ActorWebhooks } from "../domain/actor-webhooks.js";
import { Actors } from "../domain/actors.js";
import { ChannelAdmin } from "../domain/channel-admin.js";
import { Channels } from "../domain/channels.js";
import { ChannelHistory } from "../domain/history.js";
import { Membership } from "../domain/membership.js";
import { Messages } from "../domain/messages.js";
import type { Keys } from "../domain/keys.js";
import type { FixedWindowLimiter } from "../domain/rate-limit.js";
import type { Clock } from "../model/time.js";
import { WebhookDeliveryLog } from "../domain/webhook-deliveries.js";
import type { JobStore } from "../ports/jobs.js";
import type { WebhookStore } from "../ports/webhooks.js";
import { serviceEntry, type ServiceEntry } from "../server/rpc/pipeline.js";
import { findChannelView } from "../store/channels.js";
import type { Db } from "../store/db.js";
import { MessageStore } from "../store/messages.js";
import { actorService } from "./actor-service.js";
import { adminService } from "./admin-service.js";
import { channelHistoryHandlers } from "./channel-history-service.js";
import { channelHandlers } from "./channel-service.js";
import { jobService, type PdfAvailability } from "./job-service.js";
import { keyService } from "./key-service.js";
import { membershipHandlers } from "./membership-service.js";
import { messageService } from "./message-service.js";
import { webhookDeliveryHandlers } from "./webhook-delivery-service.js";

export interface ServiceDependencies {
  db: Db;
  jobStore: JobStore;
  webhookStore: WebhookStore;
  bus: WakeBus;
  clock: Clock;
  config: Config;
  keys: Keys;
  mintLimiter: FixedWindowLimiter;
  /** Defaults to "the configured Chromium is installed" (a process without a renderer of its own). */
  pdfAvailable?: PdfAvailability;
}

export function createServices(deps: ServiceDependencies): ServiceEntry[] {
  const actors = new Actors(deps.db);
  const messages = new Messages(
    new MessageStore(deps.db),
    (identifier, caller) => findChannelView(deps.db, identifier, caller.keyId),
    actors,
    deps.clock,
    {
      maxContentBytes: deps.config.maxContentBytes,
      bus: deps.bus,
      afterCommit: (fn) => deps.db.afterCommit(fn),
      longPollMaxWaitSeconds: deps.config.longPollMaxWaitSeconds,
      longPollMaxWaiters: deps.config.longPollMaxWaiters,
      longPollMaxWaitersPerKey: deps.config.longPollMaxWaitersPerKey,
    },
  );
  return [
    keyService(deps.keys, deps.mintLimiter),
    serviceEntry(ChannelService, {
      ...channelHandlers(new Channels(deps.db, { defaultDiscoverable: deps.config.defaultDiscoverable })),
      ...membershipHandlers(new Membership(deps.db, deps.clock)),
      ...channelHistoryHandlers(new ChannelHistory(deps.db, (identifier, caller) => findChannelView(deps.db, identifier, caller.keyId))),
      ...webhookDeliveryHandlers(new WebhookDeliveryLog(deps.webhookStore, (identifier, caller) => findChannelView(deps.db, identifier, caller.keyId))),
    }),
    messageService(messages, deps.clock),
    actorService(actors, new ActorWebhooks(deps.webhookStore, deps.clock)),
    adminService(new ChannelAdmin(deps.db)),
    jobService(deps),
  ];
}
