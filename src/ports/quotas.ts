/** What the quotas use case needs from storage (key_usage, api_keys' quota columns, channels). */
import type { QuotaOverrides, QuotaUsage } from "../model/quotas.js";

export interface QuotaStore {
  /** What the key holds now: its messages' bytes (live and history), its live messages, the channels it owns. */
  usage(keyId: string): Promise<QuotaUsage>;
  /** The limits the operator set for the key; undefined when the key does not exist. */
  overrides(keyId: string): Promise<QuotaOverrides | undefined>;
  /** Replaces the key's limits (a quota left out goes back to the default); false when the key does not exist. */
  setOverrides(keyId: string, overrides: QuotaOverrides): Promise<boolean>;
}
