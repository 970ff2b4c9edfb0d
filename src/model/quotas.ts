/** Storage quotas per key (docs/decisions.md#quotas). */

/** The three things a key's quota bounds. */
export const QUOTA_NAMES = ["stored_bytes", "live_messages", "channels"] as const;
export type QuotaName = (typeof QUOTA_NAMES)[number];

/** A limit per quota; null: unlimited. */
export type QuotaLimits = Record<QuotaName, number | null>;

/** What the operator set for one key: a limit (0: unlimited) or undefined for the service's default. */
export type QuotaOverrides = Partial<Record<QuotaName, number>>;

/** What a key holds now, per quota. */
export type QuotaUsage = Record<QuotaName, number>;
