/**
 * The figures the reference's observability routes show (docs/decisions.md#compat-verbs):
 * a channel's counts from its queue stats, and a key's counts over what it
 * owns. The second reads every live message of the key's channels, so an
 * answer is kept for a few seconds per key: asking again at the request rate
 * costs one count, not one per request.
 */
import type { Caller } from "../model/caller.js";
import type { QueueStats } from "../model/messages.js";
import type { Clock, Micros } from "../model/time.js";
import type { OwnedFigures, UsageMetricsStore } from "../ports/usage-metrics.js";
import type { Messages } from "./messages.js";

export const OWNED_FIGURES_TTL_MS = 5_000;
/** Beyond this many keys the remembered answers start over: a bound on memory. */
const MAX_REMEMBERED = 10_000;

export interface ChannelCounts {
  channelId: string;
  stats: QueueStats;
  total: number;
  unclaimed: number;
  claimed: number;
  acknowledged: number;
}

export class UsageMetrics {
  private readonly remembered = new Map<string, { figures: OwnedFigures; computedAt: Micros; until: number }>();

  constructor(
    private readonly messages: Messages,
    private readonly store: UsageMetricsStore,
    private readonly clock: Clock,
  ) {}

  /** GET /v1/channels/{identifier}/metrics: the stats' figures in the reference's buckets. */
  async channelCounts(caller: Caller, identifier: string): Promise<ChannelCounts> {
    const { channelId, stats } = await this.messages.statsOf(caller, identifier);
    const unclaimed = stats.ready + stats.delayed;
    return { channelId, stats, total: stats.live, unclaimed, claimed: stats.inFlight, acknowledged: stats.acknowledged };
  }

  /** GET /v1/observability/metrics: counts over the caller's channels and sessions, at most OWNED_FIGURES_TTL_MS old. */
  async owned(caller: Caller): Promise<{ figures: OwnedFigures; computedAt: Micros }> {
    const now = this.clock.monotonicMs();
    const hit = this.remembered.get(caller.keyId);
    if (hit && hit.until > now) return hit;
    const computedAt = this.clock.now();
    const figures = await this.store.ownedFigures(caller.keyId, computedAt);
    if (this.remembered.size >= MAX_REMEMBERED) this.remembered.clear();
    const entry = { figures, computedAt, until: now + OWNED_FIGURES_TTL_MS };
    this.remembered.set(caller.keyId, entry);
    return entry;
  }
}
