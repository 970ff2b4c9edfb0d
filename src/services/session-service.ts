/** SessionService handlers: requests to domain calls, domain results to responses. */
import type { HandlerContext } from "@connectrpc/connect";
import { SessionService } from "../../gen/agentbus/v1/session_service_pb.js";
import type { Sessions } from "../domain/sessions.js";
import { ApiError } from "../model/errors.js";
import type { SessionMemberRecord, SessionView } from "../model/sessions.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

const renderSession = (s: SessionView) => ({
  id: s.id,
  name: s.name,
  state: s.state,
  version: s.version,
  ownerId: s.ownerId,
  ownerKeyId: s.ownerKeyId,
  ttlSeconds: s.ttlSeconds,
  createdAt: toProtoTimestamp(s.createdAt),
  updatedAt: toProtoTimestamp(s.updatedAt),
  expiresAt: toProtoTimestamp(s.expiresAt),
});

const renderMember = (m: SessionMemberRecord) => ({ sessionId: m.sessionId, keyId: m.keyId, addedAt: toProtoTimestamp(m.addedAt) });

/** The session answered, with its version as the ETag a later If-Match names. */
function answer(ctx: HandlerContext, session: SessionView) {
  ctx.responseHeader.set("ETag", `"${session.version}"`);
  return renderSession(session);
}

const IF_MATCH = /^(?:W\/)?"?([1-9][0-9]{0,9})"?$/;

/**
 * The version a change must find: If-Match (REST; `if-match` metadata over
 * gRPC) or expected_version; both may be given if they agree. `If-Match: *`
 * matches any current version (RFC 9110 §13.1.1), so it names none: the
 * change applies to whatever version the session is at (or, with
 * expected_version, to that one).
 */
function expectedVersion(ctx: HandlerContext, fromBody: number | undefined): number | undefined {
  const header = ctx.requestHeader.get("if-match");
  if (header === null || header.trim() === "" || header.trim() === "*") return fromBody;
  const match = IF_MATCH.exec(header.trim());
  if (!match) {
    throw new ApiError("invalid_field", "If-Match must name one version, e.g. If-Match: \"3\" (the session's version or ETag), or be *", {
      details: { field: "If-Match" },
    });
  }
  const version = Number(match[1]);
  if (fromBody !== undefined && fromBody !== version) {
    throw new ApiError("invalid_field", "If-Match and expected_version name different versions; send one of them", { details: { field: "expected_version" } });
  }
  return version;
}

export function sessionService(sessions: Sessions): ServiceEntry {
  return serviceEntry(SessionService, {
    async createSession(request, ctx) {
      return answer(ctx, await sessions.create(callerOf(ctx), { name: request.name, state: request.state, ttlSeconds: request.ttlSeconds }));
    },
    async listSessions(request, ctx) {
      const page = await sessions.list(callerOf(ctx), { cursor: request.cursor, limit: request.limit });
      return { data: page.data.map(renderSession), limit: page.limit, nextCursor: page.nextCursor ?? undefined };
    },
    async getSession(request, ctx) {
      return answer(ctx, await sessions.get(callerOf(ctx), request.id));
    },
    async updateSession(request, ctx) {
      const change = { state: request.state, expectedVersion: expectedVersion(ctx, request.expectedVersion), ttlSeconds: request.ttlSeconds };
      return answer(ctx, await sessions.update(callerOf(ctx), request.id, change));
    },
    async deleteSession(request, ctx) {
      await sessions.delete(callerOf(ctx), request.id);
      return {};
    },
    async listSessionMembers(request, ctx) {
      return { data: (await sessions.listMembers(callerOf(ctx), request.id)).map(renderMember) };
    },
    async addSessionMember(request, ctx) {
      return renderMember(await sessions.addMember(callerOf(ctx), request.id, request.keyId));
    },
    async removeSessionMember(request, ctx) {
      await sessions.removeMember(callerOf(ctx), request.id, request.keyId);
      return {};
    },
  });
}
