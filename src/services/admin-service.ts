/** AdminService handlers: operator actions, behind X-Admin-Token (checked by the call pipeline). */
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import type { SecurityAudit } from "../domain/audit.js";
import type { ChannelAdmin } from "../domain/channel-admin.js";
import type { Keys } from "../domain/keys.js";
import type { PublicMinting } from "../domain/minting.js";
import { ApiError } from "../model/errors.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { renderIssuedKey } from "./key-service.js";
import { renderChannel } from "./render-channel.js";
import { renderAuditPage } from "./security-service.js";

export function adminService(admin: ChannelAdmin, keys: Keys, minting: PublicMinting, audit: SecurityAudit): ServiceEntry {
  return serviceEntry(AdminService, {
    async pauseChannel(request) {
      return renderChannel(await admin.pause(request.identifier));
    },
    async resumeChannel(request) {
      return renderChannel(await admin.resume(request.identifier));
    },
    async createKey(request) {
      return renderIssuedKey(await keys.issue(request.agentLabel, { via: "admin", scopes: request.scopes }));
    },
    async setPublicMinting(request) {
      if (request.enabled === undefined) {
        throw new ApiError("missing_field", "'enabled' is required: true opens POST /v1/keys, false closes it", { details: { field: "enabled" } });
      }
      return { publicMintingEnabled: await minting.set(request.enabled) };
    },
    async getPublicMinting() {
      return { publicMintingEnabled: await minting.enabled() };
    },
    async listAuditEvents(request) {
      return renderAuditPage(await audit.listAll(request.ownerId, { cursor: request.cursor, limit: request.limit }));
    },
  });
}
