/**
 * A message's timeline and its trace (docs/decisions.md#trace-context): what
 * happened to it, from what the message records (posted, its deliveries,
 * progress, waits, cancellation, acknowledgement, result, how it ended), and
 * the other messages of its trace, a hand-off chain across channels, read
 * when the person opens it.
 */
import { useState } from "preact/hooks";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import { Badge, ProblemBox, Time } from "../components.js";
import { authorName, messageState, refName, toDate } from "../format.js";
import { useLoaded, useSession } from "../session.js";

interface Step {
  at: Date | undefined;
  what: string;
  kind: string;
}

/** The steps the message records, in time order (a step without a time keeps its place). */
export function timelineOf(message: Message): Step[] {
  const state = messageState(message, true);
  const steps: Step[] = [{ at: toDate(message.createdAt), what: `posted by ${authorName(message)}`, kind: "posted" }];
  if (message.deliveryCount > 0) {
    const last = message.claimedBy ? ` (last to ${refName(message.claimedBy)})` : "";
    steps.push({ at: toDate(message.claimedAt), what: `delivered ${message.deliveryCount} time${message.deliveryCount === 1 ? "" : "s"}${last}`, kind: "delivered" });
  }
  if (message.progress) steps.push({ at: toDate(message.progress.updatedAt), what: `progress${message.progress.text ? `: ${message.progress.text.slice(-80)}` : ""}`, kind: "progress" });
  if (message.waitpoint) steps.push({ at: undefined, what: message.waitpoint.timedOut ? "its waitpoint timed out" : message.waitpoint.data ? "its waitpoint was completed" : "waits for a waitpoint", kind: "waitpoint" });
  if (message.cancelRequested) steps.push({ at: undefined, what: `${state === "cancelled" ? "cancelled" : "cancel requested"}${message.cancelReason ? `: ${message.cancelReason}` : ""}`, kind: "cancel" });
  for (const ack of message.acknowledgedBy) steps.push({ at: toDate(ack.occurredAt), what: `acknowledged by ${refName(ack)}`, kind: "acknowledged" });
  if (message.result !== undefined) steps.push({ at: undefined, what: `result: ${message.result.slice(0, 80)}${message.result.length > 80 ? "…" : ""}`, kind: "result" });
  if (state === "dead-lettered" || state === "expired") steps.push({ at: undefined, what: state, kind: state });
  return steps;
}

export function MessageTimeline({ message }: { message: Message }) {
  const steps = timelineOf(message);
  const traceId = message.trace?.traceparent.slice(3, 35);
  return (
    <>
      <details class="message-timeline">
        <summary>Timeline</summary>
        <ol class="timeline">
          {steps.map((s, i) => (
            <li key={i} data-step={s.kind}>
              {s.at ? <Time date={s.at} /> : null} {s.what}
            </li>
          ))}
        </ol>
      </details>
      {traceId ? <MessageTrace message={message} traceId={traceId} /> : null}
    </>
  );
}

function MessageTrace({ message, traceId }: { message: Message; traceId: string }) {
  const [open, setOpen] = useState(false);
  return (
    <details class="message-trace" onToggle={(e) => setOpen((e.currentTarget as unknown as { open: boolean }).open)}>
      <summary>
        Trace <code>{traceId.slice(0, 8)}…</code>
      </summary>
      {open ? <TraceMessages message={message} traceId={traceId} /> : null}
    </details>
  );
}

function TraceMessages({ message, traceId }: { message: Message; traceId: string }) {
  const { client } = useSession();
  const trace = useLoaded(() => client.messages.listTraceMessages({ traceId }), [traceId]);
  return (
    <div class="trace">
      <ProblemBox problem={trace.problem} />
      <p class="small muted">
        The messages of trace <code>{traceId}</code> you may read, oldest first: the hand-offs this one belongs to.
      </p>
      <ol class="trace-messages">
        {(trace.value?.data ?? []).map((m) => {
          const state = messageState(m, true);
          return (
            <li key={m.id} data-trace-message-id={m.id} class={m.id === message.id ? "current" : undefined}>
              <Badge kind={state}>{state}</Badge> {m.content.length > 80 ? `${m.content.slice(0, 80)}…` : m.content}{" "}
              <a class="small" href={`#/channels/${encodeURIComponent(m.channelId)}`}>
                {m.id === message.id ? "this message" : "its channel"}
              </a>
            </li>
          );
        })}
      </ol>
    </div>
  );
}
