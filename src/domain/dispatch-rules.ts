/**
 * The rules of groups, priorities, dispatch and per-message expiry
 * (docs/decisions.md#message-groups, #priorities, #dispatch): validation of
 * what a poster or a channel's owner may set.
 */
import { ApiError } from "../model/errors.js";

import type { ChannelDispatch, ChannelRecord } from "../model/channels.js";

export type Dispatch = ChannelDispatch;

export const GROUP_KEY_MAX_CHARS = 128;
export const GROUP_CONCURRENCY = { min: 1, max: 1000 } as const;
export const PRIORITY = { min: 1, max: 5, default: 3 } as const;
export const PRIORITY_AGING_SECONDS = { min: 1, max: 86400 } as const;
/** Limits a channel or a message may name. */
export const MAX_LIMIT_NAMES = 16;

const integerIn = (value: number, range: { min: number; max: number }): boolean => Number.isInteger(value) && value >= range.min && value <= range.max;

/** 1..128 characters (code points), not only whitespace; undefined: no group. */
export function validateGroupKey(value: string | undefined): string | null {
  if (value === undefined) return null;
  const chars = [...value].length;
  if (chars < 1 || chars > GROUP_KEY_MAX_CHARS || value.trim() === "") {
    throw new ApiError("invalid_group_key", `'group_key' must be 1 to ${GROUP_KEY_MAX_CHARS} characters, not only whitespace (got ${chars})`, { details: { field: "group_key" } });
  }
  return value;
}

export function validatePriority(value: number | undefined, fallback: number = PRIORITY.default): number {
  if (value === undefined) return fallback;
  if (!integerIn(value, PRIORITY)) throw new ApiError("invalid_priority", `'priority' must be an integer from ${PRIORITY.min} to ${PRIORITY.max}`, { details: { field: "priority" } });
  return value;
}

export function validateGroupConcurrency(value: number | undefined): number | null {
  if (value === undefined) return null;
  if (!integerIn(value, GROUP_CONCURRENCY)) {
    throw new ApiError("invalid_group_concurrency", `'group_concurrency' must be an integer from ${GROUP_CONCURRENCY.min} to ${GROUP_CONCURRENCY.max}`, { details: { field: "group_concurrency" } });
  }
  return value;
}

export function validatePriorityAging(value: number | undefined): number | null {
  if (value === undefined) return null;
  if (!integerIn(value, PRIORITY_AGING_SECONDS)) {
    throw new ApiError("invalid_priority_aging_seconds", `'priority_aging_seconds' must be an integer from ${PRIORITY_AGING_SECONDS.min} to ${PRIORITY_AGING_SECONDS.max}`, {
      details: { field: "priority_aging_seconds" },
    });
  }
  return value;
}

export function validateDispatch(value: string | undefined): Dispatch {
  if (value === undefined || value === "fifo") return "fifo";
  if (value === "fair") return "fair";
  throw new ApiError("invalid_dispatch", `'dispatch' must be "fifo" or "fair"`, { details: { field: "dispatch" } });
}

/** Distinct, non-empty names, at most MAX_LIMIT_NAMES; whether each exists is the use case's to check. */
export function validateLimitNames(names: readonly string[] | undefined): string[] {
  if (names === undefined) return [];
  const distinct = [...new Set(names)];
  if (distinct.length > MAX_LIMIT_NAMES || distinct.some((n) => n.trim() === "")) {
    throw new ApiError("unknown_limit", `'limits' must name at most ${MAX_LIMIT_NAMES} limits, each by its non-empty name`, { details: { field: "limits" } });
  }
  return distinct;
}

/**
 * Whether the channel's receives go through the dispatch rules (groups,
 * fair turns, aging, limits) rather than the plain priority-then-oldest
 * statement: the rules cost a lock and more reading per receive.
 */
export const dispatchesByRule = (channel: ChannelRecord): boolean =>
  boundsDeliveries(channel) || channel.dispatch === "fair" || channel.priorityAgingSeconds !== null;

/** Group bounds or shared limits: only receives keep them, so claims by id are refused (receive_required). */
export const boundsDeliveries = (channel: ChannelRecord): boolean =>
  channel.groupConcurrency !== null || channel.limitIds.length > 0 || channel.limitedMessages;

/** Shared limits: a unit freed on another channel, or a rate window sliding on, wakes nobody here. */
export const sharesLimits = (channel: ChannelRecord): boolean => channel.limitIds.length > 0 || channel.limitedMessages;

/**
 * How long a receive waiting on a channel with shared limits sleeps at most
 * before it reads again (docs/decisions.md#shared-limits): what frees a
 * limit's room elsewhere announces itself only on its own channel.
 */
export const LIMITED_RECHECK_MS = 1000;

const unknownLimit = (name: string): ApiError =>
  new ApiError("unknown_limit", `No limit of yours is named '${name}'`, { details: { field: "limits", limit: name } });

/**
 * The ids of the limits `names` names, in order, from `find` (name → id of
 * the owner's limits among them); 422 unknown_limit naming the first that is none.
 */
export async function limitIdsNamed(names: readonly string[], find: (names: readonly string[]) => Promise<Map<string, string>>): Promise<string[]> {
  if (names.length === 0) return [];
  const found = await find(names);
  const missing = names.find((n) => !found.has(n));
  if (missing !== undefined) throw unknownLimit(missing);
  return names.map((n) => found.get(n)!);
}

/** A message's own TTL: 1..the channel's; undefined: the channel's. */
export function validateMessageTtl(value: number | undefined, channelTtl: number): number {
  if (value === undefined) return channelTtl;
  if (!Number.isInteger(value) || value < 1 || value > channelTtl) {
    throw new ApiError("invalid_ttl_seconds", `'ttl_seconds' must be an integer from 1 to the channel's ttl_seconds (${channelTtl})`, {
      details: { field: "ttl_seconds", max: channelTtl },
      suggestion: `Use 1 to ${channelTtl}, or leave ttl_seconds out for the channel's.`,
    });
  }
  return value;
}
