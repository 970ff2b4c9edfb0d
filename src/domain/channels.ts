/**
 * Channels: the use cases (create, read, discover, change, delete, aliases;
 * docs/decisions.md#channel-fields, #owner-only, #list-pages) and discovery's
 * pages. The field checks are channel-rules.ts, an update's patch
 * channel-update.ts; both are re-exported here, where their users import them.
 */
import type { Caller } from "../model/caller.js";
import { assertCanUse, assertOwner, namedChannel } from "./channel.js";
import type { ChannelResource, ChannelSummary, ChannelView } from "../model/channels.js";
import { nameKey } from "./labels.js";
import { ApiError } from "../model/errors.js";
import { quotaExceeded } from "./quotas.js";
import { limitIdsNamed } from "./dispatch-rules.js";
import { checkA2aMode } from "./a2a-rules.js";
import type { ChannelA2a } from "../model/channels.js";

/** What an A2A agent card is made of. */
export interface PublishedAgent {
  id: string;
  name: string;
  description: string;
  a2a: ChannelA2a;
}
import { formatTimestamp, parseTimestamp, type Micros } from "../model/time.js";
import type { ChannelStore } from "../ports/channels.js";
import { checkMetadataSchema, DISCOVERY_PAGE, validateAlias, validateCreateChannel, type ChannelDefaults, type CreateChannelInput } from "./channel-rules.js";
import { buildChannelPatch, changedColumns, sameSet, type ChannelUpdateInput } from "./channel-update.js";

export * from "./channel-rules.js";
export * from "./channel-update.js";

// ---------------------------------------------------------------------------
// Discovery

export interface DiscoveryQuery {
  cursor: string | undefined;
  limit: number | undefined;
}

/** docs/decisions.md#list-pages: an out-of-range numeric limit is clamped into 1..100; default 50. */
/** A page of channel summaries, newest first; the cursor is the last one's created_at. */
async function summaryPage(query: DiscoveryQuery, fetch: (before: Micros | undefined, limit: number) => Promise<ChannelSummary[]>): Promise<DiscoveryPage> {
  const limit = clampDiscoveryLimit(query.limit);
  const data = await fetch(parseDiscoveryCursor(query.cursor), limit);
  const last = data.at(-1);
  return { data, limit, nextCursor: data.length === limit && last ? formatTimestamp(last.createdAt) : null };
}

export function clampDiscoveryLimit(limit: number | undefined): number {
  if (limit === undefined) return DISCOVERY_PAGE.default;
  return Math.min(DISCOVERY_PAGE.max, Math.max(DISCOVERY_PAGE.min, Math.trunc(limit)));
}

/** The discovery cursor: a next_cursor (any RFC 3339 timestamp); "" or absent = the newest page; else 422 invalid_cursor. */
export function parseDiscoveryCursor(cursor: string | undefined): Micros | undefined {
  if (cursor === undefined || cursor === "") return undefined;
  const micros = parseTimestamp(cursor);
  if (micros === undefined) {
    throw new ApiError("invalid_cursor", `'cursor' must be a timestamp such as 2026-11-21T03:14:39.743512Z, not ${JSON.stringify(cursor)}`, {
      details: { field: "cursor" },
      suggestion: "Pass the next_cursor of the previous page unchanged, or omit cursor to start from the newest channels.",
    });
  }
  return micros;
}

// ---------------------------------------------------------------------------
// Resources

export interface DiscoveryPage {
  data: ChannelSummary[];
  limit: number;
  nextCursor: string | null;
}

// ---------------------------------------------------------------------------
// Use cases

export class Channels {
  constructor(
    private readonly store: ChannelStore,
    private readonly defaults: ChannelDefaults,
    /** The channel quota per key (docs/decisions.md#quotas); none by default. */
    private readonly quotas?: { channelLimit(caller: Caller): Promise<number | null> },
  ) {}

  /** Creates a channel owned by the caller's key, which becomes its first member. */
  async create(caller: Caller, input: CreateChannelInput): Promise<ChannelResource> {
    const channel = validateCreateChannel(input, this.defaults);
    await checkMetadataSchema(caller.keyId, channel.metadataSchema);
    const relatedIds = await this.resolveRelated(channel.relatedChannels);
    if (input.deadLetterChannel !== undefined) channel.deadLetterChannelId = await this.resolveDeadLetterChannel(caller, input.deadLetterChannel, undefined);
    channel.limitIds = await limitIdsNamed(channel.limits, (names) => this.store.limitIds(caller.keyId, names));
    const limit = (await this.quotas?.channelLimit(caller)) ?? null;
    const created = await this.store.create(channel, relatedIds, caller, limit);
    if (created === "quota_exceeded") throw quotaExceeded("channels", limit!, limit!, 1);
    // Written and read in one transaction: a miss would mean it was deleted concurrently.
    if (!created) throw channelNotFound(channel.name);
    return created;
  }

  /** Any key for an open channel; the owner and members for a restricted one. */
  async get(caller: Caller, identifier: string): Promise<ChannelResource> {
    const found = namedChannel(await this.store.findResource(identifier, caller.keyId), identifier);
    assertCanUse(found, caller);
    return found;
  }

  /**
   * A claimable channel its owner published as an A2A agent, by id, for
   * anyone: its card is public (docs/decisions.md#a2a). Undefined for any
   * other id, so the answer tells nothing of channels that are not agents.
   */
  async publishedAgent(id: string): Promise<PublishedAgent | undefined> {
    const found = await this.store.findView(id, "");
    if (found === undefined || found.id !== id || found.mode !== "claimable" || found.a2a?.enabled !== true) return undefined;
    return { id: found.id, name: found.name, description: found.description, a2a: found.a2a };
  }

  /** Discoverable channels of any access, newest first, paged by created_at (unique). */
  async discover(caller: Caller, query: DiscoveryQuery): Promise<DiscoveryPage> {
    return summaryPage(query, (before, limit) => this.store.discover(caller.keyId, before, limit));
  }

  /** The caller's key's channels: created by it or joined, newest first, in pages like discovery's. */
  async listMine(caller: Caller, query: DiscoveryQuery): Promise<DiscoveryPage> {
    return summaryPage(query, (before, limit) => this.store.listForKey(caller.keyId, before, limit));
  }

  /** Owner only (docs/decisions.md#owner-only). Applies the patch; updated_at moves only when something changed. */
  async update(caller: Caller, identifier: string, input: ChannelUpdateInput, mask: readonly string[] | undefined): Promise<ChannelResource> {
    const patch = buildChannelPatch(input, mask, this.defaults);
    await checkMetadataSchema(caller.keyId, patch.metadataSchema);
    const view = await this.ownedChannel(caller, identifier);
    const relatedIds =
      patch.relatedChannels === undefined ? undefined : (await this.resolveRelated(patch.relatedChannels)).filter((id) => id !== view.id);
    const deadLetterChannelId =
      patch.deadLetterChannel === undefined ? undefined : patch.deadLetterChannel === null ? null : await this.resolveDeadLetterChannel(caller, patch.deadLetterChannel, view.id);
    const limitIds = patch.limits === undefined ? undefined : await limitIdsNamed(patch.limits, (names) => this.store.limitIds(caller.keyId, names));
    const updated = await this.store.update(view.id, (current) => {
      checkA2aMode(
        patch.a2a === undefined ? current.record.a2a : patch.a2a,
        patch.mode ?? current.record.mode,
        patch.a2aForward === undefined ? current.record.a2aForward : patch.a2aForward,
      );
      return {
      changes: changedColumns(current.record, patch, deadLetterChannelId, limitIds),
      relatedIds: relatedIds !== undefined && !sameSet(relatedIds, current.relatedIds) ? relatedIds : undefined,
      };
    });
    if (!updated) throw channelNotFound(identifier);
    return updated;
  }

  /** Owner only. Messages, history, members, links and aliases go with it; the aliases are free again. */
  async delete(caller: Caller, identifier: string): Promise<void> {
    const view = await this.ownedChannel(caller, identifier);
    await this.store.delete(view.id);
  }

  /**
   * Owner only. One global namespace: an alias of another channel → 409
   * alias_conflict; an alias the channel already has → 201 again (idempotent,
   * so a retried request does not fail).
   */
  async addAlias(caller: Caller, identifier: string, alias: string | undefined): Promise<ChannelResource> {
    const valid = validateAlias(alias);
    const view = await this.ownedChannel(caller, identifier);
    const outcome = await this.store.addAlias(view.id, valid, nameKey(valid));
    if (outcome === "conflict") {
      throw new ApiError("alias_conflict", `The alias '${valid}', or one that looks the same (case, spacing, full-width forms), is already taken`, { details: { alias: valid } });
    }
    // The channel was deleted concurrently.
    if (!outcome) throw channelNotFound(view.id);
    return outcome;
  }

  /** Owner only. The alias must be one the channel holds, exactly as it holds it. */
  async removeAlias(caller: Caller, identifier: string, alias: string): Promise<ChannelResource> {
    const view = await this.ownedChannel(caller, identifier);
    const outcome = await this.store.removeAlias(view.id, alias);
    if (outcome === "not_held") {
      throw new ApiError("alias_not_found", `The channel holds no alias '${alias}'`, { details: { alias } });
    }
    if (!outcome) throw channelNotFound(view.id);
    return outcome;
  }

  private async ownedChannel(caller: Caller, identifier: string): Promise<ChannelView> {
    const view = namedChannel(await this.store.findView(identifier, caller.keyId), identifier);
    assertOwner(view, caller);
    return view;
  }

  /**
   * The dead-letter channel's id (docs/decisions.md#dead-letters): resolved like
   * an {identifier}, it must be a channel the caller's key owns and not the
   * channel itself, else 422 invalid_dead_letter_channel. Unknown channels and
   * other keys' channels get the same answer, so the check reveals nothing.
   */
  private async resolveDeadLetterChannel(caller: Caller, identifier: string, selfId: string | undefined): Promise<string> {
    const found = await this.store.findView(identifier, caller.keyId);
    const invalid = (why: string) =>
      new ApiError("invalid_dead_letter_channel", `'dead_letter_channel' ${why}`, { details: { field: "dead_letter_channel", channel: identifier } });
    if (found === undefined || found.createdByKeyId !== caller.keyId) throw invalid("must name a channel your key owns");
    if (found.id === selfId) throw invalid("cannot be the channel itself");
    return found.id;
  }

  /** Channel ids for ids or aliases, in order, de-duplicated; 404 channel_not_found naming the first unknown one. */
  private async resolveRelated(refs: readonly string[]): Promise<string[]> {
    if (refs.length === 0) return [];
    const resolved = await this.store.resolveRefs(refs);
    const ids: string[] = [];
    refs.forEach((ref, i) => {
      const id = resolved[i];
      if (id === undefined || id === null) {
        throw new ApiError("channel_not_found", `Related channel '${ref}' not found`, { details: { field: "related_channels", channel: ref } });
      }
      if (!ids.includes(id)) ids.push(id);
    });
    return ids;
  }
}

const channelNotFound = (identifier: string) => new ApiError("channel_not_found", `Channel '${identifier}' not found`);
