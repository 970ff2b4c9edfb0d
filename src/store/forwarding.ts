/** SQL for the A2A forwarder's channels (0038_a2a_forward.sql; docs/decisions.md#a2a-forward). */
import type { ChannelA2aForward } from "../model/channels.js";
import type { ForwardingChannel, ForwardingStore } from "../ports/forwarding.js";
import type { Db } from "./db.js";

export const FORWARDING_CHANNELS_SQL = `SELECT c.id, c.a2a_forward, k.key_id, k.agent_label, k.owner_id
  FROM channels c JOIN api_keys k ON k.key_id = c.created_by_key_id
  WHERE c.a2a_forward IS NOT NULL AND c.mode = 'claimable' AND k.revoked_at IS NULL
  ORDER BY c.id`;

export class PgForwardingStore implements ForwardingStore {
  constructor(private readonly db: Db) {}

  async channels(): Promise<ForwardingChannel[]> {
    const { rows } = await this.db.query<{ id: string; a2a_forward: ChannelA2aForward; key_id: string; agent_label: string; owner_id: string }>(
      FORWARDING_CHANNELS_SQL,
      [],
      "forwarding_channels",
    );
    return rows.map((r) => ({ id: r.id, forward: r.a2a_forward, owner: { keyId: r.key_id, agentLabel: r.agent_label, ownerId: r.owner_id } }));
  }
}
