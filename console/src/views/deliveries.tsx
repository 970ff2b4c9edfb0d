/** The channel's webhook delivery log, one row per attempt (owner only). */
import { WebhookDeliveryStatus, type Channel } from "../../../gen/agentbus/v1/channel_pb.js";
import { Badge, Empty, ProblemBox, Time } from "../components.js";
import { toDate } from "../format.js";
import { useLoaded, useSession } from "../session.js";

const STATUS: Record<WebhookDeliveryStatus, string> = {
  [WebhookDeliveryStatus.UNSPECIFIED]: "unknown",
  [WebhookDeliveryStatus.DELIVERED]: "delivered",
  [WebhookDeliveryStatus.FAILED]: "failed",
  [WebhookDeliveryStatus.DEFERRED]: "deferred",
};

export function Deliveries({ channel }: { channel: Channel }) {
  const { client } = useSession();
  const log = useLoaded(() => client.channels.listWebhookDeliveries({ identifier: channel.id, limit: 100 }), [channel.id], 5_000);
  const rows = log.value?.data ?? [];
  return (
    <section class="card" aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading">Webhook deliveries</h2>
      <p class="muted">Every attempt to deliver this channel's events to its webhook in the last 7 days, newest first.</p>
      <ProblemBox problem={log.problem} />
      {log.value !== undefined && rows.length === 0 ? <Empty>No deliveries yet. Set a webhook URL under Settings to have events pushed.</Empty> : null}
      {rows.length > 0 ? (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Event</th>
              <th scope="col" class="wide">
                Attempt
              </th>
              <th scope="col">Outcome</th>
              <th scope="col">Took</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((d) => (
              <tr key={d.id}>
                <td>
                  <Time date={toDate(d.attemptedAt)} />
                </td>
                <td>
                  {d.event}
                  {d.messageId ? <div class="muted small">message {d.messageId}</div> : null}
                </td>
                <td class="wide">{d.attempt}</td>
                <td>
                  <Badge kind={STATUS[d.status]}>{STATUS[d.status]}</Badge> {d.responseStatus !== undefined ? `HTTP ${d.responseStatus}` : ""}
                  {d.error ? <div class="muted small">{d.error}</div> : null}
                  {d.nextAttemptAt ? (
                    <div class="muted small">
                      next try <Time date={toDate(d.nextAttemptAt)} />
                    </div>
                  ) : null}
                </td>
                <td>{d.durationMs} ms</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
