/**
 * Approvals (docs/decisions.md#waitpoints): the signed-in key's waitpoints
 * still waiting, read again every few seconds, each with Approve and Deny.
 * Deciding completes the waitpoint by id as its creating key (no token
 * needed) with {approved, by: this key's label}; the tasks waiting for it
 * are open work again at once.
 */
import type { Waitpoint } from "../../../gen/agentbus/v1/waitpoint_pb.js";
import { WaitpointState } from "../../../gen/agentbus/v1/waitpoint_pb.js";
import { Empty, ProblemBox, Time } from "../components.js";
import { toDate } from "../format.js";
import { useAction, useLoaded, useSession } from "../session.js";

/** How often the list is read again: a waitpoint completed by its URL elsewhere leaves it. */
const REFRESH_MS = 3_000;

export function ApprovalsPage() {
  const { client, me } = useSession();
  const list = useLoaded(() => client.waitpoints.listWaitpoints({ state: WaitpointState.WAITING, limit: 100 }), [], REFRESH_MS);
  const decide = useAction(async (id: string, approved: boolean) => {
    await client.waitpoints.resolveWaitpoint({ id, data: { approved, by: me.agentLabel } });
    list.reload();
  });
  const waiting = list.value?.data;
  return (
    <main>
      <h1>Approvals</h1>
      <p class="muted">
        Waitpoints your key created that nobody has answered yet. A task released to wait for one goes back to its workers when you approve or
        deny it (they receive {"{approved, by}"}), or when it times out. Anyone with its link can answer it too.
      </p>
      <ProblemBox problem={list.problem ?? decide.problem} />
      {waiting === undefined && list.problem === undefined ? <p class="muted">Loading…</p> : null}
      {waiting !== undefined && waiting.length === 0 ? <Empty>Nothing is waiting for an answer.</Empty> : null}
      {waiting !== undefined && waiting.length > 0 ? (
        <table class="list approvals">
          <thead>
            <tr>
              <th scope="col">Question</th>
              <th scope="col">Tasks waiting</th>
              <th scope="col" class="wide">
                Times out
              </th>
              <th scope="col">
                <span class="visually-hidden">Decision</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {waiting.map((w) => (
              <ApprovalRow key={w.id} waitpoint={w} busy={decide.busy} onDecide={(approved) => void decide.run(w.id, approved)} />
            ))}
          </tbody>
        </table>
      ) : null}
    </main>
  );
}

function ApprovalRow({ waitpoint: w, busy, onDecide }: { waitpoint: Waitpoint; busy: boolean; onDecide: (approved: boolean) => void }) {
  const question = w.description ?? "(no description)";
  return (
    <tr data-waitpoint-id={w.id}>
      <td class="question">
        {question}
        <div class="muted small">
          <code>{w.id}</code>
        </div>
      </td>
      <td class="waiting">{w.waitingMessages}</td>
      <td class="wide">
        <Time date={toDate(w.expiresAt)} />
      </td>
      <td class="actions">
        <button type="button" class="small" disabled={busy} onClick={() => onDecide(true)} aria-label={`Approve: ${question}`}>
          Approve
        </button>{" "}
        <button type="button" class="small secondary" disabled={busy} onClick={() => onDecide(false)} aria-label={`Deny: ${question}`}>
          Deny
        </button>
      </td>
    </tr>
  );
}
