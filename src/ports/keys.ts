/** What the key use cases need from storage. */
import type { KeyRecord, NewKey } from "../model/keys.js";
import type { KeyScope, KeyScopes } from "../model/scopes.js";

export interface KeyStore {
  /** Stores the key and its default actor; "label_in_use" when an active key has the same labelKey. */
  insert(key: NewKey): Promise<"inserted" | "label_in_use">;
  findById(keyId: string): Promise<KeyRecord | undefined>;
  /** Marks the key revoked; true when this call revoked it (revoking twice is harmless). */
  revoke(keyId: string): Promise<boolean>;
  /** The scopes of an active key, its row locked until the transaction ends; undefined when revoked or unknown. */
  lockScopes(keyId: string): Promise<{ scopes: KeyScopes } | undefined>;
  setScopes(keyId: string, scopes: readonly KeyScope[]): Promise<void>;
}
