/**
 * The owner's A2A settings of a claimable channel (docs/decisions.md#a2a):
 * whether it is published as an agent, the card's name, description and
 * skills, and where other agents find the card.
 */
import { useState } from "preact/hooks";
import type { Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import { Field, SaveRow } from "../components.js";
import { useAction, useSession } from "../session.js";

interface SkillLine {
  id: string;
  name: string;
  description: string;
}

/** One skill per line: `id=Name: what it does`; a line that does not parse is reported by the service's answer, not here. */
export function parseSkills(text: string): SkillLine[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const eq = line.indexOf("=");
      const id = eq < 0 ? line : line.slice(0, eq).trim();
      const rest = eq < 0 ? "" : line.slice(eq + 1);
      const colon = rest.indexOf(":");
      return { id, name: (colon < 0 ? rest : rest.slice(0, colon)).trim(), description: colon < 0 ? "" : rest.slice(colon + 1).trim() };
    });
}

const skillsText = (c: Channel) => (c.a2a?.skills ?? []).map((s) => `${s.id}=${s.name}${s.description ? `: ${s.description}` : ""}`).join("\n");

export function ChannelAgent({ channel, onSaved }: { channel: Channel; onSaved: () => void }) {
  const { client } = useSession();
  const [enabled, setEnabled] = useState(channel.a2a?.enabled ?? false);
  const [name, setName] = useState(channel.a2a?.name ?? "");
  const [description, setDescription] = useState(channel.a2a?.description ?? "");
  const [skills, setSkills] = useState(skillsText(channel));
  const [saved, setSaved] = useState(false);
  const card = `${location.origin}/a2a/${channel.id}/.well-known/agent-card.json`;
  const save = useAction(async () => {
    const a2a = {
      enabled,
      ...(name.trim() === "" ? {} : { name: name.trim() }),
      ...(description.trim() === "" ? {} : { description: description.trim() }),
      skills: parseSkills(skills).map((s) => ({ ...s, tags: [], examples: [] })),
    };
    await client.channels.updateChannel({ identifier: channel.id, channel: { a2a }, updateMask: { paths: ["a2a"] } });
    setSaved(true);
    onSaved();
  });
  return (
    <form
      class="card settings"
      aria-label="A2A agent"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run();
      }}
    >
      <h3>A2A agent</h3>
      <p class="muted">
        Published, this channel is an agent other agents call over A2A with their own API key; your workers receive its tasks like any others.
      </p>
      <label class="field checkbox">
        <input type="checkbox" name="a2a-enabled" checked={enabled} onChange={(e) => (setSaved(false), setEnabled(e.currentTarget.checked))} />
        <span class="label">Published as an A2A agent</span>
      </label>
      {channel.a2a?.enabled ? (
        <p class="a2a-card">
          Card: <a href={card}>{card}</a>
        </p>
      ) : null}
      <div class="grid">
        <Field label="Agent name" hint="Empty: the channel's name.">
          <input name="a2a-name" maxLength={100} value={name} onInput={(e) => (setSaved(false), setName(e.currentTarget.value))} />
        </Field>
        <Field label="Agent description" hint="Empty: the channel's description.">
          <input name="a2a-description" maxLength={2000} value={description} onInput={(e) => (setSaved(false), setDescription(e.currentTarget.value))} />
        </Field>
      </div>
      <Field label="Skills" hint="One per line: id=Name: what it does.">
        <textarea name="a2a-skills" rows={3} value={skills} onInput={(e) => (setSaved(false), setSkills(e.currentTarget.value))} />
      </Field>
      <SaveRow label="Save agent" busy={save.busy} saved={saved} problem={save.problem} />
    </form>
  );
}

/** The owner's forwarding of a claimable channel's work to a remote A2A agent (docs/decisions.md#a2a-forward). */
export function ChannelForward({ channel, onSaved }: { channel: Channel; onSaved: () => void }) {
  const { client } = useSession();
  const [url, setUrl] = useState(channel.a2aForward?.url ?? "");
  const [headerName, setHeaderName] = useState(channel.a2aForward?.authHeader?.name ?? "");
  const [headerValue, setHeaderValue] = useState("");
  const [saved, setSaved] = useState(false);
  const save = useAction(async (stop: boolean) => {
    const a2aForward = stop || url.trim() === "" ? undefined : { url: url.trim(), ...(headerName.trim() === "" ? {} : { authHeader: { name: headerName.trim(), value: headerValue } }) };
    await client.channels.updateChannel({ identifier: channel.id, channel: { a2aForward }, updateMask: { paths: ["a2a_forward"] } });
    setSaved(true);
    setHeaderValue("");
    onSaved();
  });
  return (
    <form
      class="card settings"
      aria-label="A2A forwarding"
      onSubmit={(e) => {
        e.preventDefault();
        void save.run(false);
      }}
    >
      <h3>Forward to an A2A agent</h3>
      <p class="a2a-forward-current">
        {channel.a2aForward ? (
          <>
            Forwarded to <code>{channel.a2aForward.url}</code>
            {channel.a2aForward.authHeader ? <> with the header {channel.a2aForward.authHeader.name}</> : null}
          </>
        ) : (
          <span class="muted">Not forwarded: your own workers take its tasks.</span>
        )}
      </p>
      <div class="grid">
        <Field label="Agent URL" hint="Its card URL, or the URL its card is under.">
          <input name="a2a-forward-url" type="url" value={url} onInput={(e) => (setSaved(false), setUrl(e.currentTarget.value))} />
        </Field>
        <Field label="Header name" hint="Sent with every request to the agent, e.g. Authorization.">
          <input name="a2a-forward-header-name" value={headerName} onInput={(e) => (setSaved(false), setHeaderName(e.currentTarget.value))} />
        </Field>
        <Field label="Header value" hint="Write-only: never shown again; needed again to change the header.">
          <input name="a2a-forward-header-value" type="password" autoComplete="off" value={headerValue} onInput={(e) => (setSaved(false), setHeaderValue(e.currentTarget.value))} />
        </Field>
      </div>
      <SaveRow label="Save forwarding" busy={save.busy} saved={saved} problem={save.problem}>
        {channel.a2aForward ? (
          <button type="button" disabled={save.busy} onClick={() => void save.run(true)}>
            Stop forwarding
          </button>
        ) : null}
      </SaveRow>
    </form>
  );
}
