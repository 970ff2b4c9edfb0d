/**
 * The security audit (issue 17, docs/decisions.md#security-audit): who
 * issued, narrowed or revoked a key, paused or resumed a channel, switched
 * minting, added or removed a member. The use cases that make those changes
 * record them through `change`, so an event commits with its change or not
 * at all; nothing updates or deletes an event but the purge, after the
 * retention period.
 */
import type { AuditEventRecord, NewAuditEvent } from "../model/audit.js";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { Clock } from "../model/time.js";
import type { AuditLog } from "../ports/audit.js";
import { validatePageLimit } from "./paging.js";

export interface AuditPage {
  data: AuditEventRecord[];
  limit: number;
  /** Set when the page is full (older events may follow). */
  nextCursor: string | null;
}

export interface AuditListing {
  cursor?: string;
  limit?: number;
}

/** Event ids are a bigint sequence; the cursor is the last id of the previous page. */
const CURSOR = /^[1-9][0-9]{0,17}$/;

export class SecurityAudit {
  constructor(
    private readonly log: AuditLog,
    private readonly clock: Clock,
  ) {}

  /**
   * Runs the change and records the events it reports in one transaction.
   * `events` sees the change's result; an empty list records nothing (a
   * change that turned out to change nothing, say).
   */
  async change<T>(run: () => Promise<T>, events: (result: T) => NewAuditEvent[]): Promise<T> {
    return this.log.atomically(async () => {
      const result = await run();
      const at = this.clock.now();
      for (const event of events(result)) await this.log.record(event, at);
      return result;
    });
  }

  /**
   * The events that concern the caller's key, newest first: by key, not by
   * label, so a key minted later with a freed label sees none of the old
   * key's (as with channels, docs/decisions.md#channel-names).
   */
  listForOwner(caller: Caller, listing: AuditListing): Promise<AuditPage> {
    return this.page({ ownerKeyId: caller.keyId }, listing);
  }

  /** Every event, or those of keys with one label (the operator's view). */
  listAll(ownerId: string | undefined, listing: AuditListing): Promise<AuditPage> {
    return this.page(ownerId === undefined || ownerId === "" ? {} : { ownerId }, listing);
  }

  private async page(filter: { ownerKeyId?: string; ownerId?: string }, listing: AuditListing): Promise<AuditPage> {
    const limit = validatePageLimit(listing.limit);
    const cursor = listing.cursor === "" ? undefined : listing.cursor;
    if (cursor !== undefined && !CURSOR.test(cursor)) {
      throw new ApiError("invalid_cursor", "'cursor' must be the next_cursor of a previous page, unchanged", {
        details: { field: "cursor" },
        suggestion: "Pass next_cursor from the previous page as it came, or leave cursor out for the newest events.",
      });
    }
    const data = await this.log.list({ ...filter, ...(cursor === undefined ? {} : { beforeId: cursor }), limit });
    return { data, limit, nextCursor: data.length === limit ? (data[data.length - 1]?.id ?? null) : null };
  }
}
