/**
 * runWorker(): the consume loop of a claimable channel.
 *
 * The worker leases open work with ReceiveMessages (up to `batchSize` at a
 * time, long-polling when there is none), heartbeats each held lease while
 * the message waits for and runs its handler, acks with the handler's return
 * value as the message's `result`, and releases the message at once when the
 * handler throws. It keeps no retry state of its own: the service counts
 * deliveries (`deliveryCount`), and a channel with a delivery limit moves a
 * message that keeps failing to its dead-letter channel, which is where the
 * retrying stops. A worker that dies stops heartbeating, so its leases run
 * out and the messages become receivable again: processing is at-least-once.
 */
import type { CallOptions } from "@connectrpc/connect";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import type { ReceivedMessage } from "../../../gen/agentbus/v1/message_service_pb.js";
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
  /** How many times the service has handed this message out, this time included: above 1 it is a retry. */
  deliveryCount: number;
}

/**
 * What a handler may return. A string is the message's `result` as is;
 * `undefined` acks without a result; anything else is JSON-encoded.
 */
export type WorkResult = unknown;

export interface WorkerOptions {
  client: AgentbusClient;
  /** Channel id, alias or name; must be a claimable channel. */
  channel: string;
  /**
   * Resolve to ack the message (the value becomes its `result`, see
   * WorkResult), throw to release it for another delivery.
   */
  handle: (message: Message, context: WorkContext) => Promise<WorkResult> | WorkResult;
  /** Stops the loop; runWorker then resolves once the messages in hand are settled. */
  signal?: AbortSignal;
  /** One of the caller's actors (id, alias or name); default the key's own actor. */
  actor?: string;
  /** 30..3600 (the service's bounds), default 300. */
  leaseSeconds?: number;
  /** Default a third of the lease, so two heartbeats can fail before it runs out. */
  heartbeatIntervalMs?: number;
  /** Long-poll wait per receive call; the service caps it (25 s by default). Default 20. */
  waitSeconds?: number;
  /** Messages leased per receive call (the prefetch), 1..100; default 1. */
  batchSize?: number;
  /** Handlers running at once; default `batchSize`. Leased messages beyond it wait, heartbeated, for a turn. */
  concurrency?: number;
  /**
   * Failures the loop survives: handler errors, transient RPC errors, a lost
   * lease, an ack the service refused (e.g. `result_too_large`).
   */
  onError?: (error: unknown, message: Message | undefined) => void;
}

export interface WorkerStats {
  /** Handled and acknowledged. */
  acked: number;
  /** Released after the handler failed or its ack was refused, or left to a lease that was lost. */
  failed: number;
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

const DEFAULTS = { leaseSeconds: 300, waitSeconds: 20, batchSize: 1 } as const;
const ERROR_BACKOFF = { minMs: 200, maxMs: 10_000 } as const;
/** Ack and release are retried this many times on transient errors before the lease is left to run out. */
const SETTLE_ATTEMPTS = 4;

type Report = (error: unknown, message: Message | undefined) => void;

/** Runs until `signal` aborts (resolving with counts) or a non-transient error makes progress impossible (rejecting). */
export async function runWorker(options: WorkerOptions): Promise<WorkerStats> {
  const { client, channel, signal, actor } = options;
  const waitSeconds = options.waitSeconds ?? DEFAULTS.waitSeconds;
  const leaseSeconds = options.leaseSeconds ?? DEFAULTS.leaseSeconds;
  const batchSize = options.batchSize ?? DEFAULTS.batchSize;
  const slots = new Slots(options.concurrency ?? batchSize);
  const stats: WorkerStats = { acked: 0, failed: 0 };
  const report: Report = options.onError ?? (() => {});
  const held = new Set<Promise<void>>();
  // Worker-wide, not per message: after a run of failures this worker pauses
  // before receiving again, so a poison message at the head of the queue is
  // not spun on by one worker as fast as the network allows.
  let failuresInARow = 0;
  let errors = 0;
  let fatal: { error: unknown } | undefined;

  while (!signal?.aborted) {
    if (held.size >= batchSize) {
      await Promise.race(held);
      continue;
    }
    if (failuresInARow > 0) await sleep(backoffMs(failuresInARow, ERROR_BACKOFF.minMs, ERROR_BACKOFF.maxMs), signal);
    if (signal?.aborted) break;
    let received: ReceivedMessage[];
    try {
      // Whole ms: a fractional grpc-timeout is a protocol error. No idempotency key: the client adds none to a waiting call, and the
      // service refuses a keyed one (idempotent_wait). A lost response leaves
      // its leases to run out, and the messages come back.
      const response = await client.messages.receiveMessages(
        { identifier: channel, maxMessages: batchSize - held.size, leaseSeconds, wait: waitSeconds, actor },
        { signal, timeoutMs: Math.ceil((waitSeconds + 30) * 1000) },
      );
      received = response.data;
      errors = 0;
    } catch (err) {
      if (signal?.aborted) break;
      if (!isTransient(err)) {
        fatal = { error: err };
        break;
      }
      report(err, undefined);
      await sleep(backoffMs(++errors, ERROR_BACKOFF.minMs, ERROR_BACKOFF.maxMs), signal);
      continue;
    }
    for (const lease of received) {
      if (lease.message === undefined) continue;
      const settled = processOne(options, lease.message, lease.leaseToken, leaseSeconds, slots, report).then((outcome) => {
        stats[outcome]++;
        failuresInARow = outcome === "failed" ? failuresInARow + 1 : 0;
      });
      const tracked = settled.finally(() => held.delete(tracked));
      held.add(tracked);
    }
  }
  // Every message in hand is acked or released before runWorker returns.
  await Promise.all(held);
  if (fatal) throw fatal.error;
  return stats;
}

async function processOne(options: WorkerOptions, message: Message, leaseToken: string, leaseSeconds: number, slots: Slots, report: Report): Promise<keyof WorkerStats> {
  const { client, actor, signal } = options;
  const work = new AbortController();
  const stop = () => work.abort(signal?.reason);
  signal?.addEventListener("abort", stop, { once: true });
  if (signal?.aborted) stop();
  // From the moment of receipt: a message waiting for a free slot holds a lease too.
  const heartbeat = keepLeaseAlive(options, leaseToken, leaseSeconds, message, work, report);
  let outcome: { result: string | undefined } | { error: unknown } | undefined;
  await slots.acquire();
  try {
    // Stopped while waiting for a turn: give it back unhandled.
    if (work.signal.aborted) outcome = undefined;
    else outcome = { result: encodeResult(await options.handle(message, { signal: work.signal, leaseToken, deliveryCount: message.deliveryCount })) };
  } catch (error) {
    outcome = { error };
  } finally {
    slots.release();
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
  const release = () => {
    const once: CallOptions = idempotent();
    return settle(() => client.messages.releaseMessage({ messageId: message.id, actor }, once), report, message);
  };
  if (outcome === undefined) {
    await release();
    return "failed";
  }
  if ("error" in outcome) {
    report(outcome.error, message);
    await release();
    return "failed";
  }
  const once: CallOptions = idempotent();
  const { result } = outcome;
  const ackError = await settle(() => client.messages.ackMessage({ messageId: message.id, actor, result }, once), report, message);
  if (ackError !== undefined && !isTransient(ackError)) {
    // Refused for good (e.g. result_too_large): the work is not recorded, so
    // give the message back for another delivery rather than sit on it.
    await release();
    return "failed";
  }
  return "acked";
}

/** The handler's return value as the ack's `result`; throws (a handler failure) when it cannot be JSON-encoded. */
function encodeResult(value: WorkResult): string | undefined {
  if (value === undefined || typeof value === "string") return value;
  const json = JSON.stringify(value) as string | undefined;
  // JSON.stringify answers undefined for functions and symbols.
  if (json === undefined) throw new TypeError(`The handler returned a ${typeof value}, which is neither a string nor JSON-encodable`);
  return json;
}

/** A counting semaphore: at most `size` handlers run at once. */
class Slots {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(size: number) {
    this.free = Math.max(1, size);
  }
  async acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }
  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

interface Heartbeat {
  /** The lease-expired or forbidden error, once a heartbeat found the lease gone. */
  lost: LeaseLostError | undefined;
  stop(): Promise<void>;
}

function keepLeaseAlive(options: WorkerOptions, leaseToken: string, leaseSeconds: number, message: Message, work: AbortController, report: Report): Heartbeat {
  const intervalMs = options.heartbeatIntervalMs ?? (leaseSeconds * 1000) / 3;
  let timer: ReturnType<typeof setTimeout> | undefined;
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
      await options.client.messages.heartbeatLease({ leaseToken, leaseSeconds }, { timeoutMs: Math.ceil(Math.max(intervalMs, 5_000)) });
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

/** Retries transient failures; answers the final error (already reported), or undefined on success. */
async function settle(call: () => Promise<unknown>, report: Report, message: Message): Promise<unknown> {
  for (let attempt = 1; ; attempt++) {
    try {
      await call();
      return undefined;
    } catch (err) {
      if (!isTransient(err) || attempt === SETTLE_ATTEMPTS) {
        // A transient one is left to the lease: when it runs out the message is receivable again.
        report(err, message);
        return err;
      }
      await sleep(backoffMs(attempt, ERROR_BACKOFF.minMs, ERROR_BACKOFF.maxMs));
    }
  }
}
