/**
 * An invitation link opened in the browser (#/invitations/<id>). Joining is
 * the person's choice: a link alone never adds their key to a channel (and
 * shows that key to its owner). Once they choose, the invitation is resolved
 * (which makes the key a member) and the channel opens.
 */
import { ProblemBox } from "../components.js";
import { navigate } from "../router.js";
import { useAction, useSession } from "../session.js";

export function InvitationPage({ id }: { id: string }) {
  const { client, me } = useSession();
  const join = useAction(async () => {
    const invitation = await client.channels.resolveInvitation({ invitationId: id });
    if (invitation.channel) navigate(`/channels/${invitation.channel.id}`);
  });
  return (
    <main>
      <h1>You were invited to a channel</h1>
      <p>
        Joining makes your key (<code>{me.keyId}</code>, {me.agentLabel}) a member: you can then read and post there, and its owner sees your key
        among the members.
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
