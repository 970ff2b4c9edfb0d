/** SQL for the sandbox channel (docs/decisions.md#sandbox): its owner key, the channel and its alias, in one transaction. */
import type { NewChannel } from "../model/channels.js";
import type { SandboxOutcome, SandboxOwner, SandboxStore } from "../ports/sandbox.js";
import { insertAlias } from "./aliases.js";
import { insertChannel } from "./channels.js";
import type { Db } from "./db.js";

/** Replicas starting together take turns here, so exactly one creates the sandbox. */
const SANDBOX_LOCK = "7018141376633893236";

export class PgSandboxStore implements SandboxStore {
  constructor(private readonly db: Db) {}

  ensure(channel: NewChannel, owner: SandboxOwner, alias: string, aliasKey: string): Promise<SandboxOutcome> {
    return this.db.transaction(async () => {
      await this.db.query("SELECT pg_advisory_xact_lock($1::bigint)", [SANDBOX_LOCK]);
      const held = await this.db.query<{ owner: string }>(
        "SELECT c.created_by_key_id AS owner FROM channel_aliases a JOIN channels c ON c.id = a.channel_id WHERE a.alias = $1 OR a.alias_key = $2",
        [alias, aliasKey],
      );
      const holder = held.rows[0];
      if (holder !== undefined) return holder.owner === owner.keyId ? "exists" : "alias_taken";
      const label = await this.ownerKey(owner);
      const id = await insertChannel(this.db, channel, [], { keyId: owner.keyId, agentLabel: label, ownerId: label });
      if (id === "quota_exceeded") throw new Error("the sandbox's owner key has no channel quota to hit");
      if ((await insertAlias(this.db, { aliasTable: "channel_aliases", ownerColumn: "channel_id", ownerTable: "channels" }, id, alias, aliasKey)) === "conflict") {
        throw new Error(`the alias '${alias}' was taken inside the sandbox lock`);
      }
      return "created";
    });
  }

  /** The owner key's row (kept from an earlier start), or a new one under the first free label; its label. */
  private async ownerKey(owner: SandboxOwner): Promise<string> {
    const existing = await this.db.query<{ agent_label: string }>("SELECT agent_label FROM api_keys WHERE key_id = $1", [owner.keyId]);
    if (existing.rows[0]) return existing.rows[0].agent_label;
    for (const label of owner.agentLabels) {
      const { rows } = await this.db.query<{ key_id: string }>(
        `INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id, label_key) VALUES ($1, $2, $3, $3, $4)
         ON CONFLICT DO NOTHING RETURNING key_id`,
        [owner.keyId, owner.secretHash, label, owner.labelKey(label)],
      );
      if (rows[0]) return label;
    }
    throw new Error("every label the sandbox's owner key may take is held by another key");
  }
}
