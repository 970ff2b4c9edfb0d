/**
 * ActorService handlers: create, get and aliases. The actor webhook methods
 * answer not_implemented until mention pushes land.
 */
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import type { Actors } from "../domain/actors.js";
import { callerOf } from "../server/rpc/context.js";
import { serviceEntry, type ServiceEntry } from "../server/rpc/pipeline.js";
import { renderActor } from "./render-channel.js";

export function actorService(actors: Actors): ServiceEntry {
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
  });
}
