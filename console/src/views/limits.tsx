/**
 * The key's shared limits (docs/decisions.md#shared-limits): each with what
 * is in flight of its bound and what its rate window used, read again every
 * few seconds; creating and deleting them. Channels name them in their
 * settings.
 */
import { useState } from "preact/hooks";
import type { Limit } from "../../../gen/agentbus/v1/limit_pb.js";
import { Empty, Field, ProblemBox, Time } from "../components.js";
import { toDate } from "../format.js";
import { useAction, useLoaded, useSession } from "../session.js";

/** How often the live use is read again. */
const REFRESH_MS = 2_000;

export const inFlightText = (l: Limit): string => (l.maxInFlight === undefined ? `${l.inFlight} (no bound)` : `${l.inFlight} of ${l.maxInFlight}`);
export const windowText = (l: Limit): string => (l.rate === undefined ? "no rate" : `${l.usedInWindow} of ${l.rate.count} per ${l.rate.perSeconds} s`);

export function LimitsPage() {
  const { client } = useSession();
  const list = useLoaded(() => client.limits.listLimits({}), [], REFRESH_MS);
  const remove = useAction(async (name: string) => {
    await client.limits.deleteLimit({ name });
    list.reload();
  });
  const limits = list.value?.data;
  return (
    <main>
      <h1>Limits</h1>
      <p class="muted">
        A shared limit bounds the work in flight at once and the deliveries per time window across every channel and message that names it: a
        model provider's quota, say. A worker is handed a message only while all its limits have room. Name your limits in a channel's Settings.
      </p>
      <CreateLimit onCreated={list.reload} />
      <ProblemBox problem={list.problem ?? remove.problem} />
      {limits === undefined && list.problem === undefined ? <p class="muted">Loading…</p> : null}
      {limits !== undefined && limits.length === 0 ? <Empty>You have no limits yet. Create one above.</Empty> : null}
      {limits !== undefined && limits.length > 0 ? (
        <table class="list limits">
          <thead>
            <tr>
              <th scope="col">Limit</th>
              <th scope="col">
                In flight <span class="live" title="Read again every few seconds">live</span>
              </th>
              <th scope="col">Rate window</th>
              <th scope="col" class="wide">
                Created
              </th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {limits.map((l) => (
              <tr key={l.name} data-limit-name={l.name}>
                <td class="name">
                  <code>{l.name}</code>
                </td>
                <td class="in-flight">{inFlightText(l)}</td>
                <td class="window">{windowText(l)}</td>
                <td class="wide">
                  <Time date={toDate(l.createdAt)} />
                </td>
                <td>
                  <button type="button" class="small secondary" disabled={remove.busy} onClick={() => void remove.run(l.name)} aria-label={`Delete ${l.name}`}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </main>
  );
}

function CreateLimit({ onCreated }: { onCreated: () => void }) {
  const { client } = useSession();
  const [name, setName] = useState("");
  const [maxInFlight, setMaxInFlight] = useState("");
  const [count, setCount] = useState("");
  const [perSeconds, setPerSeconds] = useState("60");
  const create = useAction(async () => {
    await client.limits.createLimit({
      name,
      ...(maxInFlight.trim() === "" ? {} : { maxInFlight: Number(maxInFlight) }),
      ...(count.trim() === "" ? {} : { rate: { count: Number(count), perSeconds: Number(perSeconds) } }),
    });
    setName("");
    setMaxInFlight("");
    setCount("");
    onCreated();
  });
  return (
    <form
      class="card"
      aria-label="New limit"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <h2>New limit</h2>
      <div class="grid">
        <Field label="Name" hint="Letters, digits and . _ - : (e.g. openai:gpt-4o).">
          <input name="limit-name" required maxLength={64} value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
        <Field label="Most in flight" hint="Messages holding it at once. Empty: no bound.">
          <input name="limit-max-in-flight" type="number" min={1} max={100000} value={maxInFlight} onInput={(e) => setMaxInFlight(e.currentTarget.value)} />
        </Field>
        <Field label="Deliveries per window" hint="Empty: no rate bound.">
          <input name="limit-rate-count" type="number" min={1} max={1000000} value={count} onInput={(e) => setCount(e.currentTarget.value)} />
        </Field>
        <Field label="Window (seconds)">
          <input name="limit-rate-seconds" type="number" min={1} max={86400} required={count.trim() !== ""} value={perSeconds} onInput={(e) => setPerSeconds(e.currentTarget.value)} />
        </Field>
      </div>
      <p class="muted small">Give a bound on what is in flight, a rate, or both.</p>
      <button type="submit" disabled={create.busy}>
        Create limit
      </button>
      <ProblemBox problem={create.problem} />
    </form>
  );
}
