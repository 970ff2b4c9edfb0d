/**
 * Self-issued API keys (docs/decisions.md#api-keys). A key is "<key_id>.<secret>"; only a
 * SHA-256 of the secret is stored. A fast hash is right here because the
 * secret is 192 random bits, not a password: there is nothing to brute-force.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { AuthenticatedCaller, Caller } from "../model/caller.js";
import { isKeyScope, KEY_SCOPES, type KeyScope, type KeyScopes } from "../model/scopes.js";
import type { SecurityAudit } from "./audit.js";
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
  scopes: KeyScopes;
}

export interface IssueOptions {
  /** Who asked: anyone (POST /v1/keys) or the operator (POST /v1/admin/keys); recorded in the audit. */
  via: "public" | "admin";
  /** Scope names as given; every scope when absent or empty. */
  scopes?: readonly string[];
}

/**
 * Scope names as a request gave them: known names only (422 invalid_scopes),
 * duplicates dropped, in catalogue order.
 */
export function parseScopes(given: readonly string[]): KeyScope[] {
  const unknown = given.filter((name) => !isKeyScope(name));
  if (unknown.length > 0) {
    throw new ApiError("invalid_scopes", `Unknown scope${unknown.length === 1 ? "" : "s"}: ${unknown.slice(0, 5).map((n) => `'${n.slice(0, 64)}'`).join(", ")}`, {
      details: { field: "scopes", valid_scopes: [...KEY_SCOPES] },
    });
  }
  return KEY_SCOPES.filter((scope) => given.includes(scope));
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
  /** Runs fn after the current transaction commits (at once outside one); at once by default. */
  afterCommit?: (fn: () => void) => void;
  /**
   * Told, after the commit, that a key was revoked or narrowed: the entry
   * wires it to the wake bus, so every replica's open calls and MCP
   * sessions of that key re-check it at once (docs/decisions.md#revocation).
   */
  onChange?: (keyId: string) => void;
}

/** Where a key's changes are announced on the wake bus (docs/decisions.md#revocation). */
export const keyChangeTopic = (keyId: string) => `key:${keyId}`;

export class Keys {
  private readonly cache = new Map<string, { record: KeyRecord; until: number }>();

  constructor(
    private readonly store: KeyStore,
    private readonly audit: SecurityAudit,
    private readonly options: KeysOptions,
  ) {}

  /**
   * The label is stored and shown trimmed, and is the key's owner_id; it must
   * differ from every active key's label in its normal form (nameKey), so a
   * look-alike cannot pose as another agent's owner.
   */
  async issue(given: string, options: IssueOptions = { via: "public" }): Promise<IssuedKey> {
    const agentLabel = displayName(given, "agent_label", "invalid_agent_label", MAX_AGENT_LABEL_LENGTH);
    const scopes = options.scopes === undefined || options.scopes.length === 0 ? null : parseScopes(options.scopes);
    const keyId = `ak_${randomBytes(12).toString("base64url")}`;
    const secret = randomBytes(24).toString("base64url");
    const outcome = await this.audit.change(
      () => this.store.insert({ keyId, secretHash: hashSecret(secret), agentLabel, ownerId: agentLabel, labelKey: nameKey(agentLabel), scopes }),
      (result) =>
        result === "inserted"
          ? [{ kind: "key.issued", ownerKeyId: keyId, ownerId: agentLabel, actorKeyId: options.via === "admin" ? null : keyId, subject: keyId, details: { via: options.via, agent_label: agentLabel, scopes: scopes && [...scopes] } }]
          : [],
    );
    if (outcome === "label_in_use") {
      throw new ApiError("label_in_use", `An active key already uses the agent_label '${agentLabel}' or one that looks the same`, {
        details: { agent_label: agentLabel },
        suggestion:
          "Choose another agent_label, e.g. add a suffix such as '-2'; labels are compared ignoring case, surrounding spaces and full-width or other compatibility forms. " +
          "If the key holding it is yours, keep using that key, or revoke it with DELETE /v1/keys/me to free the label. Refused mints do not count against the mint limit.",
      });
    }
    return { key: `${keyId}.${secret}`, keyId, agentLabel, ownerId: agentLabel, scopes };
  }

  /** Resolves a presented key to its caller, or throws 401 unauthorized. */
  async authenticate(presented: string): Promise<AuthenticatedCaller> {
    const match = KEY_PATTERN.exec(presented);
    if (!match) throw new ApiError("unauthorized", "Malformed API key");
    const [, keyId, secret] = match as unknown as [string, string, string];
    const record = await this.lookup(keyId);
    if (!record) throw new ApiError("unauthorized", "Invalid API key");
    if (!timingSafeEqual(record.secretHash, hashSecret(secret))) throw new ApiError("unauthorized", "Invalid API key");
    if (record.revokedAt !== null) throw new ApiError("unauthorized", "Inactive API key", { suggestion: "This key was revoked; mint a new one with POST /v1/keys." });
    return { keyId: record.keyId, agentLabel: record.agentLabel, ownerId: record.ownerId, scopes: record.scopes };
  }

  async describe(caller: Caller): Promise<KeyRecord> {
    const record = await this.store.findById(caller.keyId);
    if (!record) throw new ApiError("unauthorized", "Invalid API key");
    return record;
  }

  async revoke(caller: Caller): Promise<void> {
    await this.audit.change(
      () => this.store.revoke(caller.keyId),
      (revoked) => (revoked ? [{ kind: "key.revoked", ownerKeyId: caller.keyId, ownerId: caller.ownerId, actorKeyId: caller.keyId, subject: caller.keyId, details: {} }] : []),
    );
    this.forget(caller.keyId);
  }

  /**
   * Narrows the key's scopes to `given`, which must lie within what it
   * holds (403 scope_widening otherwise). The row is locked while checking,
   * so two narrowings at once cannot together give back a scope either
   * gave up. Takes effect at once on this process; on other replicas within
   * the lookup cache's lifetime, as revocation does.
   */
  async narrowScopes(caller: Caller, given: readonly string[]): Promise<KeyRecord> {
    if (given.length === 0) {
      throw new ApiError("missing_field", "'scopes' must name at least one scope", {
        details: { field: "scopes" },
        suggestion: "List the scopes the key keeps, e.g. [\"messages:read\"]. To stop using the key altogether, revoke it with DELETE /v1/keys/me.",
      });
    }
    const next = parseScopes(given);
    await this.audit.change(
      async () => {
        const current = await this.store.lockScopes(caller.keyId);
        if (!current) throw new ApiError("unauthorized", "Inactive API key");
        const held = current.scopes ?? KEY_SCOPES;
        const gained = next.filter((scope) => !held.includes(scope));
        if (gained.length > 0) {
          throw new ApiError("scope_widening", `This key does not hold ${gained.map((s) => `'${s}'`).join(", ")}; a key can only give up scopes`, {
            details: { requested_scopes: next, granted_scopes: [...held] },
          });
        }
        await this.store.setScopes(caller.keyId, next);
        return current.scopes;
      },
      (before) => [{ kind: "key.scopes_changed", ownerKeyId: caller.keyId, ownerId: caller.ownerId, actorKeyId: caller.keyId, subject: caller.keyId, details: { before: before && [...before], after: next } }],
    );
    this.forget(caller.keyId);
    return this.describe(caller);
  }

  /**
   * Drops the key's cached record now and again once the change commits:
   * inside a caller's transaction (an Idempotency-Key), a lookup in between
   * would otherwise cache the record as it was before.
   */
  private forget(keyId: string): void {
    this.cache.delete(keyId);
    (this.options.afterCommit ?? ((fn) => fn()))(() => {
      this.cache.delete(keyId);
      this.options.onChange?.(keyId);
    });
  }

  /**
   * The key's record as the database has it now (the cache is refreshed with
   * it); undefined once it is revoked or gone. For a call or session that
   * was told the key changed.
   */
  async recheck(keyId: string): Promise<KeyRecord | undefined> {
    this.cache.delete(keyId);
    return this.active(await this.lookup(keyId));
  }

  /** The key's record as this process knows it (cached for cacheTtlMs); undefined once it is revoked or gone. */
  async current(keyId: string): Promise<KeyRecord | undefined> {
    return this.active(await this.lookup(keyId));
  }

  private active(record: KeyRecord | undefined): KeyRecord | undefined {
    return record !== undefined && record.revokedAt === null ? record : undefined;
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
