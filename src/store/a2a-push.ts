/** SQL for A2A push-notification configs (0040_a2a_push.sql; docs/decisions.md#a2a). */
import type { A2aPushStore, NewPushConfig, PushConfig } from "../ports/a2a-push.js";
import type { Db } from "./db.js";

interface Row {
  config_id: string;
  message_id: string;
  url: string;
  token: string | null;
  auth_scheme: string | null;
}

const toConfig = (r: Row): PushConfig => ({ id: r.config_id, taskId: r.message_id, url: r.url, token: r.token, authScheme: r.auth_scheme });

export class PgA2aPushStore implements A2aPushStore {
  constructor(private readonly db: Db) {}

  put(c: NewPushConfig, max: number): Promise<"stored" | "too_many"> {
    return this.db.transaction(async () => {
      // One task's configs are counted where they are written: the message row is locked first.
      await this.db.query("SELECT 1 FROM messages WHERE id = $1 FOR NO KEY UPDATE", [c.taskId]);
      const { rows } = await this.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM a2a_push_configs WHERE message_id = $1 AND config_id <> $2",
        [c.taskId, c.id],
      );
      if ((rows[0]?.n ?? 0) >= max) return "too_many" as const;
      await this.db.query(
        `INSERT INTO a2a_push_configs (message_id, channel_id, key_id, config_id, url, token, auth_scheme, auth_credentials)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (message_id, config_id) DO UPDATE SET url = excluded.url, token = excluded.token,
           auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials, key_id = excluded.key_id`,
        [c.taskId, c.channelId, c.keyId, c.id, c.url, c.token, c.authScheme, c.authCredentials],
      );
      // The task's changes are queued from now on (messages_a2a_push), starting with its state now.
      await this.db.query("UPDATE messages SET a2a_push = true WHERE id = $1 AND NOT a2a_push", [c.taskId]);
      return "stored" as const;
    });
  }

  async get(taskId: string, keyId: string, id: string): Promise<PushConfig | undefined> {
    const { rows } = await this.db.query<Row>(
      "SELECT config_id, message_id, url, token, auth_scheme FROM a2a_push_configs WHERE message_id = $1 AND key_id = $2 AND config_id = $3",
      [taskId, keyId, id],
    );
    return rows[0] && toConfig(rows[0]);
  }

  async list(taskId: string, keyId: string): Promise<PushConfig[]> {
    const { rows } = await this.db.query<Row>(
      "SELECT config_id, message_id, url, token, auth_scheme FROM a2a_push_configs WHERE message_id = $1 AND key_id = $2 ORDER BY created_at, config_id",
      [taskId, keyId],
    );
    return rows.map(toConfig);
  }

  async delete(taskId: string, keyId: string, id: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM a2a_push_configs WHERE message_id = $1 AND key_id = $2 AND config_id = $3", [taskId, keyId, id]);
    return (rowCount ?? 0) > 0;
  }
}
