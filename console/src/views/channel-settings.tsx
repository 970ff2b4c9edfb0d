/** The owner's settings form: only what changed is sent, named in the update mask. */
import { useState } from "preact/hooks";
import { ChannelDispatch, ChannelMode, type Channel, type ChannelAccess } from "../../../gen/agentbus/v1/channel_pb.js";
import { AccessField, ModeField } from "../channel-fields.js";
import { Field, ProblemBox, SaveRow } from "../components.js";
import { useAction, useLoaded, useSession } from "../session.js";

interface Form {
  name: string;
  description: string;
  mode: ChannelMode;
  access: ChannelAccess;
  discoverable: boolean;
  retentionDays: string;
  maxMessages: string;
  maxWritesPerMinute: string;
  maxDeliveries: string;
  deadLetterChannel: string;
  groupConcurrency: string;
  dispatch: ChannelDispatch;
  priorityAgingSeconds: string;
  /** The shared limits it names, sorted (the order means nothing). */
  limits: string[];
  webhookUrl: string;
  webhookSecret: string;
}

const text = (n: number | undefined) => (n === undefined ? "" : String(n));

function formOf(c: Channel): Form {
  return {
    name: c.name,
    description: c.description,
    mode: c.mode,
    access: c.access,
    discoverable: c.discoverable,
    retentionDays: String(c.retentionDays),
    maxMessages: text(c.maxMessages),
    maxWritesPerMinute: text(c.maxWritesPerMinute),
    maxDeliveries: text(c.maxDeliveries),
    deadLetterChannel: c.deadLetterChannelId ?? "",
    groupConcurrency: text(c.groupConcurrency),
    // A channel from before dispatch existed says nothing: it is fifo.
    dispatch: c.dispatch === ChannelDispatch.FAIR ? ChannelDispatch.FAIR : ChannelDispatch.FIFO,
    priorityAgingSeconds: text(c.priorityAgingSeconds),
    limits: [...c.limits].sort(),
    webhookUrl: "",
    webhookSecret: "",
  };
}

/** "" clears an optional number (sent in the mask without a value); anything else must be a whole number. */
const numberOrClear = (value: string): number | undefined => (value.trim() === "" ? undefined : Number(value));

export function ChannelSettings({ channel, onSaved }: { channel: Channel; onSaved: () => void }) {
  const { client } = useSession();
  const [form, setForm] = useState<Form>(() => formOf(channel));
  // The key's limits, to choose from: a channel names its owner's.
  const owned = useLoaded(() => client.limits.listLimits({}), []);
  const [saved, setSaved] = useState(false);
  const set = <K extends keyof Form>(key: K, value: Form[K]) => {
    setSaved(false);
    setForm({ ...form, [key]: value });
  };
  const save = useAction(async () => {
    const before = formOf(channel);
    const paths: string[] = [];
    const update: Record<string, unknown> = {};
    const change = (path: string, field: string, value: unknown) => {
      paths.push(path);
      if (value !== undefined) update[field] = value;
    };
    if (form.name !== before.name) change("name", "name", form.name);
    if (form.description !== before.description) change("description", "description", form.description);
    if (form.mode !== before.mode) change("mode", "mode", form.mode);
    if (form.access !== before.access) change("access", "access", form.access);
    if (form.discoverable !== before.discoverable) change("discoverable", "discoverable", form.discoverable);
    if (form.retentionDays !== before.retentionDays) change("retention_days", "retentionDays", numberOrClear(form.retentionDays));
    if (form.maxMessages !== before.maxMessages) change("max_messages", "maxMessages", numberOrClear(form.maxMessages));
    if (form.maxWritesPerMinute !== before.maxWritesPerMinute) change("max_writes_per_minute", "maxWritesPerMinute", numberOrClear(form.maxWritesPerMinute));
    if (form.maxDeliveries !== before.maxDeliveries) change("max_deliveries", "maxDeliveries", numberOrClear(form.maxDeliveries));
    if (form.deadLetterChannel !== before.deadLetterChannel) change("dead_letter_channel", "deadLetterChannel", form.deadLetterChannel || undefined);
    if (form.groupConcurrency !== before.groupConcurrency) change("group_concurrency", "groupConcurrency", numberOrClear(form.groupConcurrency));
    if (form.dispatch !== before.dispatch) change("dispatch", "dispatch", form.dispatch);
    if (form.priorityAgingSeconds !== before.priorityAgingSeconds) change("priority_aging_seconds", "priorityAgingSeconds", numberOrClear(form.priorityAgingSeconds));
    if (form.limits.join("\n") !== before.limits.join("\n")) change("limits", "limits", form.limits);
    if (form.webhookUrl !== "") change("webhook_url", "webhookUrl", form.webhookUrl);
    if (form.webhookSecret !== "") change("webhook_secret", "webhookSecret", form.webhookSecret);
    if (paths.length === 0) {
      setSaved(true);
      return;
    }
    await client.channels.updateChannel({ identifier: channel.id, channel: update, updateMask: { paths } });
    setSaved(true);
    onSaved();
  });
  return (
    <form
      class="card settings"
      aria-label="Channel settings"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <Field label="Name">
        <input name="name" required maxLength={128} value={form.name} onInput={(e) => set("name", e.currentTarget.value)} />
      </Field>
      <Field label="Description">
        <input name="description" maxLength={2000} value={form.description} onInput={(e) => set("description", e.currentTarget.value)} />
      </Field>
      <div class="grid">
        <ModeField name="mode" value={form.mode} onChange={(mode) => set("mode", mode)} />
        <AccessField name="access" value={form.access} onChange={(access) => set("access", access)} />
        <label class="field checkbox">
          <input type="checkbox" name="discoverable" checked={form.discoverable} onChange={(e) => set("discoverable", e.currentTarget.checked)} />
          <span class="label">Listed under Discover</span>
        </label>
      </div>
      <div class="grid">
        <Field label="Message TTL" hint="Set when the channel is created.">
          <input name="ttl" value={`${channel.ttlSeconds} s`} readOnly />
        </Field>
        <Field label="History kept (days)">
          <input name="retention-days" type="number" min={1} value={form.retentionDays} onInput={(e) => set("retentionDays", e.currentTarget.value)} />
        </Field>
        <Field label="Most messages kept" hint="Empty: no limit.">
          <input name="max-messages" type="number" min={1} value={form.maxMessages} onInput={(e) => set("maxMessages", e.currentTarget.value)} />
        </Field>
        <Field label="Writes per minute" hint="Empty: no limit.">
          <input name="max-writes" type="number" min={1} value={form.maxWritesPerMinute} onInput={(e) => set("maxWritesPerMinute", e.currentTarget.value)} />
        </Field>
        <Field label="Max deliveries" hint="Then to the dead-letter channel. Empty: no limit.">
          <input name="max-deliveries" type="number" min={1} value={form.maxDeliveries} onInput={(e) => set("maxDeliveries", e.currentTarget.value)} />
        </Field>
        <Field label="Dead-letter channel" hint="Id, alias or name of one of your channels.">
          <input name="dead-letter-channel" value={form.deadLetterChannel} onInput={(e) => set("deadLetterChannel", e.currentTarget.value)} />
        </Field>
      </div>
      {form.mode === ChannelMode.CLAIMABLE ? (
        <fieldset class="dispatch-settings">
          <legend>Groups, priorities and limits</legend>
          <div class="grid">
            <Field label="Group concurrency" hint="Messages of one group in flight at once; 1 works each group strictly in order. Empty: no bound.">
              <input
                name="group-concurrency"
                type="number"
                min={1}
                max={1000}
                value={form.groupConcurrency}
                onInput={(e) => set("groupConcurrency", e.currentTarget.value)}
              />
            </Field>
            <Field label="Dispatch" hint="Fifo: oldest open work first. Fair: groups take turns, so one large group cannot starve the rest.">
              <select name="dispatch" value={String(form.dispatch)} onChange={(e) => set("dispatch", Number(e.currentTarget.value) as ChannelDispatch)}>
                <option value={String(ChannelDispatch.FIFO)}>fifo</option>
                <option value={String(ChannelDispatch.FAIR)}>fair</option>
              </select>
            </Field>
            <Field label="Priority aging (s)" hint="A waiting message counts one level more urgent per this many seconds. Empty: priorities never age.">
              <input
                name="priority-aging"
                type="number"
                min={1}
                max={86400}
                value={form.priorityAgingSeconds}
                onInput={(e) => set("priorityAgingSeconds", e.currentTarget.value)}
              />
            </Field>
          </div>
          <LimitChoice
            chosen={form.limits}
            available={[...new Set([...(owned.value?.data.map((l) => l.name) ?? []), ...channel.limits])].sort()}
            onChange={(limits) => set("limits", limits)}
          />
          <ProblemBox problem={owned.problem} />
        </fieldset>
      ) : null}
      {/* The service shows the URL to the owner only, and the secret to no one: there is none to show here. */}
      <p class="webhook-current">
        Webhook: {channel.webhookUrl ? <code>{channel.webhookUrl}</code> : <span class="muted">no webhook</span>}
      </p>
      <div class="grid">
        <Field label="Webhook URL" hint="Leave empty to keep the current one.">
          <input name="webhook-url" type="url" value={form.webhookUrl} onInput={(e) => set("webhookUrl", e.currentTarget.value)} />
        </Field>
        <Field label="Webhook secret" hint="Write-only: never shown again.">
          <input name="webhook-secret" type="password" autoComplete="off" value={form.webhookSecret} onInput={(e) => set("webhookSecret", e.currentTarget.value)} />
        </Field>
      </div>
      <SaveRow label="Save settings" busy={save.busy} saved={saved} problem={save.problem} />
    </form>
  );
}

/** The shared limits every message delivered from the channel holds: a checkbox per limit of the key's. */
function LimitChoice({ chosen, available, onChange }: { chosen: string[]; available: string[]; onChange: (limits: string[]) => void }) {
  const toggle = (name: string, on: boolean) => onChange(on ? [...chosen, name].sort() : chosen.filter((n) => n !== name));
  return (
    <div class="limit-choice" role="group" aria-label="Shared limits">
      <span class="label">Shared limits</span>
      {available.length === 0 ? (
        <p class="muted small">
          You have no limits yet: <a href="#/limits">create one</a> to bound this channel's work in flight or its deliveries per minute.
        </p>
      ) : (
        <>
          <div class="row">
            {available.map((name) => (
              <label key={name} class="field checkbox">
                <input type="checkbox" name="limit" value={name} checked={chosen.includes(name)} onChange={(e) => toggle(name, e.currentTarget.checked)} />
                <span>
                  <code>{name}</code>
                </span>
              </label>
            ))}
          </div>
          <span class="hint">
            Every message delivered from this channel holds each one while in flight. <a href="#/limits">Manage limits</a>
          </span>
        </>
      )}
    </div>
  );
}
