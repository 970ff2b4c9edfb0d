/** AdminService handlers: operator actions, behind X-Admin-Token (checked by the call pipeline). */
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import type { SecurityAudit } from "../domain/audit.js";
import type { ChannelAdmin } from "../domain/channel-admin.js";
import type { Keys } from "../domain/keys.js";
import type { PublicMinting } from "../domain/minting.js";
import { ApiError } from "../model/errors.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { renderIssuedKey, renderQuotas } from "./key-service.js";
import type { Quotas } from "../domain/quotas.js";
import { renderChannel } from "./render-channel.js";
import { renderAuditPage } from "./security-service.js";

export function adminService(admin: ChannelAdmin, keys: Keys, minting: PublicMinting, audit: SecurityAudit, quotas: Quotas): ServiceEntry {
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
    async setKeyQuotas(request) {
      const given = { stored_bytes: request.storedBytes, live_messages: request.liveMessages, channels: request.channels };
      const overrides = Object.fromEntries(Object.entries(given).flatMap(([name, value]) => (value === undefined ? [] : [[name, Number(value)]])));
      const report = await quotas.setLimits(request.keyId, overrides);
      if (report === undefined) throw new ApiError("key_not_found", `No key has the id '${request.keyId.slice(0, 64)}'`);
      return renderQuotas(report);
    },
    async listAuditEvents(request) {
      return renderAuditPage(await audit.listAll(request.ownerId, { cursor: request.cursor, limit: request.limit }));
    },
  });
}
