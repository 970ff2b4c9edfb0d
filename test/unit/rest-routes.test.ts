import { describe, expect, it } from "vitest";
import { ActorService } from "../../gen/agentbus/v1/actor_service_pb.js";
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import { ChannelService } from "../../gen/agentbus/v1/channel_service_pb.js";
import { CompatService } from "../../gen/agentbus/v1/compat_service_pb.js";
import { JobService } from "../../gen/agentbus/v1/job_service_pb.js";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { LimitService } from "../../gen/agentbus/v1/limit_service_pb.js";
import { MessageService } from "../../gen/agentbus/v1/message_service_pb.js";
import { SecurityService } from "../../gen/agentbus/v1/security_service_pb.js";
import { ScheduleService } from "../../gen/agentbus/v1/schedule_service_pb.js";
import { SessionService } from "../../gen/agentbus/v1/session_service_pb.js";
import { WaitpointService } from "../../gen/agentbus/v1/waitpoint_service_pb.js";
import { rulesOf } from "../../src/server/rpc/method-rules.js";
import { RestRoutes } from "../../src/server/rest/routes.js";

const services = [KeyService, ChannelService, MessageService, ActorService, AdminService, JobService, SessionService, LimitService, SecurityService, CompatService, WaitpointService, ScheduleService];
const routes = new RestRoutes(services);

/** Every REST route the API offers, with the RPC that serves it. */
const expected: Array<[string, string, string]> = [
  ["POST", "/v1/keys", "CreateKey"],
  ["GET", "/v1/keys/me", "GetCurrentKey"],
  ["GET", "/v1/keys/me/channels", "ListMyChannels"],
  ["DELETE", "/v1/keys/me", "RevokeCurrentKey"],
  ["PUT", "/v1/keys/me/scopes", "SetCurrentKeyScopes"],
  ["POST", "/v1/channels", "CreateChannel"],
  ["GET", "/v1/channels", "DiscoverChannels"],
  ["GET", "/v1/channels/c1", "GetChannel"],
  ["PATCH", "/v1/channels/c1", "UpdateChannel"],
  ["DELETE", "/v1/channels/c1", "DeleteChannel"],
  ["POST", "/v1/channels/c1/aliases", "AddChannelAlias"],
  ["DELETE", "/v1/channels/c1/aliases/old-name", "RemoveChannelAlias"],
  ["GET", "/v1/channels/c1/history", "ListChannelHistory"],
  ["GET", "/v1/channels/c1/events", "ListChannelEvents"],
  ["GET", "/v1/channels/c1/members", "ListMembers"],
  ["POST", "/v1/channels/c1/members", "AddMember"],
  ["DELETE", "/v1/channels/c1/members/ak_1", "RemoveMember"],
  ["POST", "/v1/channels/c1/invitations", "CreateInvitation"],
  ["GET", "/v1/channels/c1/invitations", "ListInvitations"],
  ["GET", "/v1/channel-invitations/inv1", "ResolveInvitation"],
  ["GET", "/v1/channel-invitations/inv1/preview", "PreviewInvitation"],
  ["DELETE", "/v1/channel-invitations/inv1", "RevokeInvitation"],
  ["POST", "/v1/channels/c1/access-requests", "CreateAccessRequest"],
  ["GET", "/v1/channels/c1/access-requests", "ListAccessRequests"],
  ["POST", "/v1/channels/c1/access-requests/r1/approve", "ApproveAccessRequest"],
  ["POST", "/v1/channels/c1/access-requests/r1/deny", "DenyAccessRequest"],
  ["GET", "/v1/channels/c1/webhook-deliveries", "ListWebhookDeliveries"],
  ["POST", "/v1/channels/c1/messages", "CreateMessage"],
  ["GET", "/v1/channels/c1/messages", "ListMessages"],
  ["GET", "/v1/channels/c1/messages:stream", "WatchMessages"],
  ["POST", "/v1/channels/c1/messages:receive", "ReceiveMessages"],
  ["POST", "/v1/channels/c1/dead-letters:redrive", "RedriveDeadLetters"],
  ["GET", "/v1/channels/c1/stats", "GetChannelStats"],
  ["POST", "/v1/channels/c1/messages:batchCreate", "BatchCreateMessages"],
  ["POST", "/v1/messages:batchAck", "BatchAckMessages"],
  ["POST", "/v1/messages:batchRelease", "BatchReleaseMessages"],
  ["POST", "/v1/messages/m1/claim", "ClaimMessage"],
  ["POST", "/v1/messages/m1/claim-with-lease", "ClaimMessageWithLease"],
  ["POST", "/v1/leases/t1/heartbeat", "HeartbeatLease"],
  ["POST", "/v1/messages/m1/release", "ReleaseMessage"],
  ["POST", "/v1/messages/m1/ack", "AckMessage"],
  ["GET", "/v1/messages/m1", "GetMessage"],
  ["DELETE", "/v1/messages/m1", "RetractMessage"],
  ["POST", "/v1/messages/m1:cancel", "CancelMessage"],
  ["POST", "/v1/messages/m1/progress", "ReportProgress"],
  ["GET", "/v1/messages/m1/events", "WatchMessage"],
  ["POST", "/v1/actors", "CreateActor"],
  ["GET", "/v1/actors/a1", "GetActor"],
  ["POST", "/v1/actors/a1/aliases", "AddActorAlias"],
  ["POST", "/v1/actors/a1/webhook", "SetActorWebhook"],
  ["GET", "/v1/actors/a1/webhook", "GetActorWebhook"],
  ["DELETE", "/v1/actors/a1/webhook", "DeleteActorWebhook"],
  ["POST", "/v1/admin/channels/c1/pause", "PauseChannel"],
  ["POST", "/v1/admin/channels/c1/resume", "ResumeChannel"],
  ["POST", "/v1/admin/keys", "CreateKey"],
  ["POST", "/v1/admin/minting", "SetPublicMinting"],
  ["PUT", "/v1/admin/keys/{key_id}/quotas", "SetKeyQuotas"],
  ["GET", "/v1/admin/minting", "GetPublicMinting"],
  ["GET", "/v1/admin/audit", "ListAuditEvents"],
  ["POST", "/v1/sessions", "CreateSession"],
  ["GET", "/v1/sessions", "ListSessions"],
  ["GET", "/v1/sessions/0b6c5a1e-0000-4000-8000-000000000001", "GetSession"],
  ["PATCH", "/v1/sessions/0b6c5a1e-0000-4000-8000-000000000001", "UpdateSession"],
  ["DELETE", "/v1/sessions/0b6c5a1e-0000-4000-8000-000000000001", "DeleteSession"],
  ["GET", "/v1/sessions/s1/members", "ListSessionMembers"],
  ["POST", "/v1/sessions/s1/members", "AddSessionMember"],
  ["DELETE", "/v1/sessions/s1/members/ak_1", "RemoveSessionMember"],
  ["POST", "/v1/limits", "CreateLimit"],
  ["GET", "/v1/limits", "ListLimits"],
  ["GET", "/v1/limits/openai:gpt-4o", "GetLimit"],
  ["PATCH", "/v1/limits/openai:gpt-4o", "UpdateLimit"],
  ["DELETE", "/v1/limits/openai:gpt-4o", "DeleteLimit"],
  ["GET", "/v1/messages/m1/dependents", "ListMessageDependents"],
  ["GET", "/v1/traces/t1/messages", "ListTraceMessages"],
  ["POST", "/v1/waitpoints", "CreateWaitpoint"],
  ["GET", "/v1/waitpoints", "ListWaitpoints"],
  ["GET", "/v1/waitpoints/w1", "GetWaitpoint"],
  ["POST", "/v1/waitpoints/wpt_abc_def:complete", "CompleteWaitpoint"],
  ["POST", "/v1/waitpoints/w1:resolve", "ResolveWaitpoint"],
  ["POST", "/v1/schedules", "CreateSchedule"],
  ["GET", "/v1/schedules", "ListSchedules"],
  ["GET", "/v1/schedules/s1", "GetSchedule"],
  ["PATCH", "/v1/schedules/s1", "UpdateSchedule"],
  ["DELETE", "/v1/schedules/s1", "DeleteSchedule"],
  ["GET", "/v1/security/audit", "ListSecurityAudit"],
  ["POST", "/v1/pdf/generate", "CreatePdfJob"],
  ["POST", "/v1/jobs/parse", "CreateJobPostingParseJob"],
  ["POST", "/v1/video/transcript", "CreateTranscriptJob"],
  ["POST", "/v1/youtube/transcript", "CreateTranscriptJob"],
  ["GET", "/jobs/42", "GetJob"],
  ["GET", "/v1/jobs/42", "GetJob"],
  ["GET", "/v1/pdf/42", "DownloadPdf"],
  ["GET", "/api/v1/pdf/42", "DownloadPdf"],
  ["POST", "/v1/tasks/post", "PostTask"],
  ["POST", "/v1/tasks/claim", "ClaimTask"],
  ["POST", "/v1/tasks/subscribe", "SubscribeTasks"],
  ["POST", "/v1/tasks/broadcast", "BroadcastTask"],
  ["POST", "/v1/tasks/claim-and-ack", "ClaimAndAckTask"],
  ["POST", "/v1/tasks/create-claimable-session", "CreateClaimableSession"],
  ["POST", "/v1/tasks/post-with-result", "PostTaskWithResult"],
  ["POST", "/v1/tasks/0b6c5a1e-0000-4000-8000-000000000001/result", "PostTaskResult"],
  ["GET", "/v1/tasks/0b6c5a1e-0000-4000-8000-000000000001/result", "GetTaskResult"],
  ["GET", "/v1/channels/c1/metrics", "GetChannelMetrics"],
  ["GET", "/v1/observability/metrics", "GetObservabilityMetrics"],
  ["GET", "/account/usage", "GetAccountUsage"],
];

describe("REST routes derived from google.api.http", () => {
  for (const [method, path, rpc] of expected) {
    it(`routes ${method} ${path} to ${rpc}`, () => {
      const match = routes.match(method, path);
      expect(match.kind).toBe("route");
      if (match.kind === "route") expect(match.route.method.name).toBe(rpc);
    });
  }

  it("has no route the list above does not name", () => {
    expect(routes.routes).toHaveLength(expected.length);
  });

  it("binds percent-decoded path variables", () => {
    const match = routes.match("DELETE", "/v1/channels/c%2F1/members/ak_1");
    expect(match).toMatchObject({ kind: "route", pathParams: { identifier: "c/1", key_id: "ak_1" } });
  });

  it("reports the allowed methods for a known path with the wrong method", () => {
    expect(routes.match("PUT", "/v1/channels/c1")).toEqual({ kind: "wrong_method", allowed: expect.arrayContaining(["GET", "PATCH", "DELETE"]) });
  });

  it("tells a collection's :verb from the routes of its items and from the collection itself", () => {
    expect(routes.match("POST", "/v1/messages:batchAck")).toMatchObject({ kind: "route", pathParams: {} });
    expect(routes.match("POST", "/v1/messages:unknownVerb").kind).toBe("none");
    expect(routes.match("DELETE", "/v1/messages:batchAck").kind).toBe("wrong_method");
    expect(routes.match("POST", "/v1/channels/c1/messages:batchCreate")).toMatchObject({ kind: "route", pathParams: { identifier: "c1" } });
    expect(routes.match("POST", "/v1/channels/c1/messages")).toMatchObject({ kind: "route", route: { method: { name: "CreateMessage" } } });
  });

  it("matches nothing for an unknown path", () => {
    expect(routes.match("GET", "/v2/channels").kind).toBe("none");
  });
});

describe("method rules from the proto", () => {
  it("reads success statuses from (agentbus.v1.rules)", () => {
    const status = (svc: (typeof services)[number], name: string) => rulesOf(svc.methods.find((m) => m.name === name)!).successStatus;
    expect(status(KeyService, "CreateKey")).toBe(201);
    expect(status(ChannelService, "DeleteChannel")).toBe(204);
    expect(status(ChannelService, "CreateAccessRequest")).toBe(202);
    expect(status(JobService, "CreatePdfJob")).toBe(202);
    expect(status(ChannelService, "GetChannel")).toBe(200);
  });

  it("protects every method with an API key unless the proto says otherwise", () => {
    const open = services.flatMap((s) => s.methods).filter((m) => rulesOf(m).auth !== "api_key").map((m) => `${m.name}:${rulesOf(m).auth}`);
    expect(open.sort()).toEqual(["CompleteWaitpoint:none", "CreateKey:admin_token", "CreateKey:none", "GetPublicMinting:admin_token", "ListAuditEvents:admin_token", "PauseChannel:admin_token", "ResumeChannel:admin_token", "SetKeyQuotas:admin_token", "SetPublicMinting:admin_token"]);
  });

  it("treats reads as side-effect free and everything else as a mutation", () => {
    expect(rulesOf(KeyService.methods.find((m) => m.name === "GetCurrentKey")!).mutates).toBe(false);
    expect(rulesOf(KeyService.methods.find((m) => m.name === "RevokeCurrentKey")!).mutates).toBe(true);
  });
});
