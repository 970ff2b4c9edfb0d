/**
 * An invitation link opened in the browser (#/invitations/<id>). Joining is
 * the person's choice: a link alone never adds their key to a channel (and
 * shows that key to its owner). The page names the channel first, from the
 * invitation's preview (which joins no one), and says when the invitation can
 * no longer be used; once they choose, the invitation is resolved (which makes
 * the key a member) and the page names the channel they joined, with the way in.
 */
import { useState } from "preact/hooks";
import { InvitationState, type InvitationChannel } from "../../../gen/agentbus/v1/channel_pb.js";
import type { Problem } from "../api.js";
import { Badge, ProblemBox, Time } from "../components.js";
import { modeName, toDate } from "../format.js";
import { navigate } from "../router.js";
import { useAction, useLoaded, useSession } from "../session.js";

const NEW_INVITATION = "Ask the channel owner for a new invitation.";

/**
 * Why an invitation the preview describes cannot be joined. The preview
 * answers these states instead of failing, so the words are the ones the
 * service refuses a join with (its error catalog), shown before the person
 * tries.
 */
const UNUSABLE: Partial<Record<InvitationState, Problem>> = {
  [InvitationState.REVOKED]: { code: "invitation_revoked", message: "The invitation was revoked", suggestion: NEW_INVITATION },
  [InvitationState.EXPIRED]: { code: "invitation_expired", message: "The invitation has expired", suggestion: NEW_INVITATION },
  [InvitationState.INVALIDATED]: {
    code: "invitation_invalidated",
    message: "The invitation's creator may no longer invite to this channel (its key was revoked or removed from the channel)",
    suggestion: "Ask the channel owner or a current member for a new invitation.",
  },
};

function ChannelFacts({ channel }: { channel: InvitationChannel }) {
  return (
    <>
      <p class="meta">
        <Badge kind={modeName(channel.mode)}>{modeName(channel.mode)}</Badge>
      </p>
      {channel.description ? <p class="channel-description">{channel.description}</p> : null}
    </>
  );
}

export function InvitationPage({ id }: { id: string }) {
  const { client, me } = useSession();
  // Once: each preview counts against the same per-address limit as joining.
  const preview = useLoaded(() => client.channels.previewInvitation({ invitationId: id }), [id]);
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
        <ChannelFacts channel={joined} />
        <p>Your key is a member now: you can read and post there.</p>
        <p class="row">
          <a class="button" href={`#/channels/${encodeURIComponent(joined.id)}`}>
            Open {joined.name}
          </a>
        </p>
      </main>
    );
  }
  if (preview.value === undefined) {
    if (preview.problem === undefined) return <main class="muted">Loading…</main>;
    return (
      <main>
        <h1>This invitation cannot be used</h1>
        <ProblemBox problem={preview.problem} />
        <p>
          <a href="#/">Go to my channels</a>
        </p>
      </main>
    );
  }
  const { channel, state, expiresAt } = preview.value;
  const unusable = UNUSABLE[state];
  return (
    <main>
      <h1>{channel ? `You were invited to ${channel.name}` : "You were invited to a channel"}</h1>
      {channel ? <ChannelFacts channel={channel} /> : null}
      {unusable ? (
        <>
          <ProblemBox problem={unusable} />
          <p>
            <a href="#/">Go to my channels</a>
          </p>
        </>
      ) : (
        <>
          <p>
            Joining makes your key ({me.agentLabel}, <code>{me.keyId}</code>) a member: you can then read and post there, and its owner sees
            your key among the members. The invitation expires <Time date={toDate(expiresAt)} />.
          </p>
          <p class="row">
            <button type="button" disabled={join.busy} onClick={() => void join.run()}>
              Join {channel ? channel.name : "the channel"}
            </button>
            <a href="#/">Not now</a>
          </p>
          <ProblemBox problem={join.problem} />
        </>
      )}
    </main>
  );
}
