/**
 * Every service of the API with its handlers. A service whose issue has not
 * landed is registered with no handlers: each method answers
 * 501 / Unimplemented with error code not_implemented.
 */
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import type { Config } from "../platform/config.js";
import type { ActorWebhooks } from "../domain/actor-webhooks.js";
import type { Actors } from "../domain/actors.js";
import type { SecurityAudit } from "../domain/audit.js";
import type { ChannelAdmin } from "../domain/channel-admin.js";
import type { Channels } from "../domain/channels.js";
import type { ChannelHistory } from "../domain/history.js";
import type { AsyncJobs } from "../domain/jobs.js";
import type { Membership } from "../domain/membership.js";
import type { Messages } from "../domain/messages.js";
import type { Keys } from "../domain/keys.js";
import type { Limits } from "../domain/limits.js";
import type { Waitpoints } from "../domain/waitpoints.js";
import type { Schedules } from "../domain/schedules.js";
import type { PublicMinting } from "../domain/minting.js";
import type { Sessions } from "../domain/sessions.js";
import type { Quotas } from "../domain/quotas.js";
import type { TaskVerbs } from "../domain/task-verbs.js";
import type { UsageMetrics } from "../domain/usage-metrics.js";
import { FixedWindowLimiter } from "../domain/rate-limit.js";
import type { Clock } from "../model/time.js";
import type { WebhookDeliveryLog } from "../domain/webhook-deliveries.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { isLoopback } from "../platform/address-policy.js";
import { actorService } from "./actor-service.js";
import { adminService } from "./admin-service.js";
import { channelHistoryHandlers } from "./channel-history-service.js";
import { channelHandlers } from "./channel-service.js";
import { compatService } from "./compat-service.js";
import { jobService, type PdfAvailability } from "./job-service.js";
import { keyService } from "./key-service.js";
import { limitService } from "./limit-service.js";
import { waitpointService } from "./waitpoint-service.js";
import { scheduleService } from "./schedule-service.js";
import { membershipHandlers } from "./membership-service.js";
import { messageService } from "./message-service.js";
import { securityService } from "./security-service.js";
import { sessionService } from "./session-service.js";
import { webhookDeliveryHandlers } from "./webhook-delivery-service.js";
import type { A2aPush } from "../domain/a2a-push.js";

/** The use cases the handlers call, wired to their adapters by the composition root (app.ts). */
export interface Domain {
  keys: Keys;
  channels: Channels;
  membership: Membership;
  history: ChannelHistory;
  webhookDeliveries: WebhookDeliveryLog;
  messages: Messages;
  actors: Actors;
  actorWebhooks: ActorWebhooks;
  channelAdmin: ChannelAdmin;
  jobs: AsyncJobs;
  minting: PublicMinting;
  sessions: Sessions;
  limits: Limits;
  waitpoints: Waitpoints;
  a2aPush: A2aPush;
  schedules: Schedules;
  audit: SecurityAudit;
  quotas: Quotas;
  taskVerbs: TaskVerbs;
  usageMetrics: UsageMetrics;
}

export interface ServiceDependencies {
  domain: Domain;
  clock: Clock;
  config: Config;
  mintLimiter: FixedWindowLimiter;
  /** Defaults to "the configured Chromium is installed" (a process without a renderer of its own). */
  pdfAvailable?: PdfAvailability;
}

/** Wrong waitpoint tokens one address may present per minute (docs/decisions.md#waitpoints): 256-bit tokens are not guessed, but each try costs a read. */
export const WRONG_WAITPOINT_TOKENS_PER_MINUTE = 30;

export function createServices({ domain, clock, config, mintLimiter, pdfAvailable }: ServiceDependencies): ServiceEntry[] {
  return [
    keyService(domain.keys, { limiter: mintLimiter, listensOnLoopbackOnly: isLoopback(config.host) && !config.trustProxy }, domain.minting, domain.quotas),
    serviceEntry(ChannelService, {
      ...channelHandlers(domain.channels),
      ...membershipHandlers(domain.membership),
      ...channelHistoryHandlers(domain.history),
      ...webhookDeliveryHandlers(domain.webhookDeliveries),
    }),
    messageService(domain.messages, clock),
    actorService(domain.actors, domain.actorWebhooks),
    adminService(domain.channelAdmin, domain.keys, domain.minting, domain.audit, domain.quotas),
    sessionService(domain.sessions),
    limitService(domain.limits),
    scheduleService(domain.schedules),
    waitpointService(domain.waitpoints, { clock, wrongTokenLimiter: new FixedWindowLimiter(WRONG_WAITPOINT_TOKENS_PER_MINUTE, 60_000, clock) }),
    securityService(domain.audit),
    jobService(domain.jobs, { config, pdfAvailable }),
    compatService({ verbs: domain.taskVerbs, usage: domain.usageMetrics, quotas: domain.quotas, clock }),
  ];
}
