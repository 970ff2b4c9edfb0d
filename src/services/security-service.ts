/** SecurityService handlers, and the rendering of audit events the admin listing shares. */
import { SecurityService } from "../../gen/agentbus/v1/security_service_pb.js";
import type { AuditPage, SecurityAudit } from "../domain/audit.js";
import type { AuditEventRecord } from "../model/audit.js";
import { toProtoTimestamp } from "../model/time.js";
import { callerOf } from "../protocol/context.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";

const renderAuditEvent = (e: AuditEventRecord) => ({
  id: e.id,
  occurredAt: toProtoTimestamp(e.occurredAt),
  kind: e.kind,
  ownerId: e.ownerId ?? "",
  ownerKeyId: e.ownerKeyId ?? "",
  actorKeyId: e.actorKeyId ?? "",
  subject: e.subject,
  details: e.details,
});

export const renderAuditPage = (page: AuditPage) => ({
  data: page.data.map(renderAuditEvent),
  limit: page.limit,
  nextCursor: page.nextCursor ?? undefined,
});

export function securityService(audit: SecurityAudit): ServiceEntry {
  return serviceEntry(SecurityService, {
    async listSecurityAudit(request, ctx) {
      return renderAuditPage(await audit.listForOwner(callerOf(ctx), { cursor: request.cursor, limit: request.limit }));
    },
  });
}
