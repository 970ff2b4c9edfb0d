/** What the channel use cases need from storage. */
import type { Caller } from "../model/caller.js";
import type {
  ChannelChanges,
  ChannelLookup,
  ChannelResource,
  ChannelSummary,
  ChannelView,
  LockedChannel,
  NewChannel,
} from "../model/channels.js";
import type { Micros } from "../model/time.js";

/** What an update writes: changed columns, and the new related channel ids (undefined: the links stay). */
export interface ChannelUpdate {
  changes: ChannelChanges;
  relatedIds: string[] | undefined;
}

export interface ChannelStore {
  /**
   * By id, else by alias, else by a name the caller's key owns (docs/decisions.md#channel-names), with
   * the caller's membership; the ids when the name is the key's for several channels; undefined when none.
   */
  findView(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelView>>;
  /** findView plus aliases and related channels. */
  findResource(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelResource & ChannelView>>;
  /** For each ref (channel id or alias), the channel id it names, or null; in input order. */
  resolveRefs(refs: readonly string[]): Promise<Array<string | null>>;
  /** Creates the channel with `owner` as owner and first member, linked to relatedIds; returns it as GET renders it. */
  /**
   * Creates the channel, unless its owner already owns `maxOwned` channels
   * (null: no limit; counted where creates are serialised, so concurrent
   * ones cannot overshoot).
   */
  create(channel: NewChannel, relatedIds: readonly string[], owner: Caller, maxOwned?: number | null): Promise<ChannelResource | "quota_exceeded" | undefined>;
  /** Discoverable channels, newest first, created before `before` when given. */
  discover(callerKeyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]>;
  /** The channels the key created or is a member of, created before `before`, newest first. */
  listForKey(keyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]>;
  /**
   * Locks the channel, asks `plan` what to write given its current state,
   * writes that (nothing when nothing changes) and returns the channel, in
   * one transaction; undefined when the channel is gone.
   */
  update(id: string, plan: (current: LockedChannel) => ChannelUpdate): Promise<ChannelResource | undefined>;
  /** Deletes the channel and everything that belongs to it. */
  delete(id: string): Promise<void>;
  /**
   * Adds an alias (one global namespace; aliasKey is its normal form, unique)
   * and returns the channel; "conflict" when another channel holds it or a
   * look-alike; undefined when the channel is gone. Adding one it has is fine.
   */
  addAlias(id: string, alias: string, aliasKey: string): Promise<ChannelResource | "conflict" | undefined>;
  /** Takes the alias off the channel; "not_held" when the channel does not hold it, undefined when the channel is gone. */
  removeAlias(id: string, alias: string): Promise<ChannelResource | "not_held" | undefined>;
  /** Sets paused on the channel named by id or alias (an operator has no key, so no name) and returns it; undefined when none. */
  setPaused(identifier: string, paused: boolean): Promise<ChannelResource | undefined>;
  /** The key's shared limits among `names`, name → id (docs/decisions.md#shared-limits). */
  limitIds(ownerKeyId: string, names: readonly string[]): Promise<Map<string, string>>;
}
