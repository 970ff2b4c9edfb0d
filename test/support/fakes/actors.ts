/** ActorStore over Maps. */
import { randomUUID } from "node:crypto";
import type { ActorOwnership, ActorRecord, ActorRef, KeyIdentity, NewActor } from "../../../src/model/actors.js";
import type { ActorStore, MentionScope } from "../../../src/ports/actors.js";

const ref = (actor: ActorRecord): ActorRef => ({ id: actor.id, name: actor.name });

export class FakeActorStore implements ActorStore {
  readonly actors = new Map<string, ActorRecord>();
  /** alias key (normal form) → actor id */
  private readonly aliasKeys = new Map<string, string>();
  private seq = 0;

  /** Whether a key may read a channel it does not own (its member rows); none by default. */
  constructor(private readonly isMember: (channelId: string, keyId: string) => boolean = () => false) {}

  private byRef(identifier: string): ActorRecord | undefined {
    return this.actors.get(identifier) ?? [...this.actors.values()].find((a) => a.aliases.includes(identifier));
  }

  private add(actor: NewActor, isDefault: boolean): ActorRecord {
    const at = Date.now() * 1000 + ++this.seq;
    const record: ActorRecord = { ...actor, id: randomUUID(), isDefault, aliases: [], createdAt: at, updatedAt: at };
    this.actors.set(record.id, record);
    return record;
  }

  async findDefault(keyId: string): Promise<ActorRef | undefined> {
    const found = [...this.actors.values()].find((a) => a.createdByKeyId === keyId && a.isDefault);
    return found && ref(found);
  }

  async ensureDefault(key: KeyIdentity): Promise<ActorRef & { created: boolean }> {
    const found = await this.findDefault(key.keyId);
    if (found) return { ...found, created: false };
    const created = this.add({ name: key.agentLabel, description: "", metadata: {}, ownerId: key.ownerId, createdByKeyId: key.keyId }, true);
    return { ...ref(created), created: true };
  }

  async findRef(identifier: string): Promise<ActorOwnership | undefined> {
    const found = this.byRef(identifier);
    return found && { ...ref(found), createdByKeyId: found.createdByKeyId };
  }

  async findOwnByName(keyId: string, name: string): Promise<ActorRef | undefined> {
    const found = [...this.actors.values()]
      .filter((a) => a.createdByKeyId === keyId && a.name === name)
      .sort((a, b) => Number(b.isDefault) - Number(a.isDefault) || a.createdAt - b.createdAt)[0];
    return found && ref(found);
  }

  async findOrCreateOwnByName(actor: NewActor): Promise<ActorRef> {
    return (await this.findOwnByName(actor.createdByKeyId, actor.name)) ?? ref(this.add(actor, false));
  }

  async insert(actor: NewActor): Promise<ActorRecord> {
    return this.add(actor, false);
  }

  async find(identifier: string): Promise<ActorRecord | undefined> {
    return this.byRef(identifier);
  }

  async resolveMentions(refs: readonly string[], channel: MentionScope): Promise<ActorRef[]> {
    const out: ActorRef[] = [];
    for (const identifier of refs) {
      const actor = this.byRef(identifier);
      if (!actor || out.some((a) => a.id === actor.id)) continue;
      if (channel.access === "open" || actor.createdByKeyId === channel.createdByKeyId || this.isMember(channel.id, actor.createdByKeyId)) {
        out.push(ref(actor));
      }
    }
    return out;
  }

  async addAlias(actorId: string, alias: string, aliasKey: string): Promise<ActorRecord | "conflict" | undefined> {
    const holder = this.aliasKeys.get(aliasKey);
    if (holder !== undefined && (holder !== actorId || !this.actors.get(actorId)?.aliases.includes(alias))) return "conflict";
    const actor = this.actors.get(actorId);
    if (!actor) return undefined;
    if (!actor.aliases.includes(alias)) {
      const updated = { ...actor, aliases: [...actor.aliases, alias].sort() };
      this.actors.set(actorId, updated);
      this.aliasKeys.set(aliasKey, actorId);
      return updated;
    }
    return actor;
  }
}
