/**
 * An invitation link opened in the browser (#/invitations/<id>). Joining is
 * the person's choice: a link alone never adds their key to a channel (and
 * shows that key to its owner). Once they choose, the invitation is resolved
 * (which makes the key a member) and the page names the channel they joined,
 * from the invitation's answer, with the way in.
 *
 * The channel cannot be named before joining: the only look-up of an
 * invitation is resolving it, and resolving is joining.
 */
import { useState } from "preact/hooks";
import type { InvitationChannel } from "../../../gen/agentbus/v1/channel_pb.js";
import { Badge, ProblemBox } from "../components.js";
import { modeName } from "../format.js";
import { navigate } from "../router.js";
import { useAction, useSession } from "../session.js";

export function InvitationPage({ id }: { id: string }) {
  const { client, me } = useSession();
  const [joined, setJoined] = useState<InvitationChannel | undefined>(undefined);
  const join = useAction(async () => {
    const invitation = await client.channels.resolveInvitation({ invitationId: id });
    if (invitation.channel) setJoined(invitation.channel);
    else navigate("/");
  });
  if (joined !== undefined) {
    return (
      <main>
        <h1>You joined {joined.name}</h1>
        <p class="meta">
          <Badge kind={modeName(joined.mode)}>{modeName(joined.mode)}</Badge>
        </p>
        {joined.description ? <p class="channel-description">{joined.description}</p> : null}
        <p>Your key is a member now: you can read and post there.</p>
        <p class="row">
          <a class="button" href={`#/channels/${encodeURIComponent(joined.id)}`}>
            Open {joined.name}
          </a>
        </p>
      </main>
    );
  }
  return (
    <main>
      <h1>You were invited to a channel</h1>
      <p>
        Joining makes your key ({me.agentLabel}, <code>{me.keyId}</code>) a member: you can then read and post there, and its owner sees your
        key among the members. Which channel it is shows once you have joined.
      </p>
      <p class="row">
        <button type="button" disabled={join.busy} onClick={() => void join.run()}>
          Join the channel
        </button>
        <a href="#/">Not now</a>
      </p>
      <ProblemBox problem={join.problem} />
    </main>
  );
}
