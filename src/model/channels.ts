/** Channels as stored and read back: the record, the caller's view of it, and the shapes of create, update and discovery. */
import type { JsonObject, JsonValue } from "./json.js";
import type { Micros } from "./time.js";

export type ChannelMode = "broadcast" | "claimable";
export type ChannelAccess = "open" | "restricted";
/** Order of open work of equal priority (docs/decisions.md#dispatch). */
export type ChannelDispatch = "fifo" | "fair";

/** Groups, dispatch, aging and limits of a claimable channel (docs/decisions.md#message-groups). */
export interface DispatchSettings {
  /** At most this many messages of one group in flight; null = unbounded. */
  groupConcurrency: number | null;
  dispatch: ChannelDispatch;
  /** One priority level more urgent per this many seconds waited; null = no aging. */
  priorityAgingSeconds: number | null;
  /** The owner's shared limits every delivered message holds (ids). */
  limitIds: string[];
}

/** A skill an A2A agent card lists (docs/decisions.md#a2a). */
export type A2aSkill = {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples: string[];
};

/** A claimable channel published as an A2A agent (docs/decisions.md#a2a); name and description default to the channel's. */
export type ChannelA2a = {
  enabled: boolean;
  name: string | null;
  description: string | null;
  skills: A2aSkill[];
};

/**
 * A claimable channel's work forwarded to a remote A2A agent (docs/decisions.md#a2a-forward): the agent's URL
 * and a header sent with every request to it, whose value is write-only.
 */
export type ChannelA2aForward = {
  url: string;
  authHeader: { name: string; value: string } | null;
};

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
  /** How often a message may be delivered; null = unbounded (docs/decisions.md#dead-letters). */
  maxDeliveries: number | null;
  /** Where messages past maxDeliveries go; null = archived to history. */
  deadLetterChannelId: string | null;
  paused: boolean;
  createdAt: Micros;
  updatedAt: Micros;
  groupConcurrency: number | null;
  dispatch: ChannelDispatch;
  priorityAgingSeconds: number | null;
  /** The owner's shared limits every delivered message holds: ids, and their names by name. */
  limitIds: string[];
  limits: string[];
  /** A message of the channel named limits of its own: its receives check limits. */
  limitedMessages: boolean;
  /** Published as an A2A agent; null: never set. */
  a2a: ChannelA2a | null;
  /** Its work forwarded to a remote A2A agent; null: none. */
  a2aForward: ChannelA2aForward | null;
}

/** A channel looked up on behalf of a caller, with the caller's standing in it. */
export interface ChannelView extends ChannelRecord {
  /** The caller owns the channel or has a member row. */
  callerIsMember: boolean;
}

/**
 * What a `{identifier}` names for a caller: one channel or none. A bare name several of the
 * caller's channels carry names the newest of them (docs/decisions.md#channel-names).
 */
export type ChannelLookup<T extends ChannelView> = T | undefined;

/** A validated channel with every default applied; related channels still as given (ids or aliases). */
export interface NewChannel {
  name: string;
  mode: ChannelMode;
  access: ChannelAccess;
  discoverable: boolean;
  description: string;
  metadataSchema: JsonObject;
  pinnedMessage: string | null;
  webhookUrl: string | null;
  webhookSecret: string | null;
  relatedChannels: string[];
  ttlSeconds: number;
  retentionDays: number;
  maxMessages: number | null;
  maxWritesPerMinute: number | null;
  maxDeliveries: number | null;
  /** Resolved by the use case from the dead_letter_channel identifier (validation leaves it null). */
  deadLetterChannelId: string | null;
  groupConcurrency: number | null;
  dispatch: ChannelDispatch;
  priorityAgingSeconds: number | null;
  /** Limit names as given; the use case resolves them to limitIds. */
  limits: string[];
  limitIds: string[];
  a2a: ChannelA2a | null;
  a2aForward: ChannelA2aForward | null;
}

/** What an update changes; a key that is present is applied (null = clear). */
export interface ChannelPatch {
  name?: string;
  mode?: ChannelMode;
  access?: ChannelAccess;
  discoverable?: boolean;
  description?: string;
  metadataSchema?: JsonObject;
  pinnedMessage?: string | null;
  /** Still as given (ids or aliases); replaces the list. */
  relatedChannels?: string[];
  retentionDays?: number;
  maxMessages?: number | null;
  maxWritesPerMinute?: number | null;
  maxDeliveries?: number | null;
  /** Still as given (id, alias or the caller's name); null clears it. */
  deadLetterChannel?: string | null;
  paused?: boolean;
  webhookUrl?: string | null;
  webhookSecret?: string | null;
  groupConcurrency?: number | null;
  dispatch?: ChannelDispatch;
  priorityAgingSeconds?: number | null;
  /** Limit names; replaces the list. */
  limits?: string[];
  a2a?: ChannelA2a | null;
  a2aForward?: ChannelA2aForward | null;
}

/** Column changes of an update (only the keys present are written): the patch but the related channels, which have their own table. */
export type ChannelChanges = Omit<ChannelPatch, "relatedChannels" | "deadLetterChannel" | "limits"> & { deadLetterChannelId?: string | null; limitIds?: string[] };

/** A channel row locked for an update, with the ids of its related channels. */
export interface LockedChannel {
  record: ChannelRecord;
  relatedIds: string[];
}

export interface RelatedChannelRef {
  id: string;
  name: string;
  mode: ChannelMode;
}

/** A channel as GET renders it: the record plus aliases (sorted) and related channels (sorted by name). */
export interface ChannelResource extends ChannelRecord {
  aliases: string[];
  relatedChannels: RelatedChannelRef[];
}

export interface ChannelSummary {
  id: string;
  name: string;
  mode: ChannelMode;
  access: ChannelAccess;
  description: string;
  createdAt: Micros;
  isMember: boolean;
  /** The owner's agent label. */
  ownerId: string;
  /** Live messages, counted up to SUMMARY_COUNT_CAP. */
  liveMessages: number;
  /** Claimable channels: open work, counted up to SUMMARY_COUNT_CAP; broadcast: 0. */
  openMessages: number;
}

/** Where a channel list stops counting a channel's messages: a page of 100 channels costs at most 100 bounded index scans. */
export const SUMMARY_COUNT_CAP = 1000;
