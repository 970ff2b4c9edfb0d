/** API keys as stored: only a hash of the secret is kept. */
import type { KeyScopes } from "./scopes.js";
import type { Micros } from "./time.js";

export interface KeyRecord {
  keyId: string;
  secretHash: Buffer;
  agentLabel: string;
  ownerId: string;
  createdAt: Micros;
  revokedAt: Micros | null;
  scopes: KeyScopes;
}

/** A key to store; labelKey is nameKey(agentLabel), unique among active keys. */
export type NewKey = Omit<KeyRecord, "createdAt" | "revokedAt"> & { labelKey: string };
