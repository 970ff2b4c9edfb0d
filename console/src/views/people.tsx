/** Who may use a restricted channel: members, invitations and access requests (owner only). */
import { useState } from "preact/hooks";
import { InvitationState, type Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import { Empty, Field, ProblemBox, Time } from "../components.js";
import { toDate } from "../format.js";
import { useAction, useLoaded, useSession } from "../session.js";

const PENDING_REFRESH_MS = 3_000;

export const invitationLink = (id: string): string => `${location.origin}/#/invitations/${encodeURIComponent(id)}`;

const INVITATION_STATES: Record<InvitationState, string> = {
  [InvitationState.UNSPECIFIED]: "unknown",
  [InvitationState.ACTIVE]: "active",
  [InvitationState.REVOKED]: "revoked",
  [InvitationState.EXPIRED]: "expired",
  [InvitationState.INVALIDATED]: "invalidated",
};

export function People({ channel }: { channel: Channel }) {
  return (
    <>
      <AccessRequests channel={channel} />
      <Members channel={channel} />
      <Invitations channel={channel} />
    </>
  );
}

function AccessRequests({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const requests = useLoaded(() => client.channels.listAccessRequests({ identifier: channel.id }), [channel.id], PENDING_REFRESH_MS);
  const decide = useAction(async (requestId: string, approve: boolean) => {
    if (approve) await client.channels.approveAccessRequest({ identifier: channel.id, requestId });
    else await client.channels.denyAccessRequest({ identifier: channel.id, requestId });
    requests.reload();
  });
  const pending = requests.value?.data ?? [];
  return (
    <section class="card" aria-labelledby="requests-heading">
      <h2 id="requests-heading">Access requests</h2>
      <ProblemBox problem={requests.problem ?? decide.problem} />
      {requests.value !== undefined && pending.length === 0 ? <Empty>No one is waiting for access.</Empty> : null}
      {pending.length > 0 ? (
        <ul class="plain">
          {pending.map((r) => (
            <li key={r.id} class="request">
              <div>
                {/* Named as members are: the label people know, the key id (which adding a member takes) on hover. */}
                <span class="requester-label" title={`Key ${r.requesterKeyId}`}>
                  {r.requesterLabel || r.requesterKeyId}
                </span>{" "}
                asked <Time date={toDate(r.createdAt)} />
                {r.reason ? <p class="quote">{r.reason}</p> : null}
              </div>
              <div class="row">
                <button type="button" disabled={decide.busy} onClick={() => void decide.run(r.id, true)} aria-label={`Approve ${r.requesterLabel || r.requesterKeyId}`}>
                  Approve
                </button>
                <button type="button" class="secondary" disabled={decide.busy} onClick={() => void decide.run(r.id, false)} aria-label={`Deny ${r.requesterLabel || r.requesterKeyId}`}>
                  Deny
                </button>
              </div>
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}

function Members({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const [keyId, setKeyId] = useState("");
  const members = useLoaded(() => client.channels.listMembers({ identifier: channel.id }), [channel.id], PENDING_REFRESH_MS);
  const add = useAction(async () => {
    await client.channels.addMember({ identifier: channel.id, keyId: keyId.trim() });
    setKeyId("");
    members.reload();
  });
  const remove = useAction(async (memberKeyId: string) => {
    await client.channels.removeMember({ identifier: channel.id, keyId: memberKeyId });
    members.reload();
  });
  return (
    <section class="card" aria-labelledby="members-heading">
      <h2 id="members-heading">Members</h2>
      <ProblemBox problem={members.problem ?? remove.problem} />
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Member</th>
            <th scope="col">Since</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {(members.value?.data ?? []).map((m) => (
            <tr key={m.keyId}>
              <td>
                {/* The label is who people know; the key id, which adding and removing take, is there on hover. */}
                <span class="member-label" title={`Key ${m.keyId}`}>
                  {m.agentLabel || m.keyId}
                </span>
                {m.keyId === channel.createdByKeyId ? <span class="muted"> (owner)</span> : null}
              </td>
              <td>
                <Time date={toDate(m.grantedAt)} />
              </td>
              <td>
                {m.keyId === channel.createdByKeyId ? null : (
                  <button type="button" class="small secondary" disabled={remove.busy} onClick={() => void remove.run(m.keyId)} aria-label={`Remove ${m.agentLabel || m.keyId}`}>
                    Remove
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="row"
        aria-label="Add a member"
        onSubmit={(e) => {
          e.preventDefault();
          void add.run();
        }}
      >
        <Field label="Add a member by key id" hint="The part of their key before the dot (GET /v1/keys/me shows it).">
          <input name="member-key-id" required value={keyId} onInput={(e) => setKeyId(e.currentTarget.value)} />
        </Field>
        <button type="submit" disabled={add.busy}>
          Add
        </button>
      </form>
      <ProblemBox problem={add.problem} />
    </section>
  );
}

function Invitations({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const [copied, setCopied] = useState<string | undefined>(undefined);
  const invitations = useLoaded(() => client.channels.listInvitations({ identifier: channel.id, limit: 50 }), [channel.id]);
  const create = useAction(async () => {
    await client.channels.createInvitation({ identifier: channel.id });
    invitations.reload();
  });
  const revoke = useAction(async (invitationId: string) => {
    await client.channels.revokeInvitation({ invitationId });
    invitations.reload();
  });
  const copy = async (id: string) => {
    await navigator.clipboard?.writeText(invitationLink(id));
    setCopied(id);
  };
  const list = invitations.value?.data ?? [];
  return (
    <section class="card" aria-labelledby="invitations-heading">
      <h2 id="invitations-heading">Invitations</h2>
      <p class="muted">An invitation link lets anyone with a key join for 24 hours. Whoever opens it in a browser is asked for a key, then joins.</p>
      <button type="button" disabled={create.busy} onClick={() => void create.run()}>
        Create invitation
      </button>
      <ProblemBox problem={invitations.problem ?? create.problem ?? revoke.problem} />
      {invitations.value !== undefined && list.length === 0 ? <Empty>No invitations yet.</Empty> : null}
      {list.length > 0 ? (
        <ul class="plain">
          {list.map((i) => (
            <li key={i.id} class="invitation">
              <input class="link-field" readOnly value={invitationLink(i.id)} aria-label="Invitation link" />
              <span class={`badge badge-${INVITATION_STATES[i.state]}`}>{INVITATION_STATES[i.state]}</span>
              <span class="muted small">
                used {i.uses}×, expires <Time date={toDate(i.expiresAt)} />
              </span>
              {i.state === InvitationState.ACTIVE ? (
                <span class="row">
                  <button type="button" class="small" onClick={() => void copy(i.id)}>
                    {copied === i.id ? "Copied" : "Copy link"}
                  </button>
                  <button type="button" class="small secondary" disabled={revoke.busy} onClick={() => void revoke.run(i.id)}>
                    Revoke
                  </button>
                </span>
              ) : null}
            </li>
          ))}
        </ul>
      ) : null}
    </section>
  );
}
