/**
 * A channel as the rules see it, and who may do what with it
 * (docs/decisions.md#channel-access, #owner-only).
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { isAmbiguous, type ChannelLookup, type ChannelRecord, type ChannelView } from "../model/channels.js";

export const isOwner = (channel: ChannelRecord, caller: Caller): boolean => channel.createdByKeyId === caller.keyId;

/** Open: any key. Restricted: the owner and members only. */
export function canUse(channel: ChannelView, caller: Caller): boolean {
  return channel.access === "open" || isOwner(channel, caller) || channel.callerIsMember;
}

export function assertCanUse(channel: ChannelView, caller: Caller): void {
  if (!canUse(channel, caller)) throw new ApiError("channel_access_denied");
}

/** Owner-only operations (docs/decisions.md#owner-only); a stranger to a restricted channel learns no more than channel_access_denied. */
export function assertOwner(channel: ChannelView, caller: Caller): void {
  assertCanUse(channel, caller);
  if (!isOwner(channel, caller)) throw new ApiError("forbidden");
}

/**
 * The channel a `{identifier}` named (docs/decisions.md#channel-names): 404 channel_not_found when
 * none; 409 ambiguous_channel_name, listing the candidates' ids, when it was a bare name that
 * several channels of the caller's key carry.
 */
export function namedChannel<T extends ChannelView>(found: ChannelLookup<T>, identifier: string): T {
  if (found === undefined) throw new ApiError("channel_not_found", `Channel '${identifier}' not found`);
  if (isAmbiguous(found)) {
    throw new ApiError("ambiguous_channel_name", `Several of your channels are named '${identifier}'; name one by its id or an alias`, {
      details: { channel_ids: found.ambiguousIds },
    });
  }
  return found;
}
