/**
 * One channel: its messages arriving live (WatchMessages over Connect), each
 * with who posted, who holds it and until when, who acknowledged it and the
 * result; the queue state; posting; and the owner's pages.
 */
import { Fragment } from "preact";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ChannelMode, type Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import { isCancelled, problemOf, type Problem } from "../api.js";
import { Badge, Empty, Field, ProblemBox, Time } from "../components.js";
import { accessName, actorName, messageState, modeName, toDate } from "../format.js";
import type { ChannelTab } from "../router.js";
import { useAction, useLoaded, useSession } from "../session.js";
import { ChannelSettings } from "./channel-settings.js";
import { Deliveries } from "./deliveries.js";
import { People } from "./people.js";

/** Messages kept on the page; older ones fall off as new ones arrive. */
const KEPT = 200;
/** How often states (claims, acknowledgements) and the queue figures are read again. */
const REFRESH_MS = 2_000;

export function ChannelPage({ id, tab }: { id: string; tab: ChannelTab }) {
  const { client, me } = useSession();
  const channel = useLoaded(() => client.channels.getChannel({ identifier: id }), [id]);
  if (channel.problem && !channel.value) {
    return (
      <main>
        <h1>Channel</h1>
        <ProblemBox problem={channel.problem} />
        <p>
          <a href="#/">Back to my channels</a>
        </p>
      </main>
    );
  }
  const c = channel.value;
  if (!c) return <main class="muted">Loading…</main>;
  // The key that created the channel owns it (a later key with the same label does not).
  const owner = c.createdByKeyId === me.keyId;
  const tabs: Array<[ChannelTab, string]> = owner
    ? [
        ["messages", "Messages"],
        ["settings", "Settings"],
        ["people", "Members and invitations"],
        ["deliveries", "Webhook deliveries"],
      ]
    : [["messages", "Messages"]];
  return (
    <main>
      <header class="channel-head">
        <h1>{c.name}</h1>
        <p class="meta">
          <Badge kind={modeName(c.mode)}>{modeName(c.mode)}</Badge> <Badge kind={accessName(c.access)}>{accessName(c.access)}</Badge>{" "}
          {c.paused ? <Badge kind="paused">paused</Badge> : null} <span class="muted">owner {c.ownerId}</span>{" "}
          <span class="muted small">
            id <code>{c.id}</code>
          </span>
        </p>
        {c.description ? <p>{c.description}</p> : null}
      </header>
      {tabs.length > 1 ? (
        <nav class="tabs" aria-label="Channel pages">
          {tabs.map(([t, label]) => (
            <a key={t} href={`#/channels/${encodeURIComponent(c.id)}${t === "messages" ? "" : `/${t}`}`} aria-current={t === tab ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
      ) : null}
      {tab === "settings" && owner ? (
        <ChannelSettings key={c.id} channel={c} onSaved={channel.reload} />
      ) : tab === "people" && owner ? (
        <People channel={c} />
      ) : tab === "deliveries" && owner ? (
        <Deliveries channel={c} />
      ) : (
        <Messages channel={c} owner={owner} />
      )}
    </main>
  );
}

interface Kept {
  message: Message;
  /** The cursor just after this message (its since= value). */
  cursor: string;
}

/** The channel's messages: the backlog and every new one from WatchMessages, their states read again every few seconds. */
function useLiveMessages(channelId: string) {
  const { client } = useSession();
  const [messages, setMessages] = useState<Kept[]>([]);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const kept = useRef<Kept[]>([]);

  const merge = (incoming: Kept[]) => {
    const byId = new Map(kept.current.map((k) => [k.message.id, k]));
    for (const k of incoming) byId.set(k.message.id, { message: k.message, cursor: byId.get(k.message.id)?.cursor ?? k.cursor });
    kept.current = [...byId.values()].slice(-KEPT);
    setMessages(kept.current);
  };

  useEffect(() => {
    kept.current = [];
    setMessages([]);
    const abort = new AbortController();
    const watch = async () => {
      let since = "0";
      while (!abort.signal.aborted) {
        try {
          for await (const item of client.messages.watchMessages({ identifier: channelId, since }, { signal: abort.signal })) {
            setProblem(undefined);
            since = item.cursor || since;
            if (item.message) merge([{ message: item.message, cursor: item.cursor }]);
          }
        } catch (err) {
          if (abort.signal.aborted || isCancelled(err)) return;
          setProblem(problemOf(err));
        }
        // The stream ended or dropped: pick up from the last cursor after a pause.
        await new Promise((resolve) => setTimeout(resolve, 2_000));
      }
    };
    const refresh = async () => {
      const list = kept.current;
      if (list.length === 0) return;
      // Re-read the newest page: claims and acknowledgements change messages in place.
      const from = Math.max(0, list.length - 100);
      const since = from === 0 ? "0" : (list[from - 1]?.cursor ?? "0");
      try {
        const page = await client.messages.listMessages({ identifier: channelId, since, limit: 100 }, { signal: abort.signal });
        merge(page.data.map((message) => ({ message, cursor: "" })));
      } catch {
        // The watch reports trouble; a missed refresh is caught up by the next.
      }
    };
    void watch();
    const timer = setInterval(() => void refresh(), REFRESH_MS);
    return () => {
      abort.abort();
      clearInterval(timer);
    };
    // The client is the session's: a new channel is what starts a new watch.
  }, [channelId]);
  return { messages, problem };
}

function Messages({ channel, owner }: { channel: Channel; owner: boolean }) {
  const claimable = channel.mode === ChannelMode.CLAIMABLE;
  const { messages, problem } = useLiveMessages(channel.id);
  const newestFirst = useMemo(() => [...messages].reverse(), [messages]);
  return (
    <>
      {claimable ? <QueueState channel={channel} /> : null}
      <PostMessage channel={channel} />
      <ProblemBox problem={problem} />
      <section aria-labelledby="messages-heading">
        <h2 id="messages-heading">
          Messages <span class="live" title="New messages appear as they are posted">live</span>
        </h2>
        {newestFirst.length === 0 ? (
          <Empty>No messages yet. Post one above, or from an agent: POST /v1/channels/{channel.id}/messages.</Empty>
        ) : (
          <ol class="messages" aria-live="polite">
            {newestFirst.map((k) => (
              <MessageItem key={k.message.id} message={k.message} claimable={claimable} />
            ))}
          </ol>
        )}
      </section>
      {owner ? <OwnerActions channel={channel} /> : null}
    </>
  );
}

function MessageItem({ message, claimable }: { message: Message; claimable: boolean }) {
  const state = messageState(message, claimable);
  const claimedAt = toDate(message.claimedAt);
  const leaseEnds = toDate(message.leaseExpiresAt);
  return (
    <li class={`message state-${state.replace(" ", "-")}`} data-message-id={message.id}>
      <div class="message-head">
        <strong>{actorName(message.actor, message.actorLabel)}</strong>{" "}
        <span class="muted small" title="The key that posted it">
          {message.authorKeyId}
        </span>{" "}
        <Time date={toDate(message.createdAt)} />{" "}
        <Badge kind={state}>{state}</Badge>
        {message.deliveryCount > 1 ? <span class="muted small"> delivery {message.deliveryCount}</span> : null}
      </div>
      {message.deadLetter ? (
        <p class="muted small">
          Dead letter from{" "}
          <a href={`#/channels/${encodeURIComponent(message.deadLetter.originChannelId)}`}>its origin channel</a>, after{" "}
          {message.deadLetter.deliveryCount} deliveries ({message.deadLetter.lastError === "lease_expired" ? "its last lease ran out" : "last released"})
        </p>
      ) : null}
      {/* Text only: message content is never rendered as HTML. */}
      <p class="content">{message.content}</p>
      {message.metadata && Object.keys(message.metadata).length > 0 ? (
        <details>
          <summary>Metadata</summary>
          <pre>{JSON.stringify(message.metadata, null, 2)}</pre>
        </details>
      ) : null}
      <dl class="facts">
        {state === "delayed" ? (
          <>
            <dt>Available</dt>
            <dd>
              <Time date={toDate(message.availableAt)} />
            </dd>
          </>
        ) : null}
        {message.claimedBy && message.claimedBy.id !== "" ? (
          <>
            <dt>{state === "acknowledged" ? "Worked by" : "Held by"}</dt>
            <dd>
              {actorName(message.claimedBy)} since <Time date={claimedAt} />
              {leaseEnds && state === "in flight" ? (
                <>
                  , lease ends <Time date={leaseEnds} />
                </>
              ) : null}
            </dd>
          </>
        ) : null}
        {message.acknowledgedBy.map((a, i) => (
          <Fragment key={`${a.id}-${i}`}>
            <dt>Acknowledged by</dt>
            <dd>
              {a.name || a.id} <Time date={toDate(a.occurredAt)} />
            </dd>
          </Fragment>
        ))}
        {message.result !== undefined ? (
          <>
            <dt>Result</dt>
            <dd>
              <pre class="result">{message.result}</pre>
            </dd>
          </>
        ) : null}
      </dl>
    </li>
  );
}

function QueueState({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const stats = useLoaded(() => client.messages.getChannelStats({ identifier: channel.id }), [channel.id], REFRESH_MS);
  const s = stats.value;
  const figure = (label: string, value: number | undefined, kind: string) => (
    <div class={`figure figure-${kind}`}>
      <span class="figure-value">{value ?? "—"}</span>
      <span class="figure-label">{label}</span>
    </div>
  );
  return (
    <section class="queue" aria-label="Queue state">
      {figure("ready", s?.ready, "ready")}
      {figure("delayed", s?.delayed, "delayed")}
      {figure("in flight", s?.inFlight, "in-flight")}
      {figure("acknowledged", s?.acknowledged, "acknowledged")}
      {figure("dead-lettered", s?.deadLettered, s?.deadLettered ? "dead" : "dead-none")}
      <div class="figure">
        <span class="figure-value">{s?.oldestReadyAgeSeconds !== undefined ? `${Math.round(s.oldestReadyAgeSeconds)} s` : "—"}</span>
        <span class="figure-label">oldest ready</span>
      </div>
      {stats.problem ? <ProblemBox problem={stats.problem} /> : null}
    </section>
  );
}

function PostMessage({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const [content, setContent] = useState("");
  const [delay, setDelay] = useState("");
  const post = useAction(async () => {
    const delaySeconds = delay.trim() === "" ? undefined : Number(delay);
    await client.messages.createMessage({ identifier: channel.id, content, ...(delaySeconds === undefined ? {} : { delaySeconds }) });
    setContent("");
    setDelay("");
  });
  return (
    <form
      class="card post"
      aria-label="Post a message"
      onSubmit={(e) => {
        e.preventDefault();
        void post.run();
      }}
    >
      <div class="row">
        <Field label="New message">
          <textarea name="message-content" rows={2} required value={content} onInput={(e) => setContent(e.currentTarget.value)} />
        </Field>
        <Field label="Delay (s)" narrow>
          <input name="message-delay" type="number" min={0} max={86400} inputMode="numeric" placeholder="0" value={delay} onInput={(e) => setDelay(e.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={post.busy}>
          Post
        </button>
      </div>
      <ProblemBox problem={post.problem} />
    </form>
  );
}

function OwnerActions({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const [moved, setMoved] = useState<{ moved: number; refused: number } | undefined>(undefined);
  const redrive = useAction(async () => {
    const res = await client.messages.redriveDeadLetters({ identifier: channel.id });
    setMoved({ moved: res.moved, refused: res.refused.length });
  });
  return (
    <section class="card owner-actions" aria-label="Dead letters">
      {channel.deadLetterChannelId ? (
        <p>
          Messages delivered {channel.maxDeliveries} times without an acknowledgement go to the{" "}
          <a href={`#/channels/${encodeURIComponent(channel.deadLetterChannelId)}`}>dead-letter channel</a>.
        </p>
      ) : null}
      <p class="row">
        <button type="button" class="secondary" disabled={redrive.busy} onClick={() => void redrive.run()}>
          Redrive dead letters
        </button>
        <span class="muted small">
          {moved === undefined
            ? "Moves the dead letters this channel holds back to the channels they came from."
            : `${moved.moved} moved back.${moved.refused > 0 ? ` ${moved.refused} stay: their origin's metadata schema refuses them.` : ""}`}
        </span>
      </p>
      <ProblemBox problem={redrive.problem} />
    </section>
  );
}
