/** The append-only security audit (security_audit). */
import type { AuditEventRecord, NewAuditEvent } from "../model/audit.js";
import type { Micros } from "../model/time.js";

export interface AuditQuery {
  /** Only the events that concern this key (an owner's own view). */
  ownerKeyId?: string;
  /** Only the events of keys with this label (the operator's filter). */
  ownerId?: string;
  /** Only events older than this id (the previous page's last). */
  beforeId?: string;
  limit: number;
}

export interface AuditLog {
  /**
   * Runs fn in one transaction (a savepoint inside one): an event recorded
   * in it commits with the change it describes, or not at all.
   */
  atomically<T>(fn: () => Promise<T>): Promise<T>;
  record(event: NewAuditEvent, at: Micros): Promise<void>;
  /** Newest first. */
  list(query: AuditQuery): Promise<AuditEventRecord[]>;
}
