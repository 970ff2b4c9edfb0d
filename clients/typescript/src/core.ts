/**
 * What the Node and browser entries share: the options, one typed client per
 * service of proto/agentbus/v1 over a transport, and the auth, idempotency
 * and error handling around it. The entries differ only in their transports
 * (index.ts: connect-node, with gRPC; web.ts: fetch).
 */
import type { DescService } from "@bufbuild/protobuf";
import { createClient as createServiceClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { ActorService } from "../../../gen/agentbus/v1/actor_service_pb.js";
import { AdminService } from "../../../gen/agentbus/v1/admin_service_pb.js";
import { ChannelService } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { JobService } from "../../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../../gen/agentbus/v1/key_service_pb.js";
import { LimitService } from "../../../gen/agentbus/v1/limit_service_pb.js";
import { MessageService } from "../../../gen/agentbus/v1/message_service_pb.js";
import { SecurityService } from "../../../gen/agentbus/v1/security_service_pb.js";
import { CompatService } from "../../../gen/agentbus/v1/compat_service_pb.js";
import { SessionService } from "../../../gen/agentbus/v1/session_service_pb.js";
import { WaitpointService } from "../../../gen/agentbus/v1/waitpoint_service_pb.js";
import { ScheduleService } from "../../../gen/agentbus/v1/schedule_service_pb.js";
import { toAgentbusError } from "./errors.js";
import { idempotencyInterceptor } from "./idempotency.js";
import { traceInterceptor } from "./trace.js";

export type TransportKind = "grpc" | "connect" | "grpc-web";

export interface ClientOptions {
  /** Where the service listens, e.g. "http://127.0.0.1:8080"; every protocol is on this one port. */
  baseUrl: string;
  /** Sent as `x-api-key`. Omit it only to mint a key (KeyService.CreateKey needs none). */
  apiKey?: string;
  /** Sent as `x-admin-token`, for AdminService. */
  adminToken?: string;
  /** Node: default "grpc"; "connect" and "grpc-web" also work through HTTP/1.1-only proxies. Browsers (web entry): "connect" (default) or "grpc-web". */
  transport?: TransportKind;
  /** Node, for "connect" and "grpc-web"; default "1.1". gRPC always runs over HTTP/2; browsers choose for themselves. */
  httpVersion?: "1.1" | "2";
  /** Protobuf binary (default) or JSON on the wire; JSON is easier to read in a proxy log. */
  useBinaryFormat?: boolean;
  /** Deadline for calls that set no timeoutMs of their own. Long-polls and streams need room: keep it above `wait`. */
  defaultTimeoutMs?: number;
  /**
   * Run closest to the wire, after the built-in ones: they see the request as
   * sent (API key and idempotency key set) and failures as raw ConnectErrors.
   */
  interceptors?: Interceptor[];
}

export interface AgentbusClient {
  keys: Client<typeof KeyService>;
  channels: Client<typeof ChannelService>;
  messages: Client<typeof MessageService>;
  /** Shared limits (a model provider's quota) that channels and messages name (docs/decisions.md#shared-limits). */
  limits: Client<typeof LimitService>;
  /** Waitpoints a task waits at until a person or another system completes one (docs/decisions.md#waitpoints); completeWaitpoint needs no API key. */
  waitpoints: Client<typeof WaitpointService>;
  /** Messages posted on a cron schedule, once per tick (docs/decisions.md#schedules). */
  schedules: Client<typeof ScheduleService>;
  actors: Client<typeof ActorService>;
  jobs: Client<typeof JobService>;
  admin: Client<typeof AdminService>;
  /** Shared state (docs/decisions.md#sessions). */
  sessions: Client<typeof SessionService>;
  /** The owner's security audit. */
  security: Client<typeof SecurityService>;
  /** The reference's convenience verbs, for code migrating from Backchannel (docs/decisions.md#compat-verbs). */
  compat: Client<typeof CompatService>;
  /** The underlying transport (with the API-key and idempotency interceptors); calls made on it directly fail with raw ConnectErrors. */
  transport: Transport;
}

/** One typed client per service over `transport` (built with interceptorsFor). */
export function clientOver(transport: Transport): AgentbusClient {
  return {
    keys: serviceClient(KeyService, transport),
    channels: serviceClient(ChannelService, transport),
    messages: serviceClient(MessageService, transport),
    limits: serviceClient(LimitService, transport),
    waitpoints: serviceClient(WaitpointService, transport),
    schedules: serviceClient(ScheduleService, transport),
    actors: serviceClient(ActorService, transport),
    jobs: serviceClient(JobService, transport),
    admin: serviceClient(AdminService, transport),
    sessions: serviceClient(SessionService, transport),
    security: serviceClient(SecurityService, transport),
    compat: serviceClient(CompatService, transport),
    transport,
  };
}

/** The transport settings every entry uses: the interceptors in order, the wire format, the deadline. */
export function transportSettings(options: ClientOptions) {
  // The first interceptor is the outermost: the caller's own come last so
  // they observe the finished request.
  const interceptors = [credentialsInterceptor(options), idempotencyInterceptor(), traceInterceptor(), ...(options.interceptors ?? [])];
  return {
    baseUrl: options.baseUrl,
    interceptors,
    useBinaryFormat: options.useBinaryFormat ?? true,
    defaultTimeoutMs: options.defaultTimeoutMs,
  };
}

function credentialsInterceptor(options: ClientOptions): Interceptor {
  return (next) => async (req) => {
    // A per-call header wins, so one client can act for several keys.
    if (options.apiKey !== undefined && !req.header.has("x-api-key")) req.header.set("x-api-key", options.apiKey);
    if (options.adminToken !== undefined && !req.header.has("x-admin-token")) req.header.set("x-admin-token", options.adminToken);
    return next(req);
  };
}

/**
 * The service client with every failure rethrown as AgentbusError. This has to
 * wrap the client rather than be an interceptor: Connect turns anything an
 * interceptor throws that is not a ConnectError into ConnectError(Unknown).
 */
function serviceClient<T extends DescService>(service: T, transport: Transport): Client<T> {
  const client = createServiceClient(service, transport) as unknown as Record<string, (...args: unknown[]) => unknown>;
  const wrapped: Record<string, (...args: unknown[]) => unknown> = {};
  for (const method of service.methods) {
    const call = client[method.localName];
    if (call === undefined) continue;
    if (method.methodKind === "unary") {
      wrapped[method.localName] = async (...args) => {
        try {
          return await call(...args);
        } catch (err) {
          throw toAgentbusError(err);
        }
      };
    } else if (method.methodKind === "server_streaming") {
      wrapped[method.localName] = (...args) => rethrowing(call(...args) as AsyncIterable<unknown>);
    } else {
      // No client or bidi streams in this API; passed through unchanged should one appear.
      wrapped[method.localName] = call;
    }
  }
  return wrapped as unknown as Client<T>;
}

async function* rethrowing<T>(stream: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    // yield* forwards return() too, so breaking out of a loop still closes the call.
    yield* stream;
  } catch (err) {
    throw toAgentbusError(err);
  }
}
