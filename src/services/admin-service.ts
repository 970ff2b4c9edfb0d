/** AdminService handlers: operator actions, behind X-Admin-Token (checked by the call pipeline). */
import { AdminService } from "../../gen/agentbus/v1/admin_service_pb.js";
import type { ChannelAdmin } from "../domain/channel-admin.js";
import { serviceEntry, type ServiceEntry } from "../protocol/service-entry.js";
import { renderChannel } from "./render-channel.js";

export function adminService(admin: ChannelAdmin): ServiceEntry {
  return serviceEntry(AdminService, {
    async pauseChannel(request) {
      return renderChannel(await admin.pause(request.identifier));
    },
    async resumeChannel(request) {
      return renderChannel(await admin.resume(request.identifier));
    },
  });
}
