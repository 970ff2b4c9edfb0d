/**
 * One channel: its messages arriving live (WatchMessages over Connect), each
 * with who posted, who holds it and until when, who acknowledged it and the
 * result; claiming, acknowledging, releasing and requeueing them; the queue
 * state, which follows the list; posting; and the owner's pages.
 */
import { equals } from "@bufbuild/protobuf";
import { Fragment } from "preact";
import { useCallback, useEffect, useMemo, useRef, useState } from "preact/hooks";
import { ChannelMode, type Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import { MessageSchema, type Message } from "../../../gen/agentbus/v1/message_pb.js";
import type { ChannelStats } from "../../../gen/agentbus/v1/message_service_pb.js";
import { isCancelled, problemOf, type Problem } from "../api.js";
import { Badge, Empty, Field, ProblemBox, Time } from "../components.js";
import { accessName, actorOf, authorName, DEFAULT_PRIORITY, messageState, modeName, PRIORITIES, priorityTitle, refName, toDate } from "../format.js";
import type { ChannelTab } from "../router.js";
import { useAction, useLoaded, useSession } from "../session.js";
import { ChannelSettings } from "./channel-settings.js";
import { ChannelAgent, ChannelForward } from "./channel-agent.js";
import { Deliveries } from "./deliveries.js";
import { MessageTree } from "./message-tree.js";
import { MessageTimeline } from "./message-timeline.js";
import { Schedules } from "./schedules.js";
import { People } from "./people.js";

/** Messages kept on the page; older ones fall off as new ones arrive. */
const KEPT = 200;
/** How often the newest messages are read again: the watch brings new messages, not claims and acknowledgements of old ones. */
const REFRESH_MS = 2_000;
/**
 * How often the queue figures are read when the list did not change: what
 * changes with time alone (a delay falling due, the oldest ready message
 * ageing) shows up in the figures, never in the list.
 */
const IDLE_STATS_MS = 15_000;
/** The back-off a requeue offers: the message is open work again this many seconds later. */
const REQUEUE_DELAY_S = 60;

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
        ["schedules", "Schedules"],
      ]
    : [
        ["messages", "Messages"],
        ["schedules", "Schedules"],
      ];
  return (
    <main>
      <header class="channel-head">
        <h1>{c.name}</h1>
        <p class="meta">
          <Badge kind={modeName(c.mode)}>{modeName(c.mode)}</Badge> <Badge kind={accessName(c.access)}>{accessName(c.access)}</Badge>{" "}
          {c.paused ? <Badge kind="paused">paused</Badge> : null}{" "}
          <span class="muted" title={`Key ${c.createdByKeyId}`}>
            owner {c.ownerId}
          </span>{" "}
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
        <>
          <ChannelSettings key={c.id} channel={c} onSaved={channel.reload} />
          {c.mode === ChannelMode.CLAIMABLE ? <ChannelAgent key={`${c.id}-a2a`} channel={c} onSaved={channel.reload} /> : null}
          {c.mode === ChannelMode.CLAIMABLE ? <ChannelForward key={`${c.id}-a2a-forward`} channel={c} onSaved={channel.reload} /> : null}
        </>
      ) : tab === "people" && owner ? (
        <People channel={c} />
      ) : tab === "deliveries" && owner ? (
        <Deliveries channel={c} />
      ) : tab === "schedules" ? (
        <Schedules channel={c} owner={owner} />
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

/**
 * The channel's messages: the backlog and every new one from WatchMessages,
 * their states read again every few seconds, and any the page itself changed
 * (`update`). `revision` moves whenever the list gained or changed a message.
 */
function useLiveMessages(channelId: string) {
  const { client } = useSession();
  const [messages, setMessages] = useState<Kept[]>([]);
  const [revision, setRevision] = useState(0);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const kept = useRef<Kept[]>([]);
  // When the page last learned each message's state from an answer to its own
  // action: a re-read sent before that answer came back must not undo it
  // (a claim's "in flight" shown, then "ready" again from an older list).
  const changedAt = useRef(new Map<string, number>());
  const clock = useRef(0);

  const merge = (incoming: Kept[], readAt = Number.POSITIVE_INFINITY) => {
    const byId = new Map(kept.current.map((k) => [k.message.id, k]));
    let changed = false;
    for (const k of incoming) {
      if ((changedAt.current.get(k.message.id) ?? -1) > readAt) continue;
      const before = byId.get(k.message.id);
      // A re-read mostly returns what the page already shows: only a difference is news.
      if (before && equals(MessageSchema, before.message, k.message)) continue;
      changed = true;
      byId.set(k.message.id, { message: k.message, cursor: before?.cursor ?? k.cursor });
    }
    if (!changed) return;
    kept.current = [...byId.values()].slice(-KEPT);
    setMessages(kept.current);
    setRevision((r) => r + 1);
  };
  const update = (message: Message) => {
    changedAt.current.set(message.id, ++clock.current);
    merge([{ message, cursor: "" }]);
  };

  useEffect(() => {
    kept.current = [];
    changedAt.current.clear();
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
      const readAt = clock.current;
      try {
        const page = await client.messages.listMessages({ identifier: channelId, since, limit: 100 }, { signal: abort.signal });
        merge(
          page.data.map((message) => ({ message, cursor: "" })),
          readAt,
        );
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
  return { messages, revision, problem, update };
}

/**
 * A work queue whose groups or shared limits bound what may be in flight
 * hands work out only in its own order: a claim of one chosen task would pass
 * the bounds by, and the service refuses it (receive_required). Such a
 * channel's tasks are taken with a receive instead.
 */
const takenInOrder = (channel: Channel): boolean => channel.groupConcurrency !== undefined || channel.limits.length > 0;

function Messages({ channel, owner }: { channel: Channel; owner: boolean }) {
  const claimable = channel.mode === ChannelMode.CLAIMABLE;
  const inOrder = claimable && takenInOrder(channel);
  const { messages, revision, problem, update } = useLiveMessages(channel.id);
  const newestFirst = useMemo(() => [...messages].reverse(), [messages]);
  return (
    <>
      {claimable ? <QueueState channel={channel} revision={revision} /> : null}
      {inOrder ? <TakeNext channel={channel} onTaken={update} /> : null}
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
              <MessageItem key={k.message.id} message={k.message} claimable={claimable} claimOne={!inOrder} owner={owner} onChanged={update} />
            ))}
          </ol>
        )}
      </section>
      {owner ? <OwnerActions channel={channel} /> : null}
    </>
  );
}

function MessageItem({ message, claimable, claimOne, owner, onChanged }: { message: Message; claimable: boolean; claimOne: boolean; owner: boolean; onChanged: (message: Message) => void }) {
  const { me } = useSession();
  const state = messageState(message, claimable);
  const claimedAt = toDate(message.claimedAt);
  const leaseEnds = toDate(message.leaseExpiresAt);
  const actor = actorOf(message);
  return (
    <li class={`message state-${state.replace(" ", "-")}`} data-message-id={message.id}>
      <div class="message-head">
        <strong class="author" title={`Posted with key ${message.authorKeyId}`}>
          {authorName(message)}
        </strong>
        {actor !== undefined && actor !== authorName(message) ? (
          <span class="muted small actor" title="The actor the poster named">
            as {actor}
          </span>
        ) : null}{" "}
        <Time date={toDate(message.createdAt)} />{" "}
        <Badge kind={state}>{state}</Badge>
        {/* Priority orders a work queue's deliveries; elsewhere only a priority someone chose is worth showing. */}
        {message.priority > 0 && (claimable || message.priority !== DEFAULT_PRIORITY) ? (
          <span class={`priority priority-${message.priority}`} title={priorityTitle(message.priority)}>
            P{message.priority}
          </span>
        ) : null}
        {message.groupKey !== undefined ? (
          <span class="group" title="The message's group: a channel's group concurrency and fair dispatch work by it">
            group <code>{message.groupKey}</code>
          </span>
        ) : null}
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
        {message.limits.length > 0 ? (
          <>
            <dt>Limits</dt>
            <dd class="message-limits">{message.limits.join(", ")}</dd>
          </>
        ) : null}
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
              <span class="holder" title={message.claimedByKeyId ? `Key ${message.claimedByKeyId}` : undefined}>
                {refName(message.claimedBy)}
                {message.claimedByKeyId === me.keyId ? " (you)" : ""}
              </span>{" "}
              since <Time date={claimedAt} />
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
              {refName(a)} <Time date={toDate(a.occurredAt)} />
            </dd>
          </Fragment>
        ))}
        {message.dependsOn.length > 0 ? (
          <>
            <dt>Waits for</dt>
            <dd class="depends-on">
              {message.dependsOn.map((id) => (
                <code key={id} title={id}>
                  {id.slice(0, 8)}
                </code>
              ))}
            </dd>
          </>
        ) : null}
        {message.dependentsCount > 0 ? (
          <>
            <dt>Dependents</dt>
            <dd class="dependents">{message.dependentsCount}</dd>
          </>
        ) : null}
        {message.waitpoint ? (
          <>
            <dt>{state === "waiting" ? "Waiting for" : "Waited for"}</dt>
            <dd class="waitpoint">
              waitpoint <code title={message.waitpoint.id}>{message.waitpoint.id.slice(0, 8)}</code>
              {state === "waiting" ? (
                <>
                  {" "}
                  until <Time date={toDate(message.availableAt)} /> at the latest
                </>
              ) : message.waitpoint.timedOut ? (
                " (timed out)"
              ) : (
                <>
                  {": "}
                  <code class="waitpoint-data">{JSON.stringify(message.waitpoint.data ?? {})}</code>
                </>
              )}
            </dd>
          </>
        ) : null}
        {message.progress ? (
          <>
            <dt>Progress</dt>
            <dd class="progress">
              {message.progress.data && Object.keys(message.progress.data).length > 0 ? <code class="progress-data">{JSON.stringify(message.progress.data)}</code> : null}{" "}
              <Time date={toDate(message.progress.updatedAt)} />
              {message.progress.text !== "" ? <pre class="progress-text">{message.progress.text}</pre> : null}
            </dd>
          </>
        ) : null}
        {message.cancelRequested ? (
          <>
            <dt>{state === "cancelled" ? "Cancelled" : "Cancel requested"}</dt>
            <dd class="cancel-reason">{message.cancelReason ?? "no reason given"}</dd>
          </>
        ) : null}
        {message.result !== undefined ? (
          <>
            <dt>Result</dt>
            <dd>
              <pre class="result">{message.result}</pre>
            </dd>
          </>
        ) : null}
      </dl>
      <MessageTree message={message} />
      <MessageTimeline message={message} />
      {claimable ? <MessageActions message={message} claimOne={claimOne} mayCancel={owner || message.authorKeyId === me.keyId} onChanged={onChanged} /> : null}
    </li>
  );
}

/**
 * What the signed-in key may do with a task, and only that: claim it while it
 * is ready (unless the channel hands work out only in its order: TakeNext);
 * while its own key holds it, acknowledge it (with a result, if
 * any), release it (open work again at once) or requeue it (open work again
 * after a delay, a retry with back-off); as its author or the channel's
 * owner, cancel it while it is not finished. Holder actions are sent as the actor
 * that holds the claim: the key may act as any of its own actors, and the
 * service wants the holding one.
 */
function MessageActions({ message, claimOne, mayCancel, onChanged }: { message: Message; claimOne: boolean; mayCancel: boolean; onChanged: (message: Message) => void }) {
  const { client, me } = useSession();
  const [result, setResult] = useState("");
  const [delay, setDelay] = useState(String(REQUEUE_DELAY_S));
  const state = messageState(message, true);
  const holding = state === "in flight" && message.claimedByKeyId === me.keyId;
  const holder = message.claimedBy?.id;
  const act = useAction(async (action: "claim" | "ack" | "release" | "requeue" | "cancel") => {
    const id = { messageId: message.id };
    const answer =
      action === "claim"
        ? await client.messages.claimMessage(id)
        : action === "cancel"
          ? await client.messages.cancelMessage(id)
        : action === "ack"
          ? await client.messages.ackMessage({ ...id, actor: holder, ...(result.trim() === "" ? {} : { result }) })
          : await client.messages.releaseMessage({ ...id, actor: holder, ...(action === "requeue" ? { delaySeconds: Number(delay) } : {}) });
    if (answer.message) onChanged(answer.message);
  });
  const cancellable = mayCancel && !message.cancelRequested && (state === "ready" || state === "delayed" || state === "in flight");
  const cancelButton = cancellable ? (
    <button type="button" class="small secondary" disabled={act.busy} onClick={() => void act.run("cancel")} title="Never hand it out; a worker holding it is told to stop">
      Cancel
    </button>
  ) : null;
  if (state !== "ready" && !holding) return cancelButton === null ? null : <div class="message-actions">{cancelButton}<ProblemBox problem={act.problem} onDismiss={act.clearProblem} /></div>;
  if (state === "ready" && !claimOne) return cancelButton === null ? null : <div class="message-actions">{cancelButton}<ProblemBox problem={act.problem} onDismiss={act.clearProblem} /></div>;
  return (
    <div class="message-actions">
      {state === "ready" ? (
        <div class="row">
          <button type="button" class="small" disabled={act.busy} onClick={() => void act.run("claim")}>
            Claim
          </button>
          {cancelButton}
        </div>
      ) : (
        <>
          <form
            class="row"
            aria-label="Acknowledge"
            onSubmit={(e) => {
              e.preventDefault();
              void act.run("ack");
            }}
          >
            <input name="ack-result" placeholder="Result (optional)" aria-label="Result (optional)" value={result} onInput={(e) => setResult(e.currentTarget.value)} />
            <button type="submit" class="small" disabled={act.busy}>
              Acknowledge
            </button>
          </form>
          <div class="row">
            <button type="button" class="small secondary" disabled={act.busy} onClick={() => void act.run("release")} title="Open work again now">
              Release
            </button>
            <form
              class="row requeue"
              aria-label="Requeue"
              onSubmit={(e) => {
                e.preventDefault();
                void act.run("requeue");
              }}
            >
              <button type="submit" class="small secondary" disabled={act.busy} title="Open work again after the delay">
                Requeue in
              </button>
              <input name="requeue-delay" type="number" min={0} required inputMode="numeric" aria-label="Requeue delay (seconds)" value={delay} onInput={(e) => setDelay(e.currentTarget.value)} />
              <span class="muted small">s</span>
            </form>
          </div>
        </>
      )}
      <ProblemBox problem={act.problem} onDismiss={act.clearProblem} />
    </div>
  );
}

/**
 * The queue figures, read again as soon as the live list gains or changes a
 * message (at most once a frame, however many changes it brought), so they
 * move with the list rather than behind it.
 */
function QueueState({ channel, revision }: { channel: Channel; revision: number }) {
  const stats = useQueueStats(channel.id, revision);
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
      {s?.expired ? figure("expired", s.expired, "expired") : null}
      <div class="figure">
        <span class="figure-value">{s?.oldestReadyAgeSeconds !== undefined ? `${Math.round(s.oldestReadyAgeSeconds)} s` : "—"}</span>
        <span class="figure-label">oldest ready</span>
      </div>
      {s?.groups ? figure("groups", s.groups.count, "groups") : null}
      {s ? <ReadyByPriority stats={s} /> : null}
      {s?.groups && s.groups.top.length > 0 ? <TopGroups stats={s} /> : null}
      {stats.problem ? <ProblemBox problem={stats.problem} /> : null}
    </section>
  );
}

/** Ready work by priority, most urgent first: what a worker's next receive takes from. */
function ReadyByPriority({ stats }: { stats: ChannelStats }) {
  return (
    <p class="by-priority small" aria-label="Ready by priority">
      <span class="muted">ready by priority</span>{" "}
      {PRIORITIES.map((p) => (
        <span key={p} class={`ready-priority ready-priority-${p}`} title={priorityTitle(p)}>
          P{p} <strong>{stats.readyByPriority[String(p)] ?? 0}</strong>
        </span>
      ))}
    </p>
  );
}

/** The groups with the most ready work, with what they hold in flight and how long their oldest has waited. */
function TopGroups({ stats }: { stats: ChannelStats }) {
  const groups = stats.groups!;
  return (
    <table class="list top-groups">
      <caption class="muted small">
        Largest groups by ready work ({groups.inFlight} in flight across all {groups.count})
      </caption>
      <thead>
        <tr>
          <th scope="col">Group</th>
          <th scope="col">Ready</th>
          <th scope="col">In flight</th>
          <th scope="col">Oldest ready</th>
        </tr>
      </thead>
      <tbody>
        {groups.top.map((g) => (
          <tr key={g.groupKey} data-group-key={g.groupKey}>
            <td>
              <code>{g.groupKey === "" ? "(no group)" : g.groupKey}</code>
            </td>
            <td>{g.ready}</td>
            <td>{g.inFlight}</td>
            <td>{g.oldestReadyAgeSeconds === undefined ? "—" : `${Math.round(g.oldestReadyAgeSeconds)} s`}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function useQueueStats(channelId: string, revision: number) {
  const { client } = useSession();
  const [value, setValue] = useState<ChannelStats | undefined>(undefined);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  // Only the newest read may land: an older answer arriving late would move the figures back.
  const newest = useRef(0);
  useEffect(
    () => () => {
      newest.current = -1;
    },
    [],
  );
  const read = useCallback(async () => {
    if (newest.current < 0) return;
    const ticket = ++newest.current;
    try {
      const next = await client.messages.getChannelStats({ identifier: channelId });
      if (ticket !== newest.current) return;
      setValue(next);
      setProblem(undefined);
    } catch (err) {
      if (ticket === newest.current) setProblem(problemOf(err));
    }
  }, [channelId]);
  useEffect(() => {
    const frame = requestAnimationFrame(() => void read());
    return () => cancelAnimationFrame(frame);
  }, [read, revision]);
  useEffect(() => {
    const timer = setInterval(() => void read(), IDLE_STATS_MS);
    return () => clearInterval(timer);
  }, [read]);
  return { value, problem };
}

/** Takes the next task in the channel's order (priority, dispatch, group and limit bounds) for the signed-in key. */
function TakeNext({ channel, onTaken }: { channel: Channel; onTaken: (message: Message) => void }) {
  const { client } = useSession();
  const [none, setNone] = useState(false);
  const take = useAction(async () => {
    const received = await client.messages.receiveMessages({ identifier: channel.id, maxMessages: 1 });
    const message = received.data[0]?.message;
    setNone(message === undefined);
    if (message) onTaken(message);
  });
  return (
    <section class="card take-next" aria-label="Take the next task">
      <p class="row">
        <button type="button" disabled={take.busy} onClick={() => void take.run()}>
          Take the next task
        </button>
        <span class="muted small">
          {none
            ? "Nothing to take now: no task is ready, or its group or limits have no room."
            : "This channel hands out tasks in its own order (most urgent first, within its group and limit bounds): take them in turn rather than pick one."}
        </span>
      </p>
      <ProblemBox problem={take.problem} onDismiss={take.clearProblem} />
    </section>
  );
}

function PostMessage({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const claimable = channel.mode === ChannelMode.CLAIMABLE;
  const [content, setContent] = useState("");
  const [delay, setDelay] = useState("");
  const [priority, setPriority] = useState(String(DEFAULT_PRIORITY));
  const [group, setGroup] = useState("");
  const post = useAction(async () => {
    const delaySeconds = delay.trim() === "" ? undefined : Number(delay);
    await client.messages.createMessage({
      identifier: channel.id,
      content,
      ...(delaySeconds === undefined ? {} : { delaySeconds }),
      ...(claimable && priority !== String(DEFAULT_PRIORITY) ? { priority: Number(priority) } : {}),
      ...(claimable && group.trim() !== "" ? { groupKey: group } : {}),
    });
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
        {claimable ? (
          <>
            <Field label="Priority" narrow>
              <select name="message-priority" value={priority} onChange={(e) => setPriority(e.currentTarget.value)}>
                {PRIORITIES.map((p) => (
                  <option key={p} value={String(p)}>
                    {p === 1 ? "1 (most urgent)" : p === 5 ? "5 (least)" : String(p)}
                  </option>
                ))}
              </select>
            </Field>
            <Field label="Group" narrow>
              <input name="message-group" maxLength={128} placeholder="none" value={group} onInput={(e) => setGroup(e.currentTarget.value)} />
            </Field>
          </>
        ) : null}
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
