/** The domain use cases wired over the in-memory fakes, with the callers and inputs the domain unit tests share. */
import { Actors } from "../../src/domain/actors.js";
import type { ChannelUpdateInput, CreateChannelInput } from "../../src/domain/channels.js";
import { channelInput, Channels } from "../../src/domain/channels.js";
import { SecurityAudit } from "../../src/domain/audit.js";
import { Keys } from "../../src/domain/keys.js";
import { Membership } from "../../src/domain/membership.js";
import { Messages } from "../../src/domain/messages.js";
import type { Caller } from "../../src/model/caller.js";
import { ManualClock } from "./clock.js";
import { FakeActorStore } from "./fakes/actors.js";
import { FakeAuditLog } from "./fakes/audit.js";
import { FakeChannelStore } from "./fakes/channels.js";
import { FakeKeyStore } from "./fakes/keys.js";
import { FakeMembershipStore } from "./fakes/membership.js";
import { FakeMessageStore } from "./fakes/messages.js";
import { FakeWakeBus } from "./fakes/wake-bus.js";

/** A caller whose key, agent label and owner all derive from one label, so tests can tell callers apart at a glance. */
export const caller = (label: string): Caller => ({ keyId: `ak_${label}`, agentLabel: label, ownerId: label });

/** Two callers on different keys, for rules about whose key may do what. */
export const alice = caller("alice");
export const bob = caller("bob");

/** A create request that names only name and mode, as a client leaving every optional field out would send it. */
export const createChannelInput = (fields: Partial<CreateChannelInput> = {}): CreateChannelInput => channelInput({ name: "jobs", mode: "claimable", ...fields });

/** An update that sets nothing but the given fields. */
export const channelUpdateInput = (fields: Partial<ChannelUpdateInput> = {}): ChannelUpdateInput => ({
  name: undefined,
  mode: undefined,
  access: undefined,
  discoverable: undefined,
  description: undefined,
  metadataSchema: undefined,
  pinnedMessage: undefined,
  relatedChannels: [],
  retentionDays: undefined,
  maxMessages: undefined,
  maxWritesPerMinute: undefined,
  maxDeliveries: undefined,
  deadLetterChannel: undefined,
  paused: undefined,
  webhookUrl: undefined,
  webhookSecret: undefined,
  ...fields,
});

/**
 * Every domain use case over one set of fakes, as the composition root wires
 * them over PostgreSQL: the stores share the channel store so membership and
 * messages see the same channels, and transactions run inline.
 */
export function fakeDomain() {
  const clock = new ManualClock();
  const bus = new FakeWakeBus();
  const channelStore = new FakeChannelStore();
  const messageStore = new FakeMessageStore(channelStore);
  const membershipStore = new FakeMembershipStore(channelStore);
  const actorStore = new FakeActorStore((channelId, keyId) => channelStore.isMember(channelId, keyId));
  const keyStore = new FakeKeyStore();
  const actors = new Actors(actorStore, (fn) => fn());
  const auditLog = new FakeAuditLog();
  const audit = new SecurityAudit(auditLog, clock);
  return {
    clock,
    bus,
    channelStore,
    messageStore,
    membershipStore,
    actorStore,
    keyStore,
    actors,
    channels: new Channels(channelStore, { defaultDiscoverable: true }),
    messages: new Messages(messageStore, channelStore, actors, clock, {
      maxContentBytes: 1024,
      bus,
      afterCommit: (fn) => fn(),
      longPollMaxWaitSeconds: 0,
      longPollMaxWaiters: 10,
      longPollMaxWaitersPerKey: 2,
    }),
    membership: new Membership(membershipStore, channelStore, audit, clock),
    keys: new Keys(keyStore, audit, { clock, cacheTtlMs: 5_000 }),
    auditLog,
    audit,
  };
}
