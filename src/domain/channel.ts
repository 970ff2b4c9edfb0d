/**
 * A channel as the rules see it, and who may do what with it
 * (docs/decisions.md#channel-access, #owner-only).
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { type ChannelLookup, type ChannelRecord, type ChannelView } from "../model/channels.js";

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

/** The channel a `{identifier}` named (docs/decisions.md#channel-names), or 404 channel_not_found. */
export function namedChannel<T extends ChannelView>(found: ChannelLookup<T>, identifier: string): T {
  if (found === undefined) throw new ApiError("channel_not_found", `Channel '${identifier}' not found`);
  return found;
}
