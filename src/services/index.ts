/**
 * Every service of the API with its handlers. A service whose issue has not
 * landed is registered with no handlers: each method answers
 * 501 / Unimplemented with error code not_implemented.
 */
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import type { Config } from "../config.js";
import type { Keys } from "../domain/keys.js";
import type { FixedWindowLimiter } from "../domain/rate-limit.js";
import type { Clock } from "../domain/time.js";
import type { ServiceEntry } from "../server/rpc/pipeline.js";
import type { Db } from "../store/db.js";
import { keyService } from "./key-service.js";

export interface ServiceDependencies {
  db: Db;
  clock: Clock;
  config: Config;
  keys: Keys;
  mintLimiter: FixedWindowLimiter;
}

export function createServices(deps: ServiceDependencies): ServiceEntry[] {
  return [
    keyService(deps.keys, deps.mintLimiter),
    { service: ChannelService, handlers: {} },
    { service: MessageService, handlers: {} },
    { service: ActorService, handlers: {} },
    { service: AdminService, handlers: {} },
    { service: JobService, handlers: {} },
  ];
}
