/**
 * The A2A forwarder (docs/decisions.md#a2a-forward): every claimable channel
 * with an `a2a_forward` has its work sent to the remote A2A agent, as a
 * worker of the channel's owner would. One per process that runs workers
 * (`agentbus worker`, or `serve` with its workers).
 *
 * It receives a channel's messages with leases (at most `perChannel` in
 * hand per channel, `total` per process), sends each to the agent, keeps the
 * lease alive while the agent works, and acknowledges the message with the
 * agent's answer as its result. A failure (the agent unreachable or refusing,
 * its task failed, the answer not storable) releases the message with
 * back-off, so the channel's max_deliveries and dead-letter channel apply,
 * and a cancelled message is cancelled at the agent too. Several processes
 * may forward the same channel: the leases keep each message with one.
 */
import type { Messages } from "../domain/messages.js";
import { ApiError } from "../model/errors.js";
import type { MessageRecord } from "../model/messages.js";
import type { Clock, Timer } from "../model/time.js";
import { failureClass, type OutboundClient } from "../outbound/guarded-fetch.js";
import { LogLimiter } from "../platform/log-limiter.js";
import type { Logger } from "../platform/logger.js";
import { pause } from "../platform/pause.js";
import { withStoredTrace } from "../platform/tracing.js";
import type { ForwardingChannel, ForwardingStore } from "../ports/forwarding.js";
import { RemoteAgent, type RemoteOutcome } from "./remote-agent.js";

export const A2A_USER_AGENT = "agentbus-a2a-forwarder/1";

export interface ForwarderOptions {
  store: ForwardingStore;
  messages: Messages;
  http: OutboundClient;
  clock: Clock;
  logger: Logger;
  /** How often the list of forwarding channels is read again. */
  refreshMs?: number;
  /** Messages of one channel with its agent at once. */
  perChannel?: number;
  /** Messages with remote agents at once, all channels together. */
  total?: number;
  leaseSeconds?: number;
  /** Long-poll of each receive. */
  waitSeconds?: number;
}

interface Served {
  channel: ForwardingChannel;
  agent: RemoteAgent;
  stop: AbortController;
  inFlight: number;
  /** Resolves when one of its messages is done (a free slot). */
  freed: () => void;
}

/** Seconds before a failed message is open work again: 5 s, doubling per delivery, at most 5 minutes. */
export const retryDelaySeconds = (deliveryCount: number): number => Math.min(5 * 2 ** Math.max(0, deliveryCount - 1), 300);

export class A2aForwarder {
  private readonly served = new Map<string, Served>();
  private readonly shutdown = new AbortController();
  private readonly running = new Set<Promise<void>>();
  private readonly limiter: LogLimiter;
  private refresher: Timer | undefined;
  private inFlight = 0;
  private readonly perChannel: number;
  private readonly total: number;
  private readonly leaseSeconds: number;

  constructor(private readonly o: ForwarderOptions) {
    this.perChannel = o.perChannel ?? 4;
    this.total = o.total ?? 32;
    this.leaseSeconds = o.leaseSeconds ?? 60;
    this.limiter = new LogLimiter(o.logger, { intervalMs: 60_000, clock: o.clock });
  }

  start(): void {
    void this.refresh();
  }

  private async refresh(): Promise<void> {
    if (this.shutdown.signal.aborted) return;
    try {
      const channels = await this.o.store.channels();
      const wanted = new Map(channels.map((c) => [c.id, c]));
      for (const [id, s] of this.served) {
        const now = wanted.get(id);
        // Gone, or its forward or owner changed: this loop stops, and a new one starts with the new settings.
        if (now === undefined || JSON.stringify(now) !== JSON.stringify(s.channel)) {
          s.stop.abort();
          this.served.delete(id);
        }
      }
      for (const channel of channels) if (!this.served.has(channel.id)) this.serve(channel);
      this.limiter.recovered("a2a forwarding channels could not be read", "a2a forwarding channels read again");
    } catch (err) {
      this.limiter.error("a2a forwarding channels could not be read", err);
    }
    if (!this.shutdown.signal.aborted) this.refresher = this.o.clock.setTimer(this.o.refreshMs ?? 2_000, () => void this.refresh());
  }

  private serve(channel: ForwardingChannel): void {
    const s: Served = {
      channel,
      agent: new RemoteAgent(channel.forward.url, channel.forward.authHeader, this.o.http),
      stop: new AbortController(),
      inFlight: 0,
      freed: () => undefined,
    };
    this.served.set(channel.id, s);
    this.track(this.loop(s));
  }

  private track(work: Promise<void>): void {
    this.running.add(work);
    void work.finally(() => this.running.delete(work));
  }

  private async loop(s: Served): Promise<void> {
    const signal = AbortSignal.any([s.stop.signal, this.shutdown.signal]);
    while (!signal.aborted) {
      const room = Math.min(this.perChannel - s.inFlight, this.total - this.inFlight);
      if (room <= 0) {
        // A slot of this channel frees it at once; one of another channel's (the process's total) within a second.
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal.removeEventListener("abort", done);
            s.freed = () => undefined;
            resolve();
          };
          const timer = setTimeout(done, 1_000);
          s.freed = done;
          signal.addEventListener("abort", done, { once: true });
        });
        continue;
      }
      let leases;
      try {
        leases = await this.o.messages.receive(s.channel.owner, s.channel.id, { maxMessages: room, leaseSeconds: this.leaseSeconds, wait: this.o.waitSeconds ?? 10, actor: undefined, signal });
      } catch (err) {
        if (signal.aborted) return;
        this.limiter.warn("a2a forwarder could not receive", err, { channel_id: s.channel.id });
        await pause(5_000, signal);
        continue;
      }
      for (const lease of leases) {
        s.inFlight++;
        this.inFlight++;
        this.track(
          this.forward(s, lease.message, lease.leaseToken).finally(() => {
            s.inFlight--;
            this.inFlight--;
            s.freed();
          }),
        );
      }
    }
  }

  /** One message to the agent and back. */
  private async forward(s: Served, message: MessageRecord, leaseToken: string): Promise<void> {
    const owner = s.channel.owner;
    const cancelled = new AbortController();
    const signal = AbortSignal.any([cancelled.signal, this.shutdown.signal]);
    // The lease is kept alive while the agent works; a cancelled message is cancelled at the agent.
    const every = (this.leaseSeconds * 1000) / 3;
    const beat = () => {
      this.o.messages.heartbeat(owner, leaseToken, this.leaseSeconds).then(
        (answer) => {
          if (answer.cancelRequested) cancelled.abort();
        },
        () => undefined,
      );
      timer = this.o.clock.setTimer(every, beat);
    };
    let timer: Timer = this.o.clock.setTimer(every, beat);
    let outcome: RemoteOutcome;
    try {
      outcome = await withStoredTrace(message.trace, () => s.agent.send(message, signal));
    } catch (err) {
      outcome = { kind: "failed", reason: err instanceof ApiError ? err.code : failureClass(err) };
    } finally {
      timer.cancel();
    }
    if (this.shutdown.signal.aborted && outcome.kind === "failed") {
      // Stopping: the lease runs out and another worker takes it; no delivery is charged twice.
      return;
    }
    try {
      if (outcome.kind === "completed") {
        await this.o.messages.ack(owner, message.id, undefined, { result: outcome.result });
        return;
      }
      this.o.logger.info({ channel_id: s.channel.id, message_id: message.id, delivery: message.deliveryCount, reason: outcome.reason }, "a2a forward failed; released for a retry");
      await this.o.messages.release(owner, message.id, undefined, retryDelaySeconds(message.deliveryCount));
    } catch (err) {
      // The answer could not be stored (too large, say): a failed delivery like any other.
      this.limiter.warn("a2a forwarder could not settle a message", err, { channel_id: s.channel.id });
      await this.o.messages.release(owner, message.id, undefined, retryDelaySeconds(message.deliveryCount)).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    this.shutdown.abort();
    this.refresher?.cancel();
    for (const s of this.served.values()) s.stop.abort();
    await Promise.allSettled([...this.running]);
  }
}
