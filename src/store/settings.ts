/** service_settings: operator settings every replica reads from the database. */
import type { SettingsStore } from "../ports/settings.js";
import type { Db } from "./db.js";

const PUBLIC_MINTING = "public_minting";

export class PgSettingsStore implements SettingsStore {
  constructor(private readonly db: Db) {}

  async publicMinting(): Promise<boolean | undefined> {
    const { rows } = await this.db.query<{ value: unknown }>("SELECT value FROM service_settings WHERE name = $1", [PUBLIC_MINTING], "setting_get");
    const value = rows[0]?.value;
    return typeof value === "boolean" ? value : undefined;
  }

  async setPublicMinting(enabled: boolean): Promise<void> {
    await this.db.query(
      `INSERT INTO service_settings (name, value, updated_at) VALUES ($1, to_jsonb($2::boolean), now())
       ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at`,
      [PUBLIC_MINTING, enabled],
      "setting_set",
    );
  }
}
