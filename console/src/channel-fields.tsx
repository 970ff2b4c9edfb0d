/** The mode and access pickers the new-channel form and the settings form share. */
import { ChannelAccess, ChannelMode } from "../../gen/agentbus/v1/channel_pb.js";
import { Field } from "./components.js";

export function ModeField({ name, value, onChange }: { name: string; value: ChannelMode; onChange: (mode: ChannelMode) => void }) {
  return (
    <Field label="Mode" hint="Claimable: a work queue, each message to one worker. Broadcast: every reader sees every message.">
      <select name={name} value={String(value)} onChange={(e) => onChange(Number(e.currentTarget.value) as ChannelMode)}>
        <option value={String(ChannelMode.CLAIMABLE)}>claimable</option>
        <option value={String(ChannelMode.BROADCAST)}>broadcast</option>
      </select>
    </Field>
  );
}

export function AccessField({ name, value, onChange }: { name: string; value: ChannelAccess; onChange: (access: ChannelAccess) => void }) {
  return (
    <Field label="Access" hint="Restricted: only the owner and the members admitted.">
      <select name={name} value={String(value)} onChange={(e) => onChange(Number(e.currentTarget.value) as ChannelAccess)}>
        <option value={String(ChannelAccess.OPEN)}>open</option>
        <option value={String(ChannelAccess.RESTRICTED)}>restricted</option>
      </select>
    </Field>
  );
}
