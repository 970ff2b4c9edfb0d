/** The services the MCP tools call (their REST routes are the tools' way in). */
import type { DescService } from "@bufbuild/protobuf";
import { ChannelService } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../../gen/agentbus/v1/key_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";

export const MCP_SERVICES: readonly DescService[] = [MessageService, ChannelService, JobService, KeyService];
