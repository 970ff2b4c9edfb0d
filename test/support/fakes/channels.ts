/** ChannelStore over Maps, with the member rows that decide a caller's standing (shared with FakeMembershipStore). */
import { randomUUID } from "node:crypto";
import type { Caller } from "../../../src/model/caller.js";
import {
  type ChannelLookup,
  type ChannelRecord,
  type ChannelResource,
  type ChannelSummary,
  type ChannelView,
  type LockedChannel,
  type NewChannel,
} from "../../../src/model/channels.js";
import type { MemberRecord } from "../../../src/model/membership.js";
import type { Micros } from "../../../src/model/time.js";
import type { ChannelStore, ChannelUpdate } from "../../../src/ports/channels.js";

export class FakeChannelStore implements ChannelStore {
  readonly channels = new Map<string, ChannelRecord>();
  /** alias → channel id */
  readonly aliases = new Map<string, string>();
  /** alias key (normal form) → alias */
  readonly aliasKeys = new Map<string, string>();
  readonly links = new Map<string, string[]>();
  /** `${channelId} ${keyId}` → member row */
  readonly members = new Map<string, MemberRecord>();
  private lastStamp = 0;

  /** Strictly increasing, like created_at under the create lock. */
  stamp(): Micros {
    this.lastStamp = Math.max(Date.now() * 1000, this.lastStamp + 1);
    return this.lastStamp;
  }

  isMember(channelId: string, keyId: string): boolean {
    return this.members.has(`${channelId} ${keyId}`);
  }

  private byIdentifier(identifier: string): ChannelRecord | undefined {
    return this.channels.get(identifier) ?? this.channels.get(this.aliases.get(identifier) ?? "");
  }

  /** By id, else alias, else the names of the caller's key's channels (docs/decisions.md#channel-names), like PgChannelStore. */
  private named(identifier: string, callerKeyId: string): ChannelRecord | undefined {
    const record = this.byIdentifier(identifier);
    if (record) return record;
    // The newest of the caller's channels of that name (created later, or the same instant and the larger id).
    return [...this.channels.values()]
      .filter((c) => c.createdByKeyId === callerKeyId && c.name === identifier)
      .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))[0];
  }

  private view(record: ChannelRecord, callerKeyId: string): ChannelView {
    return { ...record, callerIsMember: record.createdByKeyId === callerKeyId || this.isMember(record.id, callerKeyId) };
  }

  private resource(record: ChannelRecord): ChannelResource {
    const aliases = [...this.aliases].filter(([, id]) => id === record.id).map(([alias]) => alias).sort();
    const relatedChannels = (this.links.get(record.id) ?? [])
      .map((id) => this.channels.get(id))
      .filter((c): c is ChannelRecord => c !== undefined)
      .map((c) => ({ id: c.id, name: c.name, mode: c.mode }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { ...record, aliases, relatedChannels };
  }

  async findView(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelView>> {
    const found = this.named(identifier, callerKeyId);
    return found && this.view(found, callerKeyId);
  }

  async findResource(identifier: string, callerKeyId: string): Promise<ChannelLookup<ChannelResource & ChannelView>> {
    const found = this.named(identifier, callerKeyId);
    return found && { ...this.resource(found), callerIsMember: this.view(found, callerKeyId).callerIsMember };
  }

  async resolveRefs(refs: readonly string[]): Promise<Array<string | null>> {
    return refs.map((ref) => this.byIdentifier(ref)?.id ?? null);
  }

  async create(channel: NewChannel, relatedIds: readonly string[], owner: Caller): Promise<ChannelResource | undefined> {
    const { relatedChannels: _given, ...fields } = channel;
    const at = this.stamp();
    const record: ChannelRecord = {
      ...fields,
      id: randomUUID(),
      ownerId: owner.ownerId,
      createdByKeyId: owner.keyId,
      paused: false,
      createdAt: at,
      updatedAt: at,
      limitedMessages: false,
    };
    this.channels.set(record.id, record);
    this.links.set(record.id, [...relatedIds]);
    this.members.set(`${record.id} ${owner.keyId}`, { id: randomUUID(), channelId: record.id, keyId: owner.keyId, agentLabel: owner.agentLabel, grantedAt: at, grantedViaInvitationId: null });
    return this.resource(record);
  }

  async discover(callerKeyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]> {
    return this.summaries(callerKeyId, before, limit, (c) => c.discoverable);
  }

  async listForKey(keyId: string, before: Micros | undefined, limit: number): Promise<ChannelSummary[]> {
    return this.summaries(keyId, before, limit, (c) => this.view(c, keyId).callerIsMember);
  }

  private summaries(callerKeyId: string, before: Micros | undefined, limit: number, listed: (c: ChannelRecord) => boolean): ChannelSummary[] {
    return [...this.channels.values()]
      .filter((c) => listed(c) && (before === undefined || c.createdAt < before))
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, limit)
      .map((c) => ({
        id: c.id,
        name: c.name,
        mode: c.mode,
        access: c.access,
        description: c.description,
        createdAt: c.createdAt,
        isMember: this.view(c, callerKeyId).callerIsMember,
        ownerId: c.ownerId,
        // The fake keeps messages elsewhere (FakeMessageStore); its lists count none.
        liveMessages: 0,
        openMessages: 0,
      }));
  }

  async update(id: string, plan: (current: LockedChannel) => ChannelUpdate): Promise<ChannelResource | undefined> {
    const current = this.channels.get(id);
    if (!current) return undefined;
    const { changes, relatedIds } = plan({ record: current, relatedIds: [...(this.links.get(id) ?? [])] });
    if (Object.keys(changes).length === 0 && relatedIds === undefined) return this.resource(current);
    const updated = { ...current, ...changes, updatedAt: this.stamp() } as ChannelRecord;
    this.channels.set(id, updated);
    if (relatedIds !== undefined) this.links.set(id, relatedIds.filter((r) => r !== id && this.channels.has(r)));
    return this.resource(updated);
  }

  async delete(id: string): Promise<void> {
    this.channels.delete(id);
    this.links.delete(id);
    for (const [alias, owner] of this.aliases) {
      if (owner === id) this.aliases.delete(alias);
    }
    for (const [key, alias] of this.aliasKeys) {
      if (!this.aliases.has(alias)) this.aliasKeys.delete(key);
    }
    for (const [key, member] of this.members) {
      if (member.channelId === id) this.members.delete(key);
    }
  }

  async addAlias(id: string, alias: string, aliasKey: string): Promise<ChannelResource | "conflict" | undefined> {
    const held = this.aliasKeys.get(aliasKey);
    if (held !== undefined && (held !== alias || this.aliases.get(alias) !== id)) return "conflict";
    const record = this.channels.get(id);
    if (!record) return undefined;
    this.aliases.set(alias, id);
    this.aliasKeys.set(aliasKey, alias);
    return this.resource(record);
  }

  async removeAlias(id: string, alias: string): Promise<ChannelResource | "not_held" | undefined> {
    const record = this.channels.get(id);
    if (!record) return undefined;
    if (this.aliases.get(alias) !== id) return "not_held";
    this.aliases.delete(alias);
    for (const [key, held] of this.aliasKeys) if (held === alias) this.aliasKeys.delete(key);
    return this.resource(record);
  }

  /** Shared limits by owner key, name → id (the fake has no limit store: tests put them here). */
  readonly limits = new Map<string, Map<string, string>>();

  async limitIds(ownerKeyId: string, names: readonly string[]): Promise<Map<string, string>> {
    const own = this.limits.get(ownerKeyId) ?? new Map<string, string>();
    return new Map(names.filter((n) => own.has(n)).map((n) => [n, own.get(n)!]));
  }

  async setPaused(identifier: string, paused: boolean): Promise<ChannelResource | undefined> {
    const record = this.byIdentifier(identifier);
    if (!record) return undefined;
    const updated = record.paused === paused ? record : { ...record, paused, updatedAt: this.stamp() };
    this.channels.set(record.id, updated);
    return this.resource(updated);
  }
}
