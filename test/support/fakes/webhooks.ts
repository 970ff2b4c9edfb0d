/** An in-memory WebhookStore for the webhook use cases' unit tests: actor webhooks and the delivery log (the outbox is PostgreSQL's, tested there). */
import type { Micros } from "../../../src/model/time.js";
import type {
  ActorOwner,
  ActorWebhookRecord,
  ArchivedMessage,
  AttemptRecord,
  ClaimedDelivery,
  DeliveryLogRecord,
} from "../../../src/model/webhooks.js";
import type { WebhookStore } from "../../../src/ports/webhooks.js";

export class FakeWebhookStore implements WebhookStore {
  /** Actors by id, with the key that created them. */
  readonly actors = new Map<string, ActorOwner>();
  readonly actorWebhooks = new Map<string, ActorWebhookRecord & { secret: string | null }>();
  /** The log, oldest first; ids are the position + 1 as text. */
  readonly log: DeliveryLogRecord[] = [];

  async findActorOwner(actorId: string): Promise<ActorOwner | undefined> {
    return this.actors.get(actorId.toLowerCase());
  }

  async upsertActorWebhook(actorId: string, url: string, secret: string | null, now: Micros): Promise<ActorWebhookRecord> {
    this.actorWebhooks.set(actorId, { actorId, url, hasSecret: secret !== null, updatedAt: now, secret });
    return { actorId, url, hasSecret: secret !== null, updatedAt: now };
  }

  async findActorWebhook(actorId: string): Promise<ActorWebhookRecord | undefined> {
    const found = this.actorWebhooks.get(actorId);
    return found && { actorId: found.actorId, url: found.url, hasSecret: found.hasSecret, updatedAt: found.updatedAt };
  }

  async deleteActorWebhook(actorId: string): Promise<boolean> {
    return this.actorWebhooks.delete(actorId);
  }

  async listDeliveries(channelId: string, before: string | null, limit: number): Promise<DeliveryLogRecord[]> {
    return this.log
      .filter((d) => d.channelId === channelId && (before === null || Number(d.id) < Number(before)))
      .sort((a, b) => Number(b.id) - Number(a.id))
      .slice(0, limit);
  }

  claimDue(): Promise<ClaimedDelivery[]> {
    return Promise.reject(new Error("not in the fake: the outbox is tested against PostgreSQL"));
  }

  deferDelivery(): Promise<void> {
    return Promise.reject(new Error("not in the fake"));
  }

  recordDestinationOutcome(): Promise<void> {
    return Promise.reject(new Error("not in the fake"));
  }

  findArchivedMessage(): Promise<ArchivedMessage | undefined> {
    return Promise.reject(new Error("not in the fake"));
  }

  recordAttempt(_a: AttemptRecord): Promise<void> {
    return Promise.reject(new Error("not in the fake"));
  }

  dropDelivery(): Promise<void> {
    return Promise.reject(new Error("not in the fake"));
  }

  nextDue(): Promise<Micros | null> {
    return Promise.reject(new Error("not in the fake"));
  }
}
