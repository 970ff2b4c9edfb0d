/**
 * Self-issued API keys (docs/decisions.md#api-keys). A key is "<key_id>.<secret>"; only a
 * SHA-256 of the secret is stored. A fast hash is right here because the
 * secret is 192 random bits, not a password: there is nothing to brute-force.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { Caller } from "../model/caller.js";
import type { KeyRecord } from "../model/keys.js";
import type { KeyStore } from "../ports/keys.js";
import { ApiError } from "../model/errors.js";
import { displayName, nameKey } from "./labels.js";
import type { Clock } from "../model/time.js";

export interface IssuedKey {
  key: string;
  keyId: string;
  agentLabel: string;
  ownerId: string;
}

const KEY_PATTERN = /^(ak_[A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{32})$/;
export const MAX_AGENT_LABEL_LENGTH = 128;

const hashSecret = (secret: string) => createHash("sha256").update(secret).digest();

export interface KeysOptions {
  clock: Clock;
  /**
   * How long a successful lookup is trusted without asking the database.
   * Revocation on this process takes effect at once; on other replicas
   * within this time.
   */
  cacheTtlMs: number;
  cacheSize?: number;
}

export class Keys {
  private readonly cache = new Map<string, { record: KeyRecord; until: number }>();

  constructor(
    private readonly store: KeyStore,
    private readonly options: KeysOptions,
  ) {}

  /**
   * The label is stored and shown trimmed, and is the key's owner_id; it must
   * differ from every active key's label in its normal form (nameKey), so a
   * look-alike cannot pose as another agent's owner.
   */
  async issue(given: string): Promise<IssuedKey> {
    const agentLabel = displayName(given, "agent_label", "invalid_agent_label", MAX_AGENT_LABEL_LENGTH);
    const keyId = `ak_${randomBytes(12).toString("base64url")}`;
    const secret = randomBytes(24).toString("base64url");
    const outcome = await this.store.insert({ keyId, secretHash: hashSecret(secret), agentLabel, ownerId: agentLabel, labelKey: nameKey(agentLabel) });
    if (outcome === "label_in_use") {
      throw new ApiError("label_in_use", `An active key already uses the agent_label '${agentLabel}' or one that looks the same`, {
        details: { agent_label: agentLabel },
        suggestion:
          "Choose another agent_label, e.g. add a suffix such as '-2'; labels are compared ignoring case, surrounding spaces and full-width or other compatibility forms. " +
          "If the key holding it is yours, keep using that key, or revoke it with DELETE /v1/keys/me to free the label. Refused mints do not count against the mint limit.",
      });
    }
    return { key: `${keyId}.${secret}`, keyId, agentLabel, ownerId: agentLabel };
  }

  /** Resolves a presented key to its caller, or throws 401 unauthorized. */
  async authenticate(presented: string): Promise<Caller> {
    const match = KEY_PATTERN.exec(presented);
    if (!match) throw new ApiError("unauthorized", "Malformed API key");
    const [, keyId, secret] = match as unknown as [string, string, string];
    const record = await this.lookup(keyId);
    if (!record) throw new ApiError("unauthorized", "Invalid API key");
    if (!timingSafeEqual(record.secretHash, hashSecret(secret))) throw new ApiError("unauthorized", "Invalid API key");
    if (record.revokedAt !== null) throw new ApiError("unauthorized", "Inactive API key", { suggestion: "This key was revoked; mint a new one with POST /v1/keys." });
    return { keyId: record.keyId, agentLabel: record.agentLabel, ownerId: record.ownerId };
  }

  async describe(caller: Caller): Promise<KeyRecord> {
    const record = await this.store.findById(caller.keyId);
    if (!record) throw new ApiError("unauthorized", "Invalid API key");
    return record;
  }

  async revoke(caller: Caller): Promise<void> {
    await this.store.revoke(caller.keyId);
    this.cache.delete(caller.keyId);
  }

  private async lookup(keyId: string): Promise<KeyRecord | undefined> {
    const now = this.options.clock.now() / 1000;
    const cached = this.cache.get(keyId);
    if (cached && cached.until > now) return cached.record;
    const record = await this.store.findById(keyId);
    if (record && record.revokedAt === null) {
      this.cache.delete(keyId);
      this.cache.set(keyId, { record, until: now + this.options.cacheTtlMs });
      // Map iteration order is insertion order: the first entry is the oldest.
      if (this.cache.size > (this.options.cacheSize ?? 10_000)) this.cache.delete(this.cache.keys().next().value as string);
    } else {
      this.cache.delete(keyId);
    }
    return record;
  }
}
