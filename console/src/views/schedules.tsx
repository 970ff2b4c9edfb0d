/**
 * A channel's schedules (docs/decisions.md#schedules): each with its cron,
 * time zone, next tick, runs and last error; creating one, pausing,
 * resuming and deleting (the creator's or, for any of them, the owner's).
 */
import { useState } from "preact/hooks";
import type { Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import type { Schedule } from "../../../gen/agentbus/v1/schedule_pb.js";
import { Empty, Field, ProblemBox, Time } from "../components.js";
import { toDate } from "../format.js";
import { useAction, useLoaded, useSession } from "../session.js";

/** How often the list is read again: next ticks and runs move on their own. */
const REFRESH_MS = 5_000;

export function Schedules({ channel, owner }: { channel: Channel; owner: boolean }) {
  const { client, me } = useSession();
  const list = useLoaded(() => client.schedules.listSchedules({ channel: channel.id }), [channel.id], REFRESH_MS);
  const change = useAction(async (id: string, paused: boolean) => {
    await client.schedules.updateSchedule({ id, update: { paused }, updateMask: { paths: ["paused"] } });
    list.reload();
  });
  const remove = useAction(async (id: string) => {
    await client.schedules.deleteSchedule({ id });
    list.reload();
  });
  const schedules = list.value?.data;
  const mayChange = (s: Schedule) => owner || s.createdByKeyId === me.keyId;
  return (
    <section class="card" aria-labelledby="schedules-heading">
      <h2 id="schedules-heading">Schedules</h2>
      <p class="muted">Each schedule posts its message to this channel at every tick of its cron expression, once per tick, as the key that created it.</p>
      <CreateSchedule channel={channel} onCreated={list.reload} />
      <ProblemBox problem={list.problem ?? change.problem ?? remove.problem} />
      {schedules !== undefined && schedules.length === 0 ? <Empty>No schedules yet.</Empty> : null}
      {schedules !== undefined && schedules.length > 0 ? (
        <table class="list schedules">
          <thead>
            <tr>
              <th scope="col">Cron</th>
              <th scope="col">Posts</th>
              <th scope="col">Next tick</th>
              <th scope="col" class="wide">
                Runs
              </th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {schedules.map((s) => (
              <tr key={s.id} data-schedule-id={s.id}>
                <td class="cron">
                  <code>{s.cron}</code> <span class="muted small">{s.timezone}</span>
                </td>
                <td class="content">{s.message?.content}</td>
                <td class="next">{s.paused ? <span class="muted">paused</span> : s.nextRunAt ? <Time date={toDate(s.nextRunAt)} /> : "never"}</td>
                <td class="wide">
                  {s.runs}
                  {s.lastError ? <span class="muted small"> (last: {s.lastError})</span> : null}
                </td>
                <td class="actions">
                  {mayChange(s) ? (
                    <>
                      <button type="button" class="small secondary" disabled={change.busy} onClick={() => void change.run(s.id, !s.paused)}>
                        {s.paused ? "Resume" : "Pause"}
                      </button>{" "}
                      <button type="button" class="small secondary" disabled={remove.busy} onClick={() => void remove.run(s.id)} aria-label={`Delete schedule ${s.cron}`}>
                        Delete
                      </button>
                    </>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

function CreateSchedule({ channel, onCreated }: { channel: Channel; onCreated: () => void }) {
  const { client } = useSession();
  const [cron, setCron] = useState("");
  const [timezone, setTimezone] = useState(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
  const [content, setContent] = useState("");
  const create = useAction(async () => {
    await client.schedules.createSchedule({ channel: channel.id, cron, timezone, message: { content } });
    setCron("");
    setContent("");
    onCreated();
  });
  return (
    <form
      aria-label="New schedule"
      onSubmit={(e) => {
        e.preventDefault();
        void create.run();
      }}
    >
      <div class="grid">
        <Field label="Cron" hint="minute hour day month weekday, e.g. 0 9 * * 1-5; six fields with seconds first.">
          <input name="schedule-cron" required maxLength={256} value={cron} onInput={(e) => setCron(e.currentTarget.value)} />
        </Field>
        <Field label="Time zone" hint="An IANA name, e.g. Europe/Berlin.">
          <input name="schedule-timezone" required maxLength={64} value={timezone} onInput={(e) => setTimezone(e.currentTarget.value)} />
        </Field>
        <Field label="Message" hint="What each tick posts.">
          <input name="schedule-content" required value={content} onInput={(e) => setContent(e.currentTarget.value)} />
        </Field>
      </div>
      <button type="submit" disabled={create.busy}>
        Create schedule
      </button>
      <ProblemBox problem={create.problem} />
    </form>
  );
}
