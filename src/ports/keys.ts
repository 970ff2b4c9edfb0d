/** What the key use cases need from storage. */
import type { KeyRecord, NewKey } from "../model/keys.js";

export interface KeyStore {
  /** Stores the key and its default actor; "label_in_use" when an active key has the same labelKey. */
  insert(key: NewKey): Promise<"inserted" | "label_in_use">;
  findById(keyId: string): Promise<KeyRecord | undefined>;
  /** Marks the key revoked; revoking twice is harmless. */
  revoke(keyId: string): Promise<void>;
}
