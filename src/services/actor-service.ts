/** ActorService handlers: create, get, aliases, and the actor's mention-push webhook. */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ActorWebhookSchema } from "../../gen/agentbus/v1/actor_pb.js";
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import type { ActorWebhooks } from "../domain/actor-webhooks.js";
import type { Actors } from "../domain/actors.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import type { ActorWebhookRecord } from "../model/webhooks.js";
import { renderActor } from "./render-channel.js";

/** The secret itself is never returned, only whether there is one. */
const renderActorWebhook = (w: ActorWebhookRecord): MessageInitShape<typeof ActorWebhookSchema> => ({
  actorId: w.actorId,
  url: w.url,
  hasSecret: w.hasSecret,
  updatedAt: toProtoTimestamp(w.updatedAt),
});

export function actorService(actors: Actors, webhooks: ActorWebhooks): ServiceEntry {
  return serviceEntry(ActorService, {
    async createActor(request, ctx) {
      const actor = await actors.create(callerOf(ctx), {
        name: request.name,
        description: request.description,
        metadata: request.metadata,
      });
      return renderActor(actor);
    },

    async getActor(request) {
      return renderActor(await actors.get(request.identifier));
    },

    async addActorAlias(request, ctx) {
      return renderActor(await actors.addAlias(callerOf(ctx), request.actorId, request.alias));
    },

    async setActorWebhook(request, ctx) {
      return renderActorWebhook(await webhooks.set(callerOf(ctx), request.actorId, request.url, request.secret));
    },

    async getActorWebhook(request, ctx) {
      return renderActorWebhook(await webhooks.get(callerOf(ctx), request.actorId));
    },

    async deleteActorWebhook(request, ctx) {
      await webhooks.delete(callerOf(ctx), request.actorId);
      return { deleted: true };
    },
  });
}
