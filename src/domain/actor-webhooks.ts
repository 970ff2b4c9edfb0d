/**
 * Where an actor's mention pushes go (docs/decisions.md#mention-pushes):
 * POST/GET/DELETE /v1/actors/{actor_id}/webhook. Only the actor's owner (the
 * key that created it) may see or change it; the path takes the actor's id,
 * not an alias. The secret is write-only.
 */
import type { Caller } from "../model/caller.js";
import { validateWebhookSecret, validateWebhookUrl, type WebhookTargets } from "./channels.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import type { Clock } from "../model/time.js";
import type { ActorWebhookRecord } from "../model/webhooks.js";
import type { WebhookStore } from "../ports/webhooks.js";

export class ActorWebhooks {
  constructor(
    private readonly store: WebhookStore,
    private readonly clock: Clock,
    /** Mention pushes go through the same outbound rule as channel webhooks; absent, private targets are refused. */
    private readonly targets: WebhookTargets = { allowPrivateTargets: false },
  ) {}

  /** Registers (or replaces) the webhook; a registration without a secret sends unsigned pushes. */
  async set(caller: Caller, actorId: string, url: string | undefined, secret: string | undefined): Promise<ActorWebhookRecord> {
    if (url === undefined) {
      throw new ApiError("missing_field", "'url' is required: the absolute http(s) URL mention pushes are POSTed to", { details: { field: "url" } });
    }
    const validUrl = validateWebhookUrl(url, this.targets, "url");
    const validSecret = secret === undefined ? null : validateWebhookSecret(secret, "secret");
    await this.ownActor(caller, actorId);
    return this.store.upsertActorWebhook(actorId, validUrl, validSecret, this.clock.now());
  }

  async get(caller: Caller, actorId: string): Promise<ActorWebhookRecord> {
    await this.ownActor(caller, actorId);
    const found = await this.store.findActorWebhook(actorId);
    if (!found) throw new ApiError("webhook_not_found", "This actor has no webhook");
    return found;
  }

  /** Removes the webhook; pushes not yet sent are dropped. 404 webhook_not_found when there is none. */
  async delete(caller: Caller, actorId: string): Promise<void> {
    await this.ownActor(caller, actorId);
    if (!(await this.store.deleteActorWebhook(actorId))) throw new ApiError("webhook_not_found", "This actor has no webhook");
  }

  private async ownActor(caller: Caller, actorId: string): Promise<void> {
    const actor = isUuid(actorId) ? await this.store.findActorOwner(actorId) : undefined;
    // By id only: an alias that happens to name an actor is still not an id.
    if (!actor || actor.id !== actorId.toLowerCase()) throw new ApiError("actor_not_found", `Actor '${actorId}' not found`);
    if (actor.createdByKeyId !== caller.keyId) {
      throw new ApiError("actor_forbidden", "Only the key that created this actor may manage its webhook", {
        suggestion: "Use the key that created the actor.",
      });
    }
  }
}
