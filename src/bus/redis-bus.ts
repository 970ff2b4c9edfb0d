/**
 * Wake-ups over Redis pub/sub (REDIS_URL). One subscriber connection per
 * process on one topic; the payload is the channel id. ioredis reconnects on
 * its own; while Redis is away, publishes fail fast instead of queueing, and
 * waiters still re-read at their deadline.
 */
import { Redis } from "ioredis";
import { LocalFanout, type WakeBus, type WakeListener } from "./wake-bus.js";

const TOPIC = "agentbus:wake";

export class RedisBus implements WakeBus {
  private readonly fanout = new LocalFanout();
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly ready: Promise<void>;

  constructor(url: string, private readonly onError: (err: Error) => void) {
    const publisher = new Redis(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
    // The subscriber queues its SUBSCRIBE until connected and re-subscribes after reconnects.
    const subscriber = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null });
    for (const client of [publisher, subscriber]) client.on("error", (err: Error) => onError(err));
    subscriber.on("message", (topic: string, channelId: string) => {
      if (topic === TOPIC) this.fanout.deliver(channelId);
    });
    this.publisher = publisher;
    this.subscriber = subscriber;
    this.ready = (async () => {
      await Promise.all([publisher.connect(), subscriber.connect()]);
      await subscriber.subscribe(TOPIC);
    })();
    this.ready.catch((err: Error) => this.onError(err));
  }

  whenReady(): Promise<void> {
    return this.ready;
  }

  get subscriptions(): number {
    return this.fanout.subscriptions;
  }

  publish(channelId: string): void {
    this.fanout.deliver(channelId);
    this.publisher.publish(TOPIC, channelId).catch((err: Error) => this.onError(err));
  }

  subscribe(channelId: string, listener: WakeListener): () => void {
    return this.fanout.subscribe(channelId, listener);
  }

  async close(): Promise<void> {
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
