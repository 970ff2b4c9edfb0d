/** The purge (docs/decisions.md#expiry-and-history): everything that is due for archiving or deletion, across the aggregates. */
import type { Micros } from "../model/time.js";

export interface PurgeCounts {
  /** Expired live messages moved to message_history (reason 'expired'). */
  archivedMessages: number;
  /** History rows deleted after their channel's retention_days. */
  deletedHistory: number;
  /** Idempotency records past their window. */
  deletedIdempotencyRecords: number;
  /** Channel events past their expires_at. */
  deletedChannelEvents: number;
  /** Invitations that expired or were revoked. */
  deletedInvitations: number;
  /** Access requests decided more than RESOLVED_ACCESS_REQUEST_RETENTION_DAYS ago. */
  deletedAccessRequests: number;
  /** Webhook delivery log rows older than WEBHOOK_LOG_RETENTION_DAYS. */
  deletedWebhookDeliveries: number;
  /** Mention-push rate windows that have run out (docs/decisions.md#mention-pushes). */
  deletedMentionWindows: number;
  /** Circuit-breaker rows of webhook destinations not heard of for WEBHOOK_DESTINATION_RETENTION_DAYS. */
  deletedWebhookDestinations: number;
  /** Async jobs whose result (PDF, input) expired and was cleared; the job itself stays (410). */
  expiredJobResults: number;
  /** Async jobs deleted TOMBSTONE_DAYS after their result expired (404 from then on). */
  deletedJobs: number;
  /** Shared sessions past their expires_at (docs/decisions.md#sessions). */
  deletedSessions: number;
  /** Security audit events older than the retention period (docs/decisions.md#security-audit). */
  deletedAuditEvents: number;
  /** Rows of message groups with no unfinished message and no post for GROUP_IDLE_MINUTES (docs/decisions.md#dispatch). */
  deletedIdleGroups: number;
  /** Waitpoints finished more than a week ago. */
  deletedWaitpoints: number;
  /** Schedules' ticks recorded more than a week ago. */
  deletedScheduleRuns: number;
  /** A2A push-notification configs past their retention. */
  deletedPushConfigs: number;
}

export interface PurgeOptions {
  /** Days security audit events are kept (AGENTBUS_AUDIT_RETENTION_DAYS); default 90. */
  auditRetentionDays?: number;
  /** Rows per transaction; default 1,000. */
  batchSize?: number;
  /** Checked between batches: a worker that is shutting down stops at a batch boundary. */
  signal?: AbortSignal;
  /** Called after every batch (the job runner extends its lock here). */
  onBatch?: () => Promise<void>;
}

export interface PurgeStore {
  /** Archives and deletes everything that is due at `now`; returns what it did. */
  purge(now: Micros, options?: PurgeOptions): Promise<PurgeCounts>;
}
