/** Handler sets that several modules contribute to one proto service. */
import type { ServiceImpl } from "@connectrpc/connect";
import type { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import type { JobService } from "../../gen/agentbus/v1/job_service_pb.js";

export type ChannelHandlers = Partial<ServiceImpl<typeof ChannelService>>;
export type JobHandlers = Partial<ServiceImpl<typeof JobService>>;
