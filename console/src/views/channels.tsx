/** My channels (owned and member of), creating one, and discovering public ones. */
import { useEffect, useState } from "preact/hooks";
import type { KeyQuotas, QuotaUsage } from "../../../gen/agentbus/v1/key_pb.js";
import { ChannelAccess, ChannelMode, type ChannelSummary } from "../../../gen/agentbus/v1/channel_pb.js";
import { AccessRequestOutcome } from "../../../gen/agentbus/v1/channel_service_pb.js";
import { AccessField, ModeField } from "../channel-fields.js";
import { Badge, Empty, Field, ProblemBox, SandboxInvite, Time } from "../components.js";
import { accessName, COUNT_CAP, countText, modeName, toDate } from "../format.js";
import { navigate } from "../router.js";
import { useAction, usePages, useSession } from "../session.js";

/**
 * A channel's messages as the list counts them: live ones, and on a work
 * queue the open work (ready to claim). Broadcast channels have no open work
 * to count.
 */
function Counts({ channel }: { channel: ChannelSummary }) {
  return (
    <span class="counts" title={`Counted up to ${COUNT_CAP}`}>
      <span class="count-live">{countText(channel.liveMessages)} live</span>
      {channel.mode === ChannelMode.CLAIMABLE ? (
        <>
          {" · "}
          <span class="count-open">{countText(channel.openMessages)} open</span>
        </>
      ) : null}
    </span>
  );
}

function ChannelTable({ channels, action }: { channels: ChannelSummary[]; action?: (c: ChannelSummary) => preact.ComponentChildren }) {
  return (
    <table class="list channels">
      <thead>
        <tr>
          <th scope="col">Channel</th>
          <th scope="col">Mode</th>
          <th scope="col">Messages</th>
          <th scope="col">Owner</th>
          <th scope="col" class="wide">
            Access
          </th>
          <th scope="col" class="wide">
            Created
          </th>
          {action ? <th scope="col"><span class="visually-hidden">Actions</span></th> : null}
        </tr>
      </thead>
      <tbody>
        {channels.map((c) => (
          <tr key={c.id} data-channel-id={c.id}>
            <td>
              <a href={`#/channels/${encodeURIComponent(c.id)}`}>{c.name}</a>
              {c.description ? <div class="muted small">{c.description}</div> : null}
            </td>
            <td>
              <Badge kind={modeName(c.mode)}>{modeName(c.mode)}</Badge>
            </td>
            <td>
              <Counts channel={c} />
            </td>
            <td class="owner">{c.ownerId}</td>
            <td class="wide">{accessName(c.access)}</td>
            <td class="wide">
              <Time date={toDate(c.createdAt)} />
            </td>
            {action ? <td>{action(c)}</td> : null}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function MyChannels() {
  const { client } = useSession();
  const list = usePages((cursor) => client.channels.listMyChannels({ limit: 50, cursor }), []);
  return (
    <main>
      <h1>My channels</h1>
      <StorageQuotas />
      <CreateChannel />
      <ProblemBox problem={list.problem} />
      {!list.loaded && list.problem === undefined ? <p class="muted">Loading…</p> : null}
      {list.loaded && list.items.length === 0 ? (
        <>
          <Empty>You have no channels yet. Create one above, or find a public one under Discover.</Empty>
          <SandboxInvite />
        </>
      ) : null}
      {list.items.length > 0 ? <ChannelTable channels={list.items} /> : null}
      <LoadMore list={list} />
    </main>
  );
}

function CreateChannel() {
  const { client } = useSession();
  const [open, setOpen] = useState(false);
  const [name, setName] = useState("");
  const [mode, setMode] = useState<ChannelMode>(ChannelMode.CLAIMABLE);
  const [access, setAccess] = useState<ChannelAccess>(ChannelAccess.OPEN);
  const [description, setDescription] = useState("");
  const [ttl, setTtl] = useState("");
  const [retention, setRetention] = useState("");
  const create = useAction(async () => {
    const channel = await client.channels.createChannel({
      name,
      mode,
      access,
      ...(description ? { description } : {}),
      ...(ttl.trim() ? { ttlSeconds: Number(ttl) } : {}),
      ...(retention.trim() ? { retentionDays: Number(retention) } : {}),
    });
    navigate(`/channels/${channel.id}`);
  });
  if (!open) {
    return (
      <button type="button" onClick={() => setOpen(true)}>
        New channel
      </button>
    );
  }
  return (
    <form
      class="card"
      aria-label="New channel"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2>New channel</h2>
      <Field label="Name">
        <input name="channel-name" required maxLength={128} value={name} onInput={(e) => setName(e.currentTarget.value)} />
      </Field>
      <ModeField name="channel-mode" value={mode} onChange={setMode} />
      <AccessField name="channel-access" value={access} onChange={setAccess} />
      <Field label="Description (optional)">
        <input name="channel-description" maxLength={2000} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </Field>
      <div class="grid">
        <Field label="Message TTL (seconds)" hint="How long a message stays live; fixed once created. Empty: the default.">
          <input name="channel-ttl" type="number" min={300} max={2592000} value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} />
        </Field>
        <Field label="History kept (days)" hint="Expired messages stay readable this long. Empty: the default.">
          <input name="channel-retention" type="number" min={1} value={retention} onInput={(e) => setRetention(e.currentTarget.value)} />
        </Field>
      </div>
      <p class="muted small">Limits, webhook and dead letters are under the channel's Settings once it exists.</p>
      <div class="row">
        <button type="submit" disabled={create.busy}>
          Create channel
        </button>
        <button type="button" class="secondary" onClick={() => setOpen(false)}>
          Cancel
        </button>
      </div>
      <ProblemBox problem={create.problem} />
    </form>
  );
}

export function Discover() {
  const { client } = useSession();
  const list = usePages((cursor) => client.channels.discoverChannels({ limit: 50, cursor }), []);
  const [requested, setRequested] = useState<Record<string, string>>({});
  const ask = useAction(async (channel: ChannelSummary) => {
    const res = await client.channels.createAccessRequest({ identifier: channel.id });
    const note =
      res.status === AccessRequestOutcome.PENDING ? "Requested: the owner decides." : res.status === AccessRequestOutcome.ALREADY_MEMBER ? "You are a member." : "Open: no request needed.";
    setRequested({ ...requested, [channel.id]: note });
  });
  const channels = list.items;
  return (
    <main>
      <h1>Discover channels</h1>
      <p class="muted">Channels their owners made discoverable, newest first. Open ones you can read and post to at once; ask for access to restricted ones.</p>
      <ProblemBox problem={list.problem ?? ask.problem} />
      {list.loaded && channels.length === 0 ? <Empty>No discoverable channels yet.</Empty> : null}
      {channels.length > 0 ? (
        <ChannelTable
          channels={channels}
          action={(c) =>
            requested[c.id] ? (
              <span class="muted">{requested[c.id]}</span>
            ) : c.access === ChannelAccess.RESTRICTED && !c.isMember ? (
              <button type="button" class="small" onClick={() => void ask.run(c)}>
                Request access
              </button>
            ) : null
          }
        />
      ) : null}
      <LoadMore list={list} />
    </main>
  );
}

function LoadMore({ list }: { list: { hasMore: boolean; more: { run: () => Promise<void>; busy: boolean } } }) {
  if (!list.hasMore) return null;
  return (
    <button type="button" onClick={() => void list.more.run()} disabled={list.more.busy}>
      Load more
    </button>
  );
}

/** What the key's messages and channels take against its quotas (docs/decisions.md#quotas), read now. */
function StorageQuotas() {
  const { client } = useSession();
  const [quotas, setQuotas] = useState<KeyQuotas | undefined>(undefined);
  useEffect(() => {
    let live = true;
    client.keys.getCurrentKey({}).then(
      (info) => live && setQuotas(info.quotas),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [client]);
  if (quotas === undefined) return null;
  const of = (q: QuotaUsage | undefined, unit = "") => (q === undefined ? "" : `${q.used.toLocaleString()}${unit} of ${q.limit === undefined ? "unlimited" : `${q.limit.toLocaleString()}${unit}`}`);
  return (
    <p class="muted small" aria-label="Storage quotas">
      Storage: {of(quotas.storedBytes, " bytes")} · live messages {of(quotas.liveMessages)} · channels {of(quotas.channels)}
    </p>
  );
}
