/**
 * Storage quotas per key (docs/decisions.md#quotas): the bytes its messages
 * take (live and in history), how many of them are live, and how many
 * channels it owns. A post that would take a key past a quota is refused
 * with 403 quota_exceeded; so is a channel past the key's channel quota.
 * Limits are the service's defaults (settings) unless the operator set the
 * key's own (PUT /v1/admin/keys/{key_id}/quotas).
 *
 * A post judges against usage read at most a second ago, plus what this
 * process let through since, so the hot path asks the database about once a
 * second per key; another replica's writes within that second can take a key
 * a little past its limit, which a storage quota tolerates. Channels are
 * counted exactly, in the transaction that creates one.
 */
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { QUOTA_NAMES, type QuotaLimits, type QuotaName, type QuotaOverrides, type QuotaUsage } from "../model/quotas.js";
import type { Clock } from "../model/time.js";
import type { QuotaStore } from "../ports/quotas.js";

export interface KeyQuotaReport {
  usage: QuotaUsage;
  limits: QuotaLimits;
}

const LABEL: Record<QuotaName, string> = {
  stored_bytes: "bytes of messages stored",
  live_messages: "live messages",
  channels: "channels",
};

/** How long a key's usage is trusted on the post path. */
const USAGE_CACHE_MS = 1_000;
const CACHE_SIZE = 10_000;

/** The refusal of a write past a quota. */
export function quotaExceeded(quota: QuotaName, used: number, limit: number, requested: number): ApiError {
  return new ApiError("quota_exceeded", `This key has ${used} ${LABEL[quota]} of the ${limit} its quota allows; this request needs ${requested} more`, {
    details: { quota, used, limit, requested },
  });
}

export class Quotas {
  private readonly cache = new Map<string, { report: KeyQuotaReport; until: number }>();

  constructor(
    private readonly store: QuotaStore,
    /** The service's defaults; null: unlimited. */
    private readonly defaults: QuotaLimits,
    private readonly clock: Clock,
  ) {}

  /** The key's usage and limits now (GET /v1/keys/me). */
  async report(keyId: string): Promise<KeyQuotaReport> {
    const [usage, overrides] = await Promise.all([this.store.usage(keyId), this.store.overrides(keyId)]);
    return { usage, limits: this.limitsOf(overrides ?? {}) };
  }

  /** A key's channel quota (null: unlimited): the channel store counts against it when it creates one. */
  async channelLimit(caller: Caller): Promise<number | null> {
    return (await this.cached(caller.keyId)).limits.channels;
  }

  /**
   * Refuses (403 quota_exceeded) posting `messages` messages of `bytes`
   * bytes when they would take the key past its live-message or stored-byte
   * quota; otherwise counts them as the key's until the next read.
   */
  async admitMessages(caller: Caller, messages: number, bytes: number): Promise<void> {
    const entry = await this.cached(caller.keyId);
    const { usage, limits } = entry;
    if (limits.live_messages !== null && usage.live_messages + messages > limits.live_messages) {
      throw quotaExceeded("live_messages", usage.live_messages, limits.live_messages, messages);
    }
    if (limits.stored_bytes !== null && usage.stored_bytes + bytes > limits.stored_bytes) {
      throw quotaExceeded("stored_bytes", usage.stored_bytes, limits.stored_bytes, bytes);
    }
    usage.live_messages += messages;
    usage.stored_bytes += bytes;
  }

  /** Sets the key's own limits (operator); false when there is no such key. */
  async setLimits(keyId: string, overrides: QuotaOverrides): Promise<KeyQuotaReport | undefined> {
    for (const name of QUOTA_NAMES) {
      const value = overrides[name];
      if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
        throw new ApiError("invalid_quota", `'${name}' must be an integer 0 or more (0: unlimited)`, { details: { field: name } });
      }
    }
    if (!(await this.store.setOverrides(keyId, overrides))) return undefined;
    this.cache.delete(keyId);
    return this.report(keyId);
  }

  /** The key's usage and limits, read at most USAGE_CACHE_MS ago (with what was let through since added). */
  private async cached(keyId: string): Promise<KeyQuotaReport> {
    const now = this.clock.monotonicMs();
    const hit = this.cache.get(keyId);
    if (hit !== undefined && hit.until > now) return hit.report;
    const report = await this.report(keyId);
    this.cache.delete(keyId);
    this.cache.set(keyId, { report, until: now + USAGE_CACHE_MS });
    // Map iteration order is insertion order: the first entry is the oldest.
    if (this.cache.size > CACHE_SIZE) this.cache.delete(this.cache.keys().next().value as string);
    return report;
  }

  private limitsOf(overrides: QuotaOverrides): QuotaLimits {
    const limits = { ...this.defaults };
    for (const name of QUOTA_NAMES) {
      const own = overrides[name];
      if (own !== undefined) limits[name] = own === 0 ? null : own;
    }
    return limits;
  }
}
