/**
 * runWorker(): the consume loop of a claimable channel with leases.
 *
 * Each message is claimed with a lease, the lease is extended while the
 * handler runs, and the message is acked on success or released on failure.
 * A worker that dies stops heartbeating, so its lease runs out and the
 * message becomes claimable again. Processing is at-least-once: a message
 * is handed out again only when its lease runs out first (a crashed worker,
 * or heartbeats or the ack failing for longer than the lease).
 */
import type { CallOptions } from "@connectrpc/connect";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import { MessageStatus } from "../../../gen/agentbus/v1/message_service_pb.js";
import type { AgentbusClient } from "./client.js";
import { isAgentbusError } from "./errors.js";
import { idempotent } from "./idempotency.js";
import { backoffMs, isTransient, sleep } from "./retry.js";

export interface WorkContext {
  /**
   * Aborted when the worker is stopped or the lease was lost (another worker
   * may then take the message). A handler that honours it lets the worker
   * stop promptly; its outcome then decides ack or release as usual.
   */
  signal: AbortSignal;
  leaseToken: string;
}

export interface WorkerOptions {
  client: AgentbusClient;
  /** Channel id or alias; must be a claimable channel. */
  channel: string;
  /** Resolve to ack the message, throw to release it for another attempt. */
  handle: (message: Message, context: WorkContext) => Promise<void> | void;
  /** Stops the loop; runWorker then resolves once the message in hand is settled. */
  signal?: AbortSignal;
  /** One of the caller's actors (id, alias or name); default the key's own actor. */
  actor?: string;
  /** 30..3600 (the service's bounds), default 300. */
  leaseSeconds?: number;
  /** Default a third of the lease, so two heartbeats can fail before it runs out. */
  heartbeatIntervalMs?: number;
  /** Long-poll wait per list call; the service caps it (25 s by default). Default 20. */
  waitSeconds?: number;
  /** Messages listed per call, 1..100; default 10. */
  batchSize?: number;
  /**
   * How long this worker leaves a message it failed on to other workers
   * before trying it again itself. Default 10 s.
   */
  retryFailedAfterMs?: number;
  /** Failures the loop survives: handler errors, transient RPC errors, a lost lease. */
  onError?: (error: unknown, message: Message | undefined) => void;
}

export interface WorkerStats {
  acked: number;
  failed: number;
  /** Messages another worker claimed first, or that expired or vanished before the claim. */
  skipped: number;
}

/** Thrown to the handler's signal, and reported to onError, when a heartbeat finds the lease gone. */
export class LeaseLostError extends Error {
  override readonly name = "LeaseLostError";
  constructor(
    readonly messageId: string,
    cause: unknown,
  ) {
    super(`The lease on message ${messageId} was lost; another worker may process it`, { cause });
  }
}

const DEFAULTS = { leaseSeconds: 300, waitSeconds: 20, batchSize: 10, retryFailedAfterMs: 10_000 } as const;
/** When every listed message is one this worker just failed on, look again after this long. */
const IDLE_RELIST_MS = 1_000;
const ERROR_BACKOFF = { minMs: 200, maxMs: 10_000 } as const;
/** Ack and release are retried this many times on transient errors before the lease is left to run out. */
const SETTLE_ATTEMPTS = 4;

/** Runs until `signal` aborts (resolving with counts) or a non-transient error makes progress impossible (rejecting). */
export async function runWorker(options: WorkerOptions): Promise<WorkerStats> {
  const { client, channel, signal } = options;
  const waitSeconds = options.waitSeconds ?? DEFAULTS.waitSeconds;
  const stats: WorkerStats = { acked: 0, failed: 0, skipped: 0 };
  const report = options.onError ?? (() => {});
  // Message id → when this worker may retry it; others may take it meanwhile.
  const coolingUntil = new Map<string, number>();
  let errors = 0;

  const limit = options.batchSize ?? DEFAULTS.batchSize;
  // Normally "0": see below. Moves past a full page of messages this worker
  // failed lately, so a few poison messages at the head cannot stall it.
  let since = "0";
  while (!signal?.aborted) {
    let page: Message[];
    let nextCursor: string | undefined;
    try {
      // From the start ("0") with status=unclaimed rather than from a cursor:
      // a message released by another worker, or whose lease ran out, sits
      // behind any cursor this worker would have advanced.
      const response = await client.messages.listMessages(
        { identifier: channel, since, status: MessageStatus.UNCLAIMED, wait: since === "0" ? waitSeconds : 0, limit },
        { signal, timeoutMs: (waitSeconds + 30) * 1000 },
      );
      page = response.data;
      nextCursor = response.nextCursor;
      errors = 0;
    } catch (err) {
      if (signal?.aborted) break;
      if (!isTransient(err)) throw err;
      report(err, undefined);
      await sleep(backoffMs(++errors, ERROR_BACKOFF.minMs, ERROR_BACKOFF.maxMs), signal);
      continue;
    }

    const now = Date.now();
    for (const [id, until] of coolingUntil) if (until <= now) coolingUntil.delete(id);
    const open = page.filter((m) => !coolingUntil.has(m.id));
    if (open.length === 0) {
      // Only messages this worker failed lately: look past a full page of
      // them, else pause (it came back at once) and start over.
      if (page.length === limit && nextCursor) {
        since = nextCursor;
        continue;
      }
      since = "0";
      if (page.length > 0) await sleep(IDLE_RELIST_MS, signal);
      continue;
    }
    since = "0";
    for (const message of open) {
      if (signal?.aborted) break;
      const outcome = await processOne(options, message, report);
      stats[outcome]++;
      if (outcome === "failed") coolingUntil.set(message.id, Date.now() + (options.retryFailedAfterMs ?? DEFAULTS.retryFailedAfterMs));
    }
  }
  return stats;
}

async function processOne(options: WorkerOptions, listed: Message, report: (error: unknown, message: Message | undefined) => void): Promise<keyof WorkerStats> {
  const { client, actor, signal } = options;
  const leaseSeconds = options.leaseSeconds ?? DEFAULTS.leaseSeconds;
  let leaseToken: string;
  let message: Message;
  try {
    const lease = await client.messages.claimMessageWithLease({ messageId: listed.id, actor, leaseSeconds });
    leaseToken = lease.leaseToken;
    message = lease.message ?? listed;
  } catch (err) {
    // Lost the race, or the message went away: someone else's work now.
    if (isAgentbusError(err, "already_claimed") || isAgentbusError(err, "message_expired") || isAgentbusError(err, "message_not_found")) return "skipped";
    if (!isTransient(err)) throw err;
    report(err, listed);
    return "skipped";
  }

  const work = new AbortController();
  const stop = () => work.abort(signal?.reason);
  signal?.addEventListener("abort", stop, { once: true });
  // Stopped while the claim was in flight: the listener above will not fire.
  if (signal?.aborted) stop();
  const heartbeat = keepLeaseAlive(options, leaseToken, leaseSeconds, message, work, report);
  let failure: { error: unknown } | undefined;
  try {
    await options.handle(message, { signal: work.signal, leaseToken });
  } catch (error) {
    failure = { error };
  } finally {
    signal?.removeEventListener("abort", stop);
    await heartbeat.stop();
  }

  if (heartbeat.lost) {
    // The message may already be in another worker's hands: neither ack
    // (that would end its work) nor release (it is not ours to give back).
    report(heartbeat.lost, message);
    return "failed";
  }
  // One idempotency key per settle, so a retried ack or release that did
  // reach the service is replayed rather than refused.
  const once: CallOptions = idempotent();
  if (failure) {
    report(failure.error, message);
    await settle(() => client.messages.releaseMessage({ messageId: message.id, actor }, once), report, message);
    return "failed";
  }
  await settle(() => client.messages.ackMessage({ messageId: message.id, actor }, once), report, message);
  return "acked";
}

interface Heartbeat {
  /** The lease-expired or forbidden error, once a heartbeat found the lease gone. */
  lost: LeaseLostError | undefined;
  stop(): Promise<void>;
}

function keepLeaseAlive(
  options: WorkerOptions,
  leaseToken: string,
  leaseSeconds: number,
  message: Message,
  work: AbortController,
  report: (error: unknown, message: Message | undefined) => void,
): Heartbeat {
  const intervalMs = options.heartbeatIntervalMs ?? (leaseSeconds * 1000) / 3;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let inFlight: Promise<void> = Promise.resolve();
  const state: Heartbeat = {
    lost: undefined,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
  const beat = async () => {
    try {
      await options.client.messages.heartbeatLease({ leaseToken, leaseSeconds }, { timeoutMs: Math.max(intervalMs, 5_000) });
    } catch (err) {
      if (!stopped && (isAgentbusError(err, "lease_expired") || isAgentbusError(err, "forbidden"))) {
        state.lost = new LeaseLostError(message.id, err);
        work.abort(state.lost);
        return;
      }
      // A missed beat is survivable: the lease outlasts several intervals.
      if (!stopped) report(err, message);
    }
    schedule();
  };
  // Chained timeouts, not setInterval: a slow heartbeat never overlaps the next.
  const schedule = () => {
    if (!stopped) timer = setTimeout(() => (inFlight = beat()), intervalMs);
  };
  schedule();
  return state;
}

async function settle(call: () => Promise<unknown>, report: (error: unknown, message: Message | undefined) => void, message: Message): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await call();
      return;
    } catch (err) {
      if (!isTransient(err) || attempt === SETTLE_ATTEMPTS) {
        // Left to the lease: when it runs out the message is claimable again.
        report(err, message);
        return;
      }
      await sleep(backoffMs(attempt, ERROR_BACKOFF.minMs, ERROR_BACKOFF.maxMs));
    }
  }
}
