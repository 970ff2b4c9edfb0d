/** The services the MCP tools and the shell commands call (their REST routes are the way in). */
import type { DescService } from "@bufbuild/protobuf";
import { ChannelService } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../../gen/agentbus/v1/key_service_pb.js";
import { LimitService } from "../../../gen/agentbus/v1/limit_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import { WaitpointService } from "../../../gen/agentbus/v1/waitpoint_service_pb.js";
import { ScheduleService } from "../../../gen/agentbus/v1/schedule_service_pb.js";

export const MCP_SERVICES: readonly DescService[] = [MessageService, ChannelService, JobService, KeyService, LimitService, WaitpointService, ScheduleService];
