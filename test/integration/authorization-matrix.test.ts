/**
 * The authorization matrix (issue 4, item 8): every RPC of ChannelService,
 * MessageService, AdminService and LimitService, for every kind of caller (no key, a
 * revoked key, a stranger, a member, the owner; for AdminService: the admin
 * token rules), on open and on restricted channels, over REST and over gRPC.
 * The scope dimension (issue 17): a member whose key holds only the scope the
 * RPC declares in the proto is judged as any member; one whose key holds
 * every scope but that one gets 403 insufficient_scope, before any channel
 * rule.
 *
 * Each row states one access rule of docs/decisions.md#keys-and-access and #channels-and-messages:
 *   - open channel: any key may read it, post, claim, ack, create invitations
 *     and request access; restricted: owner and members only, others 403
 *     channel_access_denied (#channel-access);
 *   - owner only, 403 forbidden (#owner-only) — a stranger to a restricted channel
 *     learns no more than channel_access_denied;
 *   - invitations are revoked by their creator or the channel owner, and
 *     resolved by any key (#invitations);
 *   - leases are heartbeaten and released by their holder only; a message is
 *     retracted by its author or the channel owner (#leases-and-retract);
 *   - batchAck and batchRelease answer 200 to any key: each id's refusal is
 *     in its own result, the one the single call would have given (#batches);
 *   - a missing or revoked key is 401 on every route (ResolveInvitation without
 *     a key: 401 api_key_required); admin routes take X-Admin-Token (#pause);
 *   - a shared limit is its creating key's: any other key is told 404
 *     limit_not_found, as for a missing one (#shared-limits);
 *   - a waitpoint likewise (404 waitpoint_not_found), except that its token
 *     completes it with no key at all, whatever key comes along (#waitpoints);
 *   - a schedule is created and read by the channel's users, changed and
 *     deleted by its creator or the channel owner (else 403 forbidden); to a
 *     stranger of a restricted channel it does not exist (404, #schedules).
 *
 * The suite fails when an RPC of those services has no row, or when a REST
 * route of theirs is not exercised, so a route added later cannot ship
 * without its authorization rule.
 *
 * All cases run in beforeAll with bounded concurrency; each `it` asserts the
 * outcome of one case. Rows that change what other cases rely on (`mutates`)
 * get a fresh channel per case; the others share one channel per access.
 */
import { create, type DescMethod, type DescMethodServerStreaming, type DescMethodUnary, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { AccessRequestStatus, ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { AccessRequestOutcome, ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import { ScheduleService } from "../../gen/agentbus/v1/schedule_service_pb.js";
import { WaitpointState } from "../../gen/agentbus/v1/waitpoint_pb.js";
import { WaitpointService } from "../../gen/agentbus/v1/waitpoint_service_pb.js";
import { AckStatus, ClaimStatus, MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { KEY_SCOPES, type KeyScope } from "../../src/model/scopes.js";
import { rulesOf } from "../../src/server/rpc/method-rules.js";
import { RestRoutes, type RestRoute } from "../../src/server/rest/routes.js";
import { mintKey, rest, startTestServer, type JsonResponse, type TestServer } from "../support/server.js";

// ---------------------------------------------------------------------------
// Callers, channels and outcomes
// ---------------------------------------------------------------------------

/**
 * Who calls a channel or message route. The scope dimension: a member whose
 * key holds only the scope the RPC declares, and one whose key holds every
 * scope but that one (docs/decisions.md#scopes).
 */
type Principal = "none" | "revoked" | "stranger" | "member" | "owner" | "holding_scope" | "lacking_scope";
/** A principal holding a valid key. */
type KeyHolder = "stranger" | "member" | "owner";
/** Who calls an admin route. */
type AdminCaller = "no_token" | "wrong_token" | "api_key_only" | "admin_token" | "admin_disabled";
type Access = "open" | "restricted";

const PRINCIPALS: readonly Principal[] = ["none", "revoked", "stranger", "member", "owner", "holding_scope", "lacking_scope"];
const ADMIN_CALLERS: readonly AdminCaller[] = ["no_token", "wrong_token", "api_key_only", "admin_token", "admin_disabled"];
const ACCESSES: readonly Access[] = ["open", "restricted"];
/** Who calls a keyless route: nobody in particular (a key is ignored, scopes play no part). */
const KEYLESS_CALLERS: readonly Principal[] = ["none", "revoked", "stranger", "owner"];

const ADMIN_TOKEN = "matrix-admin-token-0123456789";

/** What a case must answer: the HTTP status and, for refusals, the error code. */
interface Outcome {
  status: number;
  error?: string;
}

const ok = (status: number): Outcome => ({ status });
const refused = (status: number, error: string): Outcome => ({ status, error });
const UNAUTHORIZED = refused(401, "unauthorized");
const ACCESS_DENIED = refused(403, "channel_access_denied");
const FORBIDDEN = refused(403, "forbidden");
const NOT_IMPLEMENTED = refused(501, "not_implemented");
const LIMIT_NOT_FOUND = refused(404, "limit_not_found");
const WAITPOINT_NOT_FOUND = refused(404, "waitpoint_not_found");
const SCHEDULE_NOT_FOUND = refused(404, "schedule_not_found");

/** The gRPC status each refusal maps to (docs/decisions.md#grpc-status). */
const GRPC_CODE_OF_ERROR: Record<string, Code> = {
  unauthorized: Code.Unauthenticated,
  api_key_required: Code.Unauthenticated,
  admin_unauthorized: Code.Unauthenticated,
  channel_access_denied: Code.PermissionDenied,
  forbidden: Code.PermissionDenied,
  insufficient_scope: Code.PermissionDenied,
  admin_disabled: Code.PermissionDenied,
  not_implemented: Code.Unimplemented,
  limit_not_found: Code.NotFound,
  waitpoint_not_found: Code.NotFound,
  schedule_not_found: Code.NotFound,
  not_lease_holder: Code.FailedPrecondition,
};

/** The outcome for a caller with a valid key; undefined when the case cannot exist. */
type Rule = (who: KeyHolder, access: Access) => Outcome | undefined;

/** Not channel-scoped: any valid key (discovery, creating a channel). */
const anyKey =
  (status: number): Rule =>
  () =>
    ok(status);

/** Anyone on an open channel; owner and members on a restricted one. */
const channelUsers =
  (status: number): Rule =>
  (who, access) =>
    access === "restricted" && who === "stranger" ? ACCESS_DENIED : ok(status);

/**
 * Only the listed principals (owner-only, creator-or-owner, holder
 * only); the others get 403 forbidden, except that a stranger to a restricted
 * channel gets channel_access_denied first.
 */
const only =
  (allowed: readonly KeyHolder[], status: number): Rule =>
  (who, access) =>
    access === "restricted" && who === "stranger" ? ACCESS_DENIED : allowed.includes(who) ? ok(status) : FORBIDDEN;

const ownerOnly = (status: number): Rule => only(["owner"], status);

/** Progress on another key's lease: a channel user is told it does not hold the lease (409), a stranger to a restricted channel is refused first. */
const leaseHolderOnly: Rule = (who, access) => (access === "restricted" && who === "stranger" ? ACCESS_DENIED : refused(409, "not_lease_holder"));

/** A resource of the owner's key that is not channel-scoped (a shared limit): every other key is told it does not exist. */
const ownersOnly =
  (status: number, missing: Outcome): Rule =>
  (who) =>
    who === "owner" ? ok(status) : missing;

/**
 * The caller acts on something it made itself (its own lease, claim, message,
 * invitation): allowed. A stranger to a restricted channel cannot have made
 * anything there, so that case does not exist.
 */
/** A schedule on the channel: its channel's users see it; to a stranger of a restricted channel it does not exist. */
const scheduleReaders =
  (status: number): Rule =>
  (who, access) =>
    access === "restricted" && who === "stranger" ? SCHEDULE_NOT_FOUND : ok(status);

/** Another key's schedule: the channel owner may change it, other users are refused, a restricted channel's stranger does not see it. */
const scheduleOwnerOnly =
  (status: number): Rule =>
  (who, access) =>
    access === "restricted" && who === "stranger" ? SCHEDULE_NOT_FOUND : who === "owner" ? ok(status) : FORBIDDEN;

const ownResource =
  (status: number): Rule =>
  (who, access) =>
    access === "restricted" && who === "stranger" ? undefined : ok(status);

// ---------------------------------------------------------------------------
// Rows
// ---------------------------------------------------------------------------

/** Request fields, named as in the proto (snake_case), valued as in REST JSON. */
type Fields = Record<string, unknown>;

interface Prepared {
  fields: Fields;
  /** gRPC init fields that differ from the REST JSON (enums). */
  grpc?: Fields;
}

interface Env {
  inst: Instance;
  access: Access;
  /**
   * The key whose "own" resources the case uses: the caller's key, or for
   * callers without a usable key (none, revoked, admin callers) the worker's.
   */
  self: string;
  /** The case's channel: the shared one, or a fresh one for mutating rows. */
  channel(): Promise<string>;
}

interface SuccessBody {
  rest: Record<string, unknown>;
  grpc: Record<string, unknown>;
}

interface Row {
  /** "Service.Method", as in the descriptors. */
  rpc: string;
  /** Distinguishes rows of the same RPC, e.g. whose lease is heartbeaten. */
  variant?: string;
  /** channel: principals × access; global: principals only; admin: admin callers × access. */
  scope: "channel" | "global" | "admin";
  /** Changes what other cases rely on: each case gets a fresh channel. */
  mutates: boolean;
  rule: Rule;
  /** The error of a call without any key (default unauthorized). */
  missingKey?: "api_key_required";
  /** Takes no key (AUTH_NONE): every caller, with or without one, gets `rule`'s outcome for the owner. */
  keyless?: true;
  /**
   * Not implemented yet (a later issue): every authenticated principal gets
   * 501 not_implemented, whatever `rule` says. The issue that implements the
   * RPC deletes this flag, and `rule` applies.
   */
  notImplementedYet?: true;
  /** What a successful answer must contain. */
  success?: (access: Access, who: KeyHolder | "admin") => SuccessBody;
  prepare(env: Env): Promise<Prepared>;
}

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
const keyIdOf = (key: string) => key.split(".")[0] as string;
const sameBody = (body: Record<string, unknown>): SuccessBody => ({ rest: body, grpc: body });

/** A batch call that succeeds (200) while its one item is refused with `error`. */
const itemRefused = (error: string): SuccessBody => ({
  rest: { results: [{ status: null, error: { error } }] },
  grpc: { results: [{ error: { error } }] },
});

const onChannel = async (env: Env): Promise<Prepared> => ({ fields: { identifier: await env.channel() } });

const rows: Row[] = [
  // ----- ChannelService -----
  {
    rpc: "ChannelService.CreateChannel",
    scope: "global",
    mutates: false,
    rule: anyKey(201),
    prepare: async () => ({ fields: { name: unique("matrix"), mode: "claimable" }, grpc: { mode: ChannelMode.CLAIMABLE } }),
  },
  { rpc: "ChannelService.DiscoverChannels", scope: "global", mutates: false, rule: anyKey(200), prepare: async () => ({ fields: {} }) },
  { rpc: "ChannelService.ListMyChannels", scope: "global", mutates: false, rule: anyKey(200), prepare: async () => ({ fields: {} }) },
  { rpc: "ChannelService.GetChannel", scope: "channel", mutates: false, rule: channelUsers(200), prepare: onChannel },
  {
    rpc: "ChannelService.UpdateChannel",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    success: () => sameBody({ description: "patched by the matrix" }),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), channel: { description: "patched by the matrix" } } }),
  },
  {
    rpc: "ChannelService.UpdateChannel",
    variant: "max_deliveries",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    success: () => ({ rest: { max_deliveries: 3 }, grpc: { maxDeliveries: 3 } }),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), channel: { max_deliveries: 3 } } }),
  },
  { rpc: "ChannelService.DeleteChannel", scope: "channel", mutates: true, rule: ownerOnly(204), prepare: onChannel },
  {
    rpc: "ChannelService.AddChannelAlias",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(201),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), alias: unique("alias") } }),
  },
  {
    rpc: "ChannelService.RemoveChannelAlias",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    prepare: async (env) => {
      const identifier = await env.channel();
      const alias = unique("alias");
      await must("add alias", rest(env.inst.server.url, "POST", `/v1/channels/${identifier}/aliases`, { key: env.inst.keys.owner, body: { alias } }), 201);
      return { fields: { identifier, alias } };
    },
  },
  { rpc: "ChannelService.ListChannelHistory", scope: "channel", mutates: false, rule: channelUsers(200), prepare: onChannel },
  { rpc: "ChannelService.ListChannelEvents", scope: "channel", mutates: false, rule: ownerOnly(200), prepare: onChannel },
  { rpc: "ChannelService.ListMembers", scope: "channel", mutates: false, rule: ownerOnly(200), prepare: onChannel },
  {
    // The key to add is the stranger's: a stranger cannot add itself either.
    rpc: "ChannelService.AddMember",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(201),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), key_id: keyIdOf(env.inst.keys.stranger) } }),
  },
  {
    // Removes the worker (a member other than the calling member).
    rpc: "ChannelService.RemoveMember",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    success: () => sameBody({ status: "removed" }),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), key_id: keyIdOf(env.inst.keys.worker) } }),
  },
  { rpc: "ChannelService.CreateInvitation", scope: "channel", mutates: false, rule: channelUsers(201), prepare: onChannel },
  { rpc: "ChannelService.ListInvitations", scope: "channel", mutates: false, rule: ownerOnly(200), prepare: onChannel },
  {
    // Any key may resolve (that is how strangers get in); it grants membership, hence a fresh channel.
    rpc: "ChannelService.ResolveInvitation",
    scope: "channel",
    mutates: true,
    missingKey: "api_key_required",
    rule: anyKey(200),
    success: () => sameBody({ active: true }),
    prepare: async (env) => ({ fields: { invitation_id: await invite(env.inst, env.inst.keys.owner, await env.channel()) } }),
  },
  {
    // Whoever holds the link may see where it leads, as resolving would show; nobody joins.
    rpc: "ChannelService.PreviewInvitation",
    scope: "channel",
    mutates: false,
    rule: anyKey(200),
    prepare: async (env) => ({ fields: { invitation_id: await invite(env.inst, env.inst.keys.owner, await env.channel()) } }),
  },
  {
    // Created by the worker: the channel owner may revoke it, another member may not.
    rpc: "ChannelService.RevokeInvitation",
    variant: "a member's invitation",
    scope: "channel",
    mutates: true,
    rule: only(["owner"], 200),
    success: () => sameBody({ active: false }),
    prepare: async (env) => ({ fields: { invitation_id: await invite(env.inst, env.inst.keys.worker, await env.channel()) } }),
  },
  {
    rpc: "ChannelService.RevokeInvitation",
    variant: "the caller's own invitation",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => sameBody({ active: false }),
    prepare: async (env) => ({ fields: { invitation_id: await invite(env.inst, env.self, await env.channel()) } }),
  },
  {
    // Adds a pending request for the stranger on the shared restricted channel; nothing else depends on it.
    rpc: "ChannelService.CreateAccessRequest",
    scope: "channel",
    mutates: false,
    rule: (who, access) => (access === "open" ? ok(200) : who === "stranger" ? ok(202) : ok(200)),
    success: (access, who) =>
      access === "open"
        ? { rest: { status: "open" }, grpc: { status: AccessRequestOutcome.OPEN } }
        : who === "stranger"
          ? { rest: { status: "pending", request_id: expect.any(String) }, grpc: { status: AccessRequestOutcome.PENDING, requestId: expect.any(String) } }
          : { rest: { status: "already_member" }, grpc: { status: AccessRequestOutcome.ALREADY_MEMBER } },
    prepare: async (env) => ({ fields: { identifier: await env.channel(), reason: "the matrix asks" } }),
  },
  { rpc: "ChannelService.ListAccessRequests", scope: "channel", mutates: false, rule: ownerOnly(200), prepare: onChannel },
  {
    // The stranger's pending request (on an open channel: filed while it was restricted).
    rpc: "ChannelService.ApproveAccessRequest",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    success: () => ({ rest: { status: "approved" }, grpc: { status: AccessRequestStatus.APPROVED } }),
    prepare: pendingRequest,
  },
  {
    rpc: "ChannelService.DenyAccessRequest",
    scope: "channel",
    mutates: true,
    rule: ownerOnly(200),
    success: () => ({ rest: { status: "denied" }, grpc: { status: AccessRequestStatus.DENIED } }),
    prepare: pendingRequest,
  },
  {
    rpc: "ChannelService.ListWebhookDeliveries",
    scope: "channel",
    mutates: false,
    rule: ownerOnly(200),
    success: () => sameBody({ data: [] }),
    prepare: onChannel,
  },

  // ----- MessageService -----
  {
    rpc: "MessageService.CreateMessage",
    scope: "channel",
    mutates: false,
    rule: channelUsers(201),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), content: "posted by the matrix" } }),
  },
  {
    rpc: "MessageService.BatchCreateMessages",
    scope: "channel",
    mutates: false,
    rule: channelUsers(201),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), messages: [{ content: "batched by the matrix" }] } }),
  },
  { rpc: "MessageService.ListMessages", scope: "channel", mutates: false, rule: channelUsers(200), prepare: onChannel },
  {
    // since=0: the shared channel holds a message, so an open stream answers at once.
    rpc: "MessageService.WatchMessages",
    scope: "channel",
    mutates: false,
    rule: channelUsers(200),
    prepare: async (env) => ({ fields: { identifier: await env.channel(), since: "0" } }),
  },
  {
    rpc: "MessageService.ClaimMessage",
    scope: "channel",
    mutates: true,
    rule: channelUsers(200),
    success: () => ({ rest: { status: "claimed" }, grpc: { status: ClaimStatus.CLAIMED } }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    rpc: "MessageService.ClaimMessageWithLease",
    scope: "channel",
    mutates: true,
    rule: channelUsers(200),
    success: () => ({ rest: { lease_token: expect.any(String) }, grpc: { leaseToken: expect.any(String) } }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    // Leases the worker's message: the caller must be able to use the channel.
    rpc: "MessageService.ReceiveMessages",
    scope: "channel",
    mutates: true,
    rule: channelUsers(200),
    success: () => ({
      rest: { data: [{ lease_token: expect.any(String), message: { delivery_count: 1 } }] },
      grpc: { data: [{ leaseToken: expect.any(String), message: { deliveryCount: 1 } }] },
    }),
    prepare: async (env) => {
      await workerMessage(env);
      return { fields: { identifier: await env.channel() } };
    },
  },
  {
    // Owner only: a redrive writes into the owner's other channels.
    rpc: "MessageService.RedriveDeadLetters",
    scope: "channel",
    mutates: false,
    rule: ownerOnly(200),
    success: () => sameBody({ moved: 0 }),
    prepare: onChannel,
  },
  {
    // Reading: anyone who may use the channel; the counts are the channel's, whoever asks.
    rpc: "MessageService.GetChannelStats",
    scope: "channel",
    mutates: false,
    rule: channelUsers(200),
    success: () => ({ rest: { ready: expect.any(Number), in_flight: expect.any(Number) }, grpc: { ready: expect.any(Number), inFlight: expect.any(Number) } }),
    prepare: onChannel,
  },
  {
    // Held by the worker: nobody else may extend it, not even the channel owner.
    rpc: "MessageService.HeartbeatLease",
    variant: "another key's lease",
    scope: "channel",
    mutates: true,
    rule: only([], 200),
    prepare: async (env) => ({ fields: { lease_token: await leaseOn(env.inst, env.inst.keys.worker, await workerMessage(env)) } }),
  },
  {
    rpc: "MessageService.HeartbeatLease",
    variant: "the caller's own lease",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => ({ rest: { lease_token: expect.any(String) }, grpc: { leaseToken: expect.any(String) } }),
    prepare: async (env) => ({ fields: { lease_token: await leaseOn(env.inst, env.self, await workerMessage(env)) } }),
  },
  {
    rpc: "MessageService.ReportProgress",
    variant: "another key's lease",
    scope: "channel",
    mutates: true,
    rule: leaseHolderOnly,
    prepare: async (env) => {
      const id = await workerMessage(env);
      return { fields: { message_id: id, lease_token: await leaseOn(env.inst, env.inst.keys.worker, id), text: "x" } };
    },
  },
  {
    rpc: "MessageService.ReportProgress",
    variant: "the caller's own lease",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => ({ rest: { message: { progress: { text: "halfway" } } }, grpc: { message: { progress: { text: "halfway" } } } }),
    prepare: async (env) => {
      const id = await workerMessage(env);
      return { fields: { message_id: id, lease_token: await leaseOn(env.inst, env.self, id), text: "halfway" } };
    },
  },
  {
    // Finished at once (acknowledged before the stream opens): the stream sends its state and result, then ends.
    rpc: "MessageService.WatchMessage",
    scope: "channel",
    mutates: false,
    rule: channelUsers(200),
    prepare: async (env) => ({ fields: { message_id: await finishedMessage(env) } }),
  },
  {
    // Claimed by the worker: nobody else may release it, not even the channel owner.
    rpc: "MessageService.ReleaseMessage",
    variant: "another key's claim",
    scope: "channel",
    mutates: true,
    rule: only([], 200),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.inst.keys.worker, messageId);
      return { fields: { message_id: messageId } };
    },
  },
  {
    rpc: "MessageService.ReleaseMessage",
    variant: "the caller's own claim",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => sameBody({ status: "released" }),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.self, messageId);
      return { fields: { message_id: messageId } };
    },
  },
  {
    rpc: "MessageService.AckMessage",
    scope: "channel",
    mutates: true,
    rule: channelUsers(200),
    success: () => ({ rest: { status: "acknowledged" }, grpc: { status: AckStatus.ACKNOWLEDGED } }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    // Any key may call; each id is judged as AckMessage would, answered in its result.
    rpc: "MessageService.BatchAckMessages",
    scope: "channel",
    mutates: true,
    rule: anyKey(200),
    success: (access, who) =>
      access === "restricted" && who === "stranger"
        ? itemRefused("channel_access_denied")
        : { rest: { results: [{ status: "acknowledged", error: null }] }, grpc: { results: [{ status: AckStatus.ACKNOWLEDGED }] } },
    prepare: async (env) => ({ fields: { message_ids: [await workerMessage(env)] } }),
  },
  {
    // Claimed by the worker: every other caller gets the item's refusal, as from ReleaseMessage.
    rpc: "MessageService.BatchReleaseMessages",
    variant: "another key's claim",
    scope: "channel",
    mutates: true,
    rule: anyKey(200),
    success: (access, who) => itemRefused(access === "restricted" && who === "stranger" ? "channel_access_denied" : "forbidden"),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.inst.keys.worker, messageId);
      return { fields: { message_ids: [messageId] } };
    },
  },
  {
    rpc: "MessageService.BatchReleaseMessages",
    variant: "the caller's own claim",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => sameBody({ results: [{ status: "released" }] }),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.self, messageId);
      return { fields: { message_ids: [messageId] } };
    },
  },
  {
    // Claimed by the worker: a result from anyone else is refused, the owner's too.
    rpc: "MessageService.AckMessage",
    variant: "with a result, another key's claim",
    scope: "channel",
    mutates: true,
    rule: only([], 200),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.inst.keys.worker, messageId);
      return { fields: { message_id: messageId, result: "done" } };
    },
  },
  {
    rpc: "MessageService.AckMessage",
    variant: "with a result, the caller's own claim",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => ({ rest: { status: "acknowledged" }, grpc: { status: AckStatus.ACKNOWLEDGED } }),
    prepare: async (env) => {
      const messageId = await workerMessage(env);
      await claim(env.inst, env.self, messageId);
      return { fields: { message_id: messageId, result: "done" } };
    },
  },
  {
    // Reading changes nothing; the fresh channel only keeps the posted messages out of the shared one.
    rpc: "MessageService.GetMessage",
    scope: "channel",
    mutates: true,
    rule: channelUsers(200),
    success: () => sameBody({ content: "work item" }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    // Any key may ask; each sees only the messages of channels it may read (trace-context.test.ts shows the filter).
    rpc: "MessageService.ListTraceMessages",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    prepare: async () => ({ fields: { trace_id: "ab".repeat(16) } }),
  },
  {
    rpc: "MessageService.ListMessageDependents",
    scope: "channel",
    mutates: false,
    rule: channelUsers(200),
    success: () => sameBody({ data: [] }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    // Posted by the worker: the channel owner may retract it, another member may not.
    rpc: "MessageService.RetractMessage",
    variant: "a member's message",
    scope: "channel",
    mutates: true,
    rule: only(["owner"], 200),
    success: () => sameBody({ status: "retracted" }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    rpc: "MessageService.RetractMessage",
    variant: "the caller's own message",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => sameBody({ status: "retracted" }),
    prepare: async (env) => ({ fields: { message_id: await post(env.inst, env.self, await env.channel()) } }),
  },

  {
    // Posted by the worker: the channel owner may cancel it, another member may not.
    rpc: "MessageService.CancelMessage",
    variant: "a member's message",
    scope: "channel",
    mutates: true,
    rule: only(["owner"], 200),
    success: () => ({ rest: { message: { state: "cancelled", cancel_requested: true } }, grpc: { message: { cancelRequested: true } } }),
    prepare: async (env) => ({ fields: { message_id: await workerMessage(env) } }),
  },
  {
    rpc: "MessageService.CancelMessage",
    variant: "the caller's own message",
    scope: "channel",
    mutates: true,
    rule: ownResource(200),
    success: () => ({ rest: { message: { state: "cancelled", cancel_requested: true } }, grpc: { message: { cancelRequested: true } } }),
    prepare: async (env) => ({ fields: { message_id: await post(env.inst, env.self, await env.channel()) } }),
  },
  // ----- AdminService (X-Admin-Token; the API key plays no part) -----
  {
    rpc: "AdminService.PauseChannel",
    scope: "admin",
    mutates: true,
    rule: anyKey(200),
    success: () => sameBody({ paused: true }),
    prepare: onChannel,
  },
  {
    rpc: "AdminService.ResumeChannel",
    scope: "admin",
    mutates: true,
    rule: anyKey(200),
    success: () => sameBody({ paused: false }),
    prepare: async (env) => {
      const channel = await env.channel();
      await patchChannel(env.inst, channel, { paused: true });
      return { fields: { identifier: channel } };
    },
  },
  {
    rpc: "AdminService.CreateKey",
    scope: "admin",
    mutates: true,
    rule: anyKey(201),
    prepare: async () => ({ fields: { agent_label: unique("fleet") }, grpc: { agentLabel: unique("fleet") } }),
  },
  // Opens minting (as it already is): the other rows mint keys too.
  {
    rpc: "AdminService.SetPublicMinting",
    scope: "admin",
    mutates: true,
    rule: anyKey(200),
    success: () => ({ rest: { public_minting_enabled: true }, grpc: { publicMintingEnabled: true } }),
    prepare: async () => ({ fields: { enabled: true } }),
  },
  {
    rpc: "AdminService.GetPublicMinting",
    scope: "admin",
    mutates: false,
    rule: anyKey(200),
    prepare: async () => ({ fields: {} }),
  },
  {
    rpc: "AdminService.ListAuditEvents",
    scope: "admin",
    mutates: false,
    rule: anyKey(200),
    prepare: async () => ({ fields: {} }),
  },
  // The worker's quotas set to the defaults they already are (nothing given): the other rows post as it.
  {
    rpc: "AdminService.SetKeyQuotas",
    scope: "admin",
    mutates: false,
    rule: anyKey(200),
    prepare: async (env) => ({ fields: { key_id: keyIdOf(env.inst.keys.worker) } }),
  },

  // ----- LimitService (not channel-scoped: a limit is its creating key's) -----
  {
    rpc: "LimitService.CreateLimit",
    scope: "global",
    mutates: false,
    rule: anyKey(201),
    success: () => ({ rest: { max_in_flight: 3, in_flight: 0 }, grpc: { maxInFlight: 3, inFlight: 0 } }),
    prepare: async () => ({ fields: { name: unique("matrix"), max_in_flight: 3 } }),
  },
  {
    rpc: "LimitService.ListLimits",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    success: () => sameBody({ data: expect.any(Array) }),
    prepare: async () => ({ fields: {} }),
  },
  {
    rpc: "LimitService.GetLimit",
    variant: "the caller's own limit",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    success: () => ({ rest: { max_in_flight: 5 }, grpc: { maxInFlight: 5 } }),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.self) } }),
  },
  {
    rpc: "LimitService.GetLimit",
    variant: "the owner's limit",
    scope: "global",
    mutates: false,
    rule: ownersOnly(200, LIMIT_NOT_FOUND),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.inst.keys.owner) } }),
  },
  {
    rpc: "LimitService.UpdateLimit",
    variant: "the caller's own limit",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    success: () => ({ rest: { max_in_flight: 9 }, grpc: { maxInFlight: 9 } }),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.self), update: { max_in_flight: 9 } } }),
  },
  {
    rpc: "LimitService.UpdateLimit",
    variant: "the owner's limit",
    scope: "global",
    mutates: false,
    rule: ownersOnly(200, LIMIT_NOT_FOUND),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.inst.keys.owner), update: { max_in_flight: 9 } } }),
  },
  {
    rpc: "LimitService.DeleteLimit",
    variant: "the caller's own limit",
    scope: "global",
    mutates: false,
    rule: anyKey(204),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.self) } }),
  },
  {
    rpc: "LimitService.DeleteLimit",
    variant: "the owner's limit",
    scope: "global",
    mutates: false,
    rule: ownersOnly(204, LIMIT_NOT_FOUND),
    prepare: async (env) => ({ fields: { name: await limitOf(env.inst, env.inst.keys.owner) } }),
  },

  // ----- ScheduleService (channel-scoped) -----
  {
    rpc: "ScheduleService.CreateSchedule",
    scope: "channel",
    mutates: false,
    rule: channelUsers(201),
    success: () => sameBody({ cron: "0 0 * * *", paused: false }),
    prepare: async (env) => ({ fields: { channel: await env.channel(), cron: "0 0 * * *", message: { content: "nightly" } } }),
  },
  {
    rpc: "ScheduleService.ListSchedules",
    scope: "channel",
    mutates: false,
    rule: channelUsers(200),
    prepare: async (env) => ({ fields: { channel: await env.channel() } }),
  },
  {
    rpc: "ScheduleService.GetSchedule",
    variant: "the worker's schedule",
    scope: "channel",
    mutates: false,
    rule: scheduleReaders(200),
    prepare: async (env) => ({ fields: { id: await scheduleOf(env.inst, env.inst.keys.worker, await env.channel()) } }),
  },
  {
    rpc: "ScheduleService.UpdateSchedule",
    variant: "the worker's schedule",
    scope: "channel",
    mutates: false,
    rule: scheduleOwnerOnly(200),
    success: () => sameBody({ paused: true }),
    prepare: async (env) => ({ fields: { id: await scheduleOf(env.inst, env.inst.keys.worker, await env.channel()), update: { paused: true } } }),
  },
  {
    rpc: "ScheduleService.UpdateSchedule",
    variant: "the caller's own schedule",
    scope: "channel",
    mutates: false,
    rule: ownResource(200),
    prepare: async (env) => ({ fields: { id: await scheduleOf(env.inst, env.self, await env.channel()), update: { paused: true } } }),
  },
  {
    rpc: "ScheduleService.DeleteSchedule",
    variant: "the worker's schedule",
    scope: "channel",
    mutates: false,
    rule: scheduleOwnerOnly(204),
    prepare: async (env) => ({ fields: { id: await scheduleOf(env.inst, env.inst.keys.worker, await env.channel()) } }),
  },
  {
    rpc: "ScheduleService.DeleteSchedule",
    variant: "the caller's own schedule",
    scope: "channel",
    mutates: false,
    rule: ownResource(204),
    prepare: async (env) => ({ fields: { id: await scheduleOf(env.inst, env.self, await env.channel()) } }),
  },

  // ----- WaitpointService (not channel-scoped: a waitpoint is its creating key's; its token needs no key) -----
  {
    rpc: "WaitpointService.CreateWaitpoint",
    scope: "global",
    mutates: false,
    rule: anyKey(201),
    success: () => ({ rest: { state: "waiting", token: expect.stringMatching(/^wpt_/) }, grpc: { state: WaitpointState.WAITING, token: expect.stringMatching(/^wpt_/) } }),
    prepare: async () => ({ fields: { timeout_seconds: 600 }, grpc: { timeoutSeconds: 600 } }),
  },
  {
    rpc: "WaitpointService.ListWaitpoints",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    prepare: async () => ({ fields: {} }),
  },
  {
    rpc: "WaitpointService.GetWaitpoint",
    variant: "the caller's own waitpoint",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    prepare: async (env) => ({ fields: { id: (await waitpointOf(env.inst, env.self)).id } }),
  },
  {
    rpc: "WaitpointService.GetWaitpoint",
    variant: "the owner's waitpoint",
    scope: "global",
    mutates: false,
    rule: ownersOnly(200, WAITPOINT_NOT_FOUND),
    prepare: async (env) => ({ fields: { id: (await waitpointOf(env.inst, env.inst.keys.owner)).id } }),
  },
  {
    rpc: "WaitpointService.ResolveWaitpoint",
    variant: "the caller's own waitpoint",
    scope: "global",
    mutates: false,
    rule: anyKey(200),
    success: () => ({ rest: { state: "completed" }, grpc: { state: WaitpointState.COMPLETED } }),
    prepare: async (env) => ({ fields: { id: (await waitpointOf(env.inst, env.self)).id } }),
  },
  {
    rpc: "WaitpointService.ResolveWaitpoint",
    variant: "the owner's waitpoint",
    scope: "global",
    mutates: false,
    rule: ownersOnly(200, WAITPOINT_NOT_FOUND),
    prepare: async (env) => ({ fields: { id: (await waitpointOf(env.inst, env.inst.keys.owner)).id } }),
  },
  {
    rpc: "WaitpointService.CompleteWaitpoint",
    variant: "with its token",
    scope: "global",
    mutates: false,
    keyless: true,
    rule: anyKey(200),
    success: () => ({ rest: { state: "completed" }, grpc: { state: WaitpointState.COMPLETED } }),
    prepare: async (env) => ({ fields: { token: (await waitpointOf(env.inst, env.inst.keys.owner)).token } }),
  },
];

/** A fresh paused schedule of `key` on `channel`, straight in the table; its id. */
async function scheduleOf(inst: Instance, key: string, channel: string): Promise<string> {
  const id = randomUUID();
  await inst.sql.query(
    `INSERT INTO schedules (id, channel_id, created_by_key_id, cron, timezone, message, paused, created_at, updated_at)
     VALUES ($1, $2, $3, '0 0 * * *', 'UTC', '{"content": "nightly"}', true, now(), now())`,
    [id, channel, keyIdOf(key)],
  );
  return id;
}

/** A fresh waitpoint of `key` (an hour), straight in the table; its id and token. */
async function waitpointOf(inst: Instance, key: string): Promise<{ id: string; token: string }> {
  const id = randomUUID();
  const secret = randomBytes(32).toString("base64url");
  await inst.sql.query(
    "INSERT INTO waitpoints (id, owner_key_id, token_hash, created_at, expires_at) VALUES ($1, $2, $3, now(), now() + interval '1 hour')",
    [id, keyIdOf(key), createHash("sha256").update(secret).digest()],
  );
  return { id, token: `wpt_${id.replaceAll("-", "")}_${secret}` };
}

/** A fresh limit of `key` (max_in_flight 5), straight in the table so the fixtures do not depend on the routes under test; its name. */
async function limitOf(inst: Instance, key: string): Promise<string> {
  const name = unique("limit");
  await inst.sql.query("INSERT INTO limits (owner_key_id, name, max_in_flight, created_at, updated_at) VALUES ($1, $2, 5, now(), now())", [keyIdOf(key), name]);
  return name;
}

/** The stranger's pending access request on a fresh channel of the case's access. */
async function pendingRequest(env: Env): Promise<Prepared> {
  // Requests are filed on restricted channels only; an open channel with a
  // pending request is one that was opened after the request came in.
  const channel = await newChannel(env.inst, "restricted");
  const requestId = await requestAccess(env.inst, env.inst.keys.stranger, channel);
  if (env.access === "open") await patchChannel(env.inst, channel, { access: "open" });
  return { fields: { identifier: channel, request_id: requestId } };
}

/** A fresh unclaimed message of the worker on the case's channel. */
async function workerMessage(env: Env): Promise<string> {
  return post(env.inst, env.inst.keys.worker, await env.channel());
}

/** A message of the worker's that the worker acknowledged: finished. */
async function finishedMessage(env: Env): Promise<string> {
  const id = await workerMessage(env);
  await must("ack", rest(env.inst.server.url, "POST", `/v1/messages/${id}/ack`, { key: env.inst.keys.worker, body: {} }), 200);
  return id;
}

// ---------------------------------------------------------------------------
// Expectations and cases
// ---------------------------------------------------------------------------

const SERVICES: readonly DescService[] = [ChannelService, MessageService, AdminService, LimitService, WaitpointService, ScheduleService];
const routeTable = new RestRoutes(SERVICES);
const methods = new Map<string, DescMethod>(SERVICES.flatMap((s) => s.methods.map((m): [string, DescMethod] => [`${s.name}.${m.name}`, m])));

function expectedOutcome(row: Row, caller: Principal | AdminCaller, access: Access): Outcome | undefined {
  if (row.scope === "admin") {
    switch (caller) {
      case "admin_token":
        return row.rule("owner", access);
      case "admin_disabled":
        return refused(403, "admin_disabled");
      default:
        return refused(401, "admin_unauthorized");
    }
  }
  if (row.keyless) return row.rule("owner", access);
  if (caller === "none") return refused(401, row.missingKey ?? "unauthorized");
  if (caller === "revoked") return UNAUTHORIZED;
  // The scope is checked with the key, before anything about the channel.
  if (caller === "lacking_scope") return refused(403, "insufficient_scope");
  const outcome = row.rule(caller === "holding_scope" ? "member" : (caller as KeyHolder), access);
  if (outcome !== undefined && row.notImplementedYet) return NOT_IMPLEMENTED;
  return outcome;
}

const CALLER_LABELS: Record<Principal | AdminCaller, string> = {
  none: "without a key",
  revoked: "with a revoked key",
  stranger: "as stranger",
  member: "as member",
  owner: "as owner",
  holding_scope: "as a member whose key holds only the RPC's scope",
  lacking_scope: "as a member whose key holds every scope but the RPC's",
  no_token: "without an admin token",
  wrong_token: "with a wrong admin token",
  api_key_only: "with the owner's API key but no admin token",
  admin_token: "with the admin token",
  admin_disabled: "with an admin token where AGENTBUS_ADMIN_TOKEN is unset",
};

interface Actual {
  /** REST: the HTTP status; gRPC: the status code name ("OK" on success). */
  status: number | string;
  error?: string;
  body?: unknown;
  /** Context for a failure message. */
  detail?: string;
}

interface Case {
  name: string;
  row: Row;
  method: DescMethod;
  protocol: "REST" | "gRPC";
  route?: RestRoute;
  caller: Principal | AdminCaller;
  access: Access;
  expected: Outcome;
  result?: Actual | { setupError: string };
}

const expectedGrpc = (o: Outcome): Actual =>
  o.error === undefined ? { status: "OK" } : { status: Code[GRPC_CODE_OF_ERROR[o.error] ?? Code.Unknown], error: o.error };

function caseName(c: Omit<Case, "name">): string {
  const what =
    c.protocol === "REST"
      ? `REST ${c.route?.httpMethod} ${c.route?.template.template}`
      : `gRPC ${c.method.parent.name}.${c.method.name}`;
  const variant = c.row.variant ? ` (${c.row.variant})` : "";
  const where = c.row.scope === "global" ? "" : ` on ${c.access === "open" ? "an open" : "a restricted"} channel`;
  const expected = c.protocol === "REST" ? c.expected : expectedGrpc(c.expected);
  const answer = `${expected.status}${expected.error ? ` ${expected.error}` : ""}`;
  return `${what}${variant} ${CALLER_LABELS[c.caller]}${where} → ${answer}`;
}

function buildCases(): Case[] {
  const cases: Case[] = [];
  for (const row of rows) {
    const method = methods.get(row.rpc);
    if (!method) continue; // reported by the completeness guard
    const callers = row.scope === "admin" ? ADMIN_CALLERS : row.keyless ? KEYLESS_CALLERS : PRINCIPALS;
    const accesses = row.scope === "global" ? (["open"] as const) : ACCESSES;
    const targets: Array<{ protocol: "REST" | "gRPC"; route?: RestRoute }> = [
      ...routeTable.routes.filter((r) => r.method === method).map((route) => ({ protocol: "REST" as const, route })),
      { protocol: "gRPC" },
    ];
    for (const target of targets) {
      for (const caller of callers) {
        for (const access of accesses) {
          const expected = expectedOutcome(row, caller, access);
          if (expected === undefined) continue;
          const c = { row, method, ...target, caller, access, expected };
          cases.push({ ...c, name: caseName(c) });
        }
      }
    }
  }
  return cases;
}

const cases = buildCases();

// ---------------------------------------------------------------------------
// Servers and fixtures
// ---------------------------------------------------------------------------

interface Instance {
  server: TestServer;
  transport: Transport;
  sql: pg.Pool;
  /** owner owns every channel; member and worker are members of every channel; stranger of none. */
  keys: Record<"owner" | "member" | "worker" | "stranger" | "revoked", string>;
  /** Members of every channel, by scope: a key holding only that scope, and one holding every other. */
  scoped: Record<KeyScope, { only: string; without: string }>;
  /** One channel per access for the rows that do not mutate, holding one message. */
  shared: Record<Access, string>;
}

let main: Instance;
/** An instance without AGENTBUS_ADMIN_TOKEN: admin routes are disabled. */
let adminless: Instance;
const exercisedRoutes = new Set<RestRoute>();

async function must<T>(what: string, res: Promise<JsonResponse<T>>, status: number): Promise<T> {
  const answer = await res;
  if (answer.status !== status) throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

async function newChannel(inst: Instance, access: Access): Promise<string> {
  const { id } = await must<{ id: string }>(
    "create channel",
    rest(inst.server.url, "POST", "/v1/channels", { key: inst.keys.owner, body: { name: unique("matrix"), mode: "claimable", access } }),
    201,
  );
  // Membership straight in the table, so the fixtures do not depend on the routes under test.
  const members = [inst.keys.member, inst.keys.worker, ...Object.values(inst.scoped).flatMap((k) => [k.only, k.without])].map(keyIdOf);
  await inst.sql.query("INSERT INTO channel_members (channel_id, key_id) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING", [id, members]);
  return id;
}

async function post(inst: Instance, key: string, channel: string): Promise<string> {
  const body = await must<{ message: { id: string } }>(
    "post message",
    rest(inst.server.url, "POST", `/v1/channels/${channel}/messages`, { key, body: { content: "work item" } }),
    201,
  );
  return body.message.id;
}

async function claim(inst: Instance, key: string, messageId: string): Promise<void> {
  await must("claim", rest(inst.server.url, "POST", `/v1/messages/${messageId}/claim`, { key, body: {} }), 200);
}

async function leaseOn(inst: Instance, key: string, messageId: string): Promise<string> {
  const body = await must<{ lease_token: string }>(
    "claim with lease",
    rest(inst.server.url, "POST", `/v1/messages/${messageId}/claim-with-lease`, { key, body: {} }),
    200,
  );
  return body.lease_token;
}

async function invite(inst: Instance, key: string, channel: string): Promise<string> {
  const body = await must<{ id: string }>(
    "create invitation",
    rest(inst.server.url, "POST", `/v1/channels/${channel}/invitations`, { key, body: {} }),
    201,
  );
  return body.id;
}

async function requestAccess(inst: Instance, key: string, channel: string): Promise<string> {
  const body = await must<{ request_id: string }>(
    "request access",
    rest(inst.server.url, "POST", `/v1/channels/${channel}/access-requests`, { key, body: { reason: "please" } }),
    202,
  );
  return body.request_id;
}

async function patchChannel(inst: Instance, channel: string, body: Record<string, unknown>): Promise<void> {
  await must("patch channel", rest(inst.server.url, "PATCH", `/v1/channels/${channel}`, { key: inst.keys.owner, body }), 200);
}

async function startInstance(env: Record<string, string>): Promise<Instance> {
  const server = await startTestServer(env);
  const sql = new pg.Pool({ connectionString: server.databaseUrl, max: 4 });
  const [owner, member, worker, stranger, revoked] = await Promise.all(
    ["owner", "member", "worker", "stranger", "revoked"].map((label) => mintKey(server.url, unique(label))),
  );
  const keys = { owner: owner!, member: member!, worker: worker!, stranger: stranger!, revoked: revoked! };
  await must("revoke key", rest(server.url, "DELETE", "/v1/keys/me", { key: keys.revoked }), 200);
  const scopedKey = async (scopes: readonly KeyScope[]) => {
    const key = await mintKey(server.url, unique("scoped"));
    await must("narrow scopes", rest(server.url, "PUT", "/v1/keys/me/scopes", { key, body: { scopes } }), 200);
    return key;
  };
  const scoped = Object.fromEntries(
    await Promise.all(
      KEY_SCOPES.map(async (scope) => [scope, { only: await scopedKey([scope]), without: await scopedKey(KEY_SCOPES.filter((s) => s !== scope)) }] as const),
    ),
  ) as Instance["scoped"];
  const inst: Instance = { server, sql, keys, scoped, transport: createGrpcTransport({ baseUrl: server.url }), shared: { open: "", restricted: "" } };
  for (const access of ACCESSES) {
    inst.shared[access] = await newChannel(inst, access);
    await post(inst, keys.owner, inst.shared[access]);
  }
  return inst;
}

// ---------------------------------------------------------------------------
// Calling a case over REST and over gRPC
// ---------------------------------------------------------------------------

interface Credentials {
  apiKey?: string;
  adminToken?: string;
  /**
   * X-Forwarded-For, unique per case (the instances trust it): invitation
   * lookups are limited to 10 per minute per source address, and the matrix
   * makes more than that from one machine.
   */
  forwardedFor: string;
}

let addresses = 0;

/** A distinct documentation-range address (198.18.0.0/15) per call. */
function nextAddress(): string {
  const n = ++addresses;
  return `198.${18 + ((n >> 16) & 1)}.${(n >> 8) & 255}.${n & 255}`;
}

/** The key a principal calls with; the scoped principals' depends on the RPC's scope. */
function keyOf(inst: Instance, caller: Principal, method: DescMethod): string | undefined {
  switch (caller) {
    case "none":
      return undefined;
    case "holding_scope":
    case "lacking_scope": {
      const scope = rulesOf(method).scope;
      if (scope === undefined || scope === "any_key") throw new Error(`${method.name}: no scope to hold or lack`);
      return caller === "holding_scope" ? inst.scoped[scope].only : inst.scoped[scope].without;
    }
    default:
      return inst.keys[caller];
  }
}

function credentialsOf(inst: Instance, caller: Principal | AdminCaller, method: DescMethod): Credentials {
  const forwardedFor = nextAddress();
  switch (caller) {
    case "holding_scope":
    case "lacking_scope":
      return { apiKey: keyOf(inst, caller, method), forwardedFor };
    case "none":
    case "no_token":
      return { forwardedFor };
    case "revoked":
    case "stranger":
    case "member":
    case "owner":
      return { apiKey: inst.keys[caller], forwardedFor };
    case "api_key_only":
      return { apiKey: inst.keys.owner, forwardedFor };
    case "wrong_token":
      return { adminToken: `${ADMIN_TOKEN}-wrong`, forwardedFor };
    case "admin_token":
    case "admin_disabled":
      return { adminToken: ADMIN_TOKEN, forwardedFor };
  }
}

const CALL_TIMEOUT_MS = 10_000;

async function callRest(inst: Instance, route: RestRoute, prepared: Prepared, creds: Credentials): Promise<Actual> {
  const fields = { ...prepared.fields };
  let path = route.template.template;
  for (const variable of route.template.variables) {
    path = path.replace(`{${variable}}`, encodeURIComponent(String(fields[variable])));
    delete fields[variable];
  }
  const matched = routeTable.match(route.httpMethod, path);
  if (matched.kind !== "route" || matched.route !== route) throw new Error(`${route.httpMethod} ${path} does not reach ${route.template.template}`);
  exercisedRoutes.add(route);

  const headers: Record<string, string> = { "X-Forwarded-For": creds.forwardedFor };
  if (creds.apiKey !== undefined) headers["X-API-Key"] = creds.apiKey;
  if (creds.adminToken !== undefined) headers["X-Admin-Token"] = creds.adminToken;
  let body: string | undefined;
  let query = "";
  if (route.bodyField === "*") body = JSON.stringify(fields);
  else if (route.bodyField !== "") body = JSON.stringify(fields[route.bodyField] ?? {});
  else {
    const params = new URLSearchParams(Object.entries(fields).map(([k, v]): [string, string] => [k, String(v)]));
    if (params.size > 0) query = `?${params}`;
  }
  if (body !== undefined) headers["Content-Type"] = "application/json";

  const res = await fetch(`${inst.server.url}${path}${query}`, {
    method: route.httpMethod,
    headers,
    body,
    signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
  });
  if (res.headers.get("content-type")?.includes("text/event-stream")) {
    // An open Server-Sent Events stream: the status is the answer.
    await res.body?.cancel();
    return { status: res.status };
  }
  const text = await res.text();
  let json: unknown = {};
  try {
    json = text === "" ? {} : JSON.parse(text);
  } catch {
    return { status: res.status, detail: `non-JSON body: ${text.slice(0, 200)}` };
  }
  const error = res.status >= 400 ? (json as { error?: string }).error : undefined;
  return { status: res.status, ...(error === undefined ? {} : { error }), body: json, detail: text.slice(0, 500) };
}

const camelCase = (name: string) => name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

function toGrpcInit(value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [camelCase(k), toGrpcInit(v)]));
}

async function callGrpc(inst: Instance, method: DescMethod, prepared: Prepared, creds: Credentials): Promise<Actual> {
  const init = { ...(toGrpcInit(prepared.fields) as Fields), ...(prepared.grpc ?? {}) };
  const request = create(method.input, init as Parameters<typeof create>[1]);
  const headers = new Headers({ "x-forwarded-for": creds.forwardedFor });
  if (creds.apiKey !== undefined) headers.set("x-api-key", creds.apiKey);
  if (creds.adminToken !== undefined) headers.set("x-admin-token", creds.adminToken);
  const abort = new AbortController();
  // Real time: a bound on a real call, so that a server that never answers fails the test instead of hanging it.
  const timer = setTimeout(() => abort.abort(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`)), CALL_TIMEOUT_MS);
  try {
    if (method.methodKind === "unary") {
      const res = await inst.transport.unary(method as DescMethodUnary, abort.signal, undefined, headers, request);
      return { status: "OK", body: res.message };
    }
    if (method.methodKind === "server_streaming") {
      const res = await inst.transport.stream(method as DescMethodServerStreaming, abort.signal, undefined, headers, single(request));
      // The first message (or the error) is the answer; then the stream is closed.
      for await (const message of res.message) return { status: "OK", body: message };
      return { status: "OK", detail: "the stream ended without a message" };
    }
    throw new Error(`${method.name}: ${method.methodKind} methods are not in the matrix`);
  } catch (e) {
    const err = ConnectError.from(e);
    const error = err.findDetails(ErrorDetailSchema)[0]?.error;
    return { status: Code[err.code], ...(error === undefined ? {} : { error }), detail: err.rawMessage };
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

async function* single<T>(value: T): AsyncIterable<T> {
  yield value;
}

async function runCase(c: Case): Promise<void> {
  const inst = c.caller === "admin_disabled" ? adminless : main;
  let channel: Promise<string> | undefined;
  const env: Env = {
    inst,
    access: c.access,
    self:
      c.caller === "stranger" || c.caller === "member" || c.caller === "owner"
        ? inst.keys[c.caller]
        : c.caller === "holding_scope"
          ? (keyOf(inst, c.caller, c.method) as string)
          : inst.keys.worker,
    channel: () => (channel ??= c.row.mutates ? newChannel(inst, c.access) : Promise.resolve(inst.shared[c.access])),
  };
  let prepared: Prepared;
  try {
    prepared = await c.row.prepare(env);
  } catch (err) {
    c.result = { setupError: err instanceof Error ? err.message : String(err) };
    return;
  }
  const creds = credentialsOf(inst, c.caller, c.method);
  try {
    c.result =
      c.protocol === "REST" && c.route ? await callRest(inst, c.route, prepared, creds) : await callGrpc(inst, c.method, prepared, creds);
  } catch (err) {
    c.result = { status: "call failed", detail: err instanceof Error ? err.message : String(err) };
  }
}

async function withConcurrency<T>(items: readonly T[], limit: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await run(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

beforeAll(async () => {
  [main, adminless] = await Promise.all([
    startInstance({ AGENTBUS_ADMIN_TOKEN: ADMIN_TOKEN, AGENTBUS_TRUST_PROXY: "true" }),
    startInstance({ AGENTBUS_TRUST_PROXY: "true" }),
  ]);
  await withConcurrency(cases, 16, runCase);
}, 180_000);

afterAll(async () => {
  await Promise.all(
    [main, adminless].map(async (inst) => {
      if (!inst) return;
      await inst.sql.end();
      await inst.server.close();
    }),
  );
});

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

describe("completeness", () => {
  it("has a row for every RPC of ChannelService, MessageService, AdminService and LimitService", () => {
    const covered = new Set(rows.map((r) => r.rpc));
    const missing = [...methods.keys()].filter((name) => !covered.has(name));
    expect(missing, "RPCs without a row in the authorization matrix").toEqual([]);
  });

  it("names only RPCs that exist", () => {
    expect(rows.map((r) => r.rpc).filter((name) => !methods.has(name))).toEqual([]);
  });

  it("exercises every REST route of those services", () => {
    const missing = routeTable.routes.filter((r) => !exercisedRoutes.has(r)).map((r) => `${r.httpMethod} ${r.template.template}`);
    expect(missing, "REST routes no case called").toEqual([]);
  });

  it("calls every RPC over gRPC", () => {
    const called = new Set(cases.filter((c) => c.protocol === "gRPC" && c.result !== undefined).map((c) => c.method));
    expect([...methods.values()].filter((m) => !called.has(m)).map((m) => `${m.parent.name}.${m.name}`)).toEqual([]);
  });
});

const byRpc = new Map<string, Case[]>();
for (const c of cases) byRpc.set(c.row.rpc, [...(byRpc.get(c.row.rpc) ?? []), c]);

for (const [rpc, rpcCases] of byRpc) {
  describe(rpc, () => {
    for (const c of rpcCases) {
      it(c.name, () => {
        const result = c.result;
        if (result === undefined) throw new Error("the case did not run");
        if ("setupError" in result) throw new Error(`fixture setup failed: ${result.setupError}`);
        const expected: Actual = c.protocol === "REST" ? c.expected : expectedGrpc(c.expected);
        const context = result.detail ?? JSON.stringify(result.body, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
        expect({ status: result.status, error: result.error }, context).toEqual({ status: expected.status, error: expected.error });
        if (expected.error === undefined && c.row.success) {
          const who =
            c.caller === "stranger" || c.caller === "member" || c.caller === "owner" ? c.caller : c.caller === "holding_scope" ? "member" : "admin";
          const body = c.row.success(c.access, who);
          expect(result.body, context).toMatchObject(c.protocol === "REST" ? body.rest : body.grpc);
        }
      });
    }
  });
}
