/**
 * Operator actions on channels (docs/decisions.md#pause): pause and resume any channel,
 * whoever owns it. Authorised by the admin token in the call pipeline.
 */
import type { ChannelResource } from "../model/channels.js";
import { ApiError } from "../model/errors.js";
import type { ChannelStore } from "../ports/channels.js";
import type { SecurityAudit } from "./audit.js";

export class ChannelAdmin {
  constructor(
    private readonly channels: ChannelStore,
    private readonly audit: SecurityAudit,
  ) {}

  /** Paused: createMessage answers 503 channel_paused; reads, claims and acks go on. Idempotent. */
  pause(identifier: string): Promise<ChannelResource> {
    return this.setPaused(identifier, true);
  }

  /** Writes are accepted again. Idempotent. */
  resume(identifier: string): Promise<ChannelResource> {
    return this.setPaused(identifier, false);
  }

  private async setPaused(identifier: string, paused: boolean): Promise<ChannelResource> {
    // Recorded on every call, a repeated pause too: the operator did act.
    const channel = await this.audit.change(
      () => this.channels.setPaused(identifier, paused),
      (found) =>
        found
          ? [{ kind: paused ? "channel.paused" : "channel.resumed", ownerKeyId: found.createdByKeyId, ownerId: found.ownerId, actorKeyId: null, subject: found.id, details: { channel_name: found.name } }]
          : [],
    );
    if (!channel) throw new ApiError("channel_not_found", `Channel '${identifier}' not found`);
    return channel;
  }
}
