/**
 * Operator actions on channels (docs/decisions.md#pause): pause and resume any channel,
 * whoever owns it. Authorised by the admin token in the call pipeline.
 */
import type { ChannelResource } from "./channels.js";
import { ApiError } from "../model/errors.js";
import type { Db } from "../store/db.js";
import { setChannelPaused } from "../store/channel-admin.js";
import { loadChannelResource } from "../store/channels.js";

export class ChannelAdmin {
  constructor(private readonly db: Db) {}

  /** Paused: createMessage answers 503 channel_paused; reads, claims and acks go on. Idempotent. */
  pause(identifier: string): Promise<ChannelResource> {
    return this.setPaused(identifier, true);
  }

  /** Writes are accepted again. Idempotent. */
  resume(identifier: string): Promise<ChannelResource> {
    return this.setPaused(identifier, false);
  }

  private setPaused(identifier: string, paused: boolean): Promise<ChannelResource> {
    return this.db.transaction(async () => {
      const id = await setChannelPaused(this.db, identifier, paused);
      const channel = id === undefined ? undefined : await loadChannelResource(this.db, id);
      if (!channel) throw new ApiError("channel_not_found", `Channel '${identifier}' not found`);
      return channel;
    });
  }
}
