/**
 * A channel as the rules see it, and who may do what with it
 * (docs/decisions.md#channel-access, #owner-only).
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { JsonValue } from "../model/json.js";
import type { Micros } from "../model/time.js";

export type ChannelMode = "broadcast" | "claimable";
export type ChannelAccess = "open" | "restricted";

export interface ChannelRecord {
  id: string;
  name: string;
  mode: ChannelMode;
  access: ChannelAccess;
  discoverable: boolean;
  description: string;
  ownerId: string;
  createdByKeyId: string;
  metadataSchema: { [key: string]: JsonValue };
  pinnedMessage: string | null;
  webhookUrl: string | null;
  /** Write-only: never rendered. */
  webhookSecret: string | null;
  ttlSeconds: number;
  retentionDays: number;
  maxMessages: number | null;
  maxWritesPerMinute: number | null;
  paused: boolean;
  createdAt: Micros;
  updatedAt: Micros;
}

/** A channel looked up on behalf of a caller, with the caller's standing in it. */
export interface ChannelView extends ChannelRecord {
  /** The caller owns the channel or has a member row. */
  callerIsMember: boolean;
}

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
