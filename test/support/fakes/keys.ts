/** KeyStore over a Map. */
import type { KeyRecord, NewKey } from "../../../src/model/keys.js";
import type { KeyScope, KeyScopes } from "../../../src/model/scopes.js";
import type { KeyStore } from "../../../src/ports/keys.js";

export class FakeKeyStore implements KeyStore {
  readonly keys = new Map<string, KeyRecord & { labelKey: string }>();
  /** Lookups by id, so tests can tell a cache hit from a read. */
  reads = 0;

  async insert(key: NewKey): Promise<"inserted" | "label_in_use"> {
    for (const held of this.keys.values()) {
      if (held.revokedAt === null && held.labelKey === key.labelKey) return "label_in_use";
    }
    this.keys.set(key.keyId, { ...key, createdAt: Date.now() * 1000, revokedAt: null });
    return "inserted";
  }

  async findById(keyId: string): Promise<KeyRecord | undefined> {
    this.reads++;
    const found = this.keys.get(keyId);
    if (!found) return undefined;
    const { labelKey: _labelKey, ...record } = found;
    return record;
  }

  async revoke(keyId: string): Promise<boolean> {
    const found = this.keys.get(keyId);
    if (!found || found.revokedAt !== null) return false;
    found.revokedAt = Date.now() * 1000;
    return true;
  }

  async lockScopes(keyId: string): Promise<{ scopes: KeyScopes } | undefined> {
    const found = this.keys.get(keyId);
    return found && found.revokedAt === null ? { scopes: found.scopes } : undefined;
  }

  async setScopes(keyId: string, scopes: readonly KeyScope[]): Promise<void> {
    const found = this.keys.get(keyId);
    if (found) found.scopes = [...scopes];
  }
}
