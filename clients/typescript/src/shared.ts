/** Everything the Node and browser entries both export but createClient. */
export type { AgentbusClient, ClientOptions, TransportKind } from "./core.js";
export { AgentbusError, isAgentbusError } from "./errors.js";
export { IDEMPOTENCY_HEADER, idempotencyInterceptor, idempotent, isMutation } from "./idempotency.js";
export { followChannel, type FollowedMessage, type FollowOptions } from "./follower.js";
export { LeaseLostError, runWorker, type WorkContext, type WorkerOptions, type WorkerStats, type WorkResult } from "./worker.js";
export { call, CallAbandonedError, CallTimeoutError, type CallResult, type TaskCallOptions } from "./call.js";

// The generated types callers meet most, so they need not reach into gen/.
export type { Message } from "../../../gen/agentbus/v1/message_pb.js";
export { MessageState } from "../../../gen/agentbus/v1/message_pb.js";
export type { Channel } from "../../../gen/agentbus/v1/channel_pb.js";
export { ChannelAccess, ChannelDispatch, ChannelMode } from "../../../gen/agentbus/v1/channel_pb.js";
export type { Limit, LimitRate } from "../../../gen/agentbus/v1/limit_pb.js";
export type { MessageWaitpoint, Waitpoint } from "../../../gen/agentbus/v1/waitpoint_pb.js";
export { WaitpointState } from "../../../gen/agentbus/v1/waitpoint_pb.js";
export type { Schedule, ScheduledMessage } from "../../../gen/agentbus/v1/schedule_pb.js";
export type { ChannelStats, GroupStats, GroupSummary } from "../../../gen/agentbus/v1/message_service_pb.js";
export { AckStatus, ClaimStatus, MessageStatus } from "../../../gen/agentbus/v1/message_service_pb.js";
export { Code } from "@connectrpc/connect";
