/**
 * A task's small tree (docs/decisions.md#dependencies): the messages it waits
 * for and the ones that wait for it, each with its state, read when the
 * person opens it (a list of tasks does not fetch every task's relatives).
 * A relative in another channel links there.
 */
import { useState } from "preact/hooks";
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import { Badge, ProblemBox } from "../components.js";
import { messageState } from "../format.js";
import { useLoaded, useSession } from "../session.js";

/** Parents read at most: a message names at most 100; a person reads the first few. */
const MAX_PARENTS_SHOWN = 20;

export function MessageTree({ message }: { message: Message }) {
  const [open, setOpen] = useState(false);
  if (message.dependsOn.length === 0 && message.dependentsCount === 0) return null;
  return (
    <details class="message-tree" onToggle={(e) => setOpen((e.currentTarget as unknown as { open: boolean }).open)}>
      <summary>
        Tree: waits for {message.dependsOn.length}, {message.dependentsCount} wait{message.dependentsCount === 1 ? "s" : ""} for it
      </summary>
      {open ? <Relatives message={message} /> : null}
    </details>
  );
}

function Relatives({ message }: { message: Message }) {
  const { client } = useSession();
  const parents = useLoaded(
    () => Promise.all(message.dependsOn.slice(0, MAX_PARENTS_SHOWN).map((id) => client.messages.getMessage({ messageId: id }))),
    [message.id],
  );
  const dependents = useLoaded(() => client.messages.listMessageDependents({ messageId: message.id }), [message.id]);
  return (
    <div class="tree">
      <ProblemBox problem={parents.problem ?? dependents.problem} />
      {message.dependsOn.length > 0 ? (
        <>
          <p class="small muted">Waits for</p>
          <ul class="tree-parents">{(parents.value ?? []).map((m) => <Relative key={m.id} message={m} from={message} />)}</ul>
        </>
      ) : null}
      <p class="small muted">This task</p>
      <ul>
        <Relative message={message} from={message} />
      </ul>
      {message.dependentsCount > 0 ? (
        <>
          <p class="small muted">Waiting for it</p>
          <ul class="tree-dependents">{(dependents.value?.data ?? []).map((m) => <Relative key={m.id} message={m} from={message} />)}</ul>
        </>
      ) : null}
    </div>
  );
}

function Relative({ message, from }: { message: Message; from: Message }) {
  const state = messageState(message, true);
  const text = message.content.length > 80 ? `${message.content.slice(0, 80)}…` : message.content;
  return (
    <li data-tree-message-id={message.id}>
      <Badge kind={state}>{state}</Badge> {text}{" "}
      {message.channelId !== from.channelId ? (
        <a class="small" href={`#/channels/${encodeURIComponent(message.channelId)}`}>
          its channel
        </a>
      ) : null}
      {message.result !== undefined && message.result !== "" ? <span class="muted small"> result: {message.result.slice(0, 80)}</span> : null}
    </li>
  );
}
