/** SQL for api_keys. */
import type { KeyRecord, NewKey } from "../model/keys.js";
import type { KeyStore } from "../ports/keys.js";
import { isKeyScope, type KeyScope, type KeyScopes } from "../model/scopes.js";
import type { Micros } from "../model/time.js";
import { ensureDefaultActor } from "./actors.js";
import type { Db } from "./db.js";

interface KeyRow {
  key_id: string;
  secret_hash: Buffer;
  agent_label: string;
  owner_id: string;
  created_at: Micros;
  revoked_at: Micros | null;
  scopes: string[] | null;
}

/** A stored scope list; names this version does not know (a newer replica's) are not held here. */
const scopesOf = (stored: string[] | null): KeyScopes => (stored === null ? null : stored.filter(isKeyScope));

const UNIQUE_VIOLATION = "23505";

export class PgKeyStore implements KeyStore {
  constructor(private readonly db: Db) {}

  /**
   * Inserts the key and its default actor (named after the agent label)
   * atomically. The unique violation of a taken label is caught outside
   * db.transaction, which is a savepoint inside a caller's transaction, so
   * the caller's transaction survives it.
   */
  async insert(key: NewKey): Promise<"inserted" | "label_in_use"> {
    try {
      await this.db.transaction(async () => {
        await this.db.query(
          "INSERT INTO api_keys (key_id, secret_hash, agent_label, owner_id, label_key, scopes) VALUES ($1, $2, $3, $4, $5, $6)",
          [key.keyId, key.secretHash, key.agentLabel, key.ownerId, key.labelKey, key.scopes],
        );
        await ensureDefaultActor(this.db, key);
      });
      return "inserted";
    } catch (err) {
      if ((err as { code?: string }).code === UNIQUE_VIOLATION) return "label_in_use";
      throw err;
    }
  }

  async findById(keyId: string): Promise<KeyRecord | undefined> {
    const { rows } = await this.db.query<KeyRow>(
      "SELECT key_id, secret_hash, agent_label, owner_id, created_at, revoked_at, scopes FROM api_keys WHERE key_id = $1",
      [keyId],
    );
    const row = rows[0];
    return row && {
      keyId: row.key_id,
      secretHash: row.secret_hash,
      agentLabel: row.agent_label,
      ownerId: row.owner_id,
      createdAt: row.created_at,
      revokedAt: row.revoked_at,
      scopes: scopesOf(row.scopes),
    };
  }

  async revoke(keyId: string): Promise<boolean> {
    const { rowCount } = await this.db.query("UPDATE api_keys SET revoked_at = clock_timestamp() WHERE key_id = $1 AND revoked_at IS NULL", [keyId]);
    return (rowCount ?? 0) > 0;
  }

  async lockScopes(keyId: string): Promise<{ scopes: KeyScopes } | undefined> {
    const { rows } = await this.db.query<{ scopes: string[] | null }>(
      "SELECT scopes FROM api_keys WHERE key_id = $1 AND revoked_at IS NULL FOR UPDATE",
      [keyId],
    );
    const row = rows[0];
    return row && { scopes: scopesOf(row.scopes) };
  }

  async setScopes(keyId: string, scopes: readonly KeyScope[]): Promise<void> {
    await this.db.query("UPDATE api_keys SET scopes = $2 WHERE key_id = $1", [keyId, scopes]);
  }
}
