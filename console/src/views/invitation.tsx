/**
 * An invitation link opened in the browser (#/invitations/<id>): once signed
 * in, the invitation is resolved (which makes the key a member) and the
 * channel opens.
 */
import { useEffect, useState } from "preact/hooks";
import { problemOf, type Problem } from "../api.js";
import { ProblemBox } from "../components.js";
import { navigate } from "../router.js";
import { useSession } from "../session.js";

export function InvitationPage({ id }: { id: string }) {
  const { client } = useSession();
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  useEffect(() => {
    let live = true;
    client.channels.resolveInvitation({ invitationId: id }).then(
      (invitation) => {
        if (live && invitation.channel) navigate(`/channels/${invitation.channel.id}`);
      },
      (err: unknown) => live && setProblem(problemOf(err)),
    );
    return () => {
      live = false;
    };
  }, [id]);
  return (
    <main>
      <h1>Joining a channel</h1>
      {problem ? (
        <>
          <ProblemBox problem={problem} />
          <p>
            <a href="#/">Go to my channels</a>
          </p>
        </>
      ) : (
        <p class="muted">Opening the invitation…</p>
      )}
    </main>
  );
}
