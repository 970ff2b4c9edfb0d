/** AuditLog over an array. atomically() only runs fn: rollback is the real store's, tested against PostgreSQL. */
import type { AuditEventRecord, NewAuditEvent } from "../../../src/model/audit.js";
import type { Micros } from "../../../src/model/time.js";
import type { AuditLog, AuditQuery } from "../../../src/ports/audit.js";

export class FakeAuditLog implements AuditLog {
  readonly events: AuditEventRecord[] = [];

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  async record(event: NewAuditEvent, at: Micros): Promise<void> {
    this.events.push({ ...event, id: String(this.events.length + 1), occurredAt: at });
  }

  async list(query: AuditQuery): Promise<AuditEventRecord[]> {
    return this.events
      .filter((e) => (query.ownerId === undefined || e.ownerId === query.ownerId) && (query.beforeId === undefined || Number(e.id) < Number(query.beforeId)))
      .reverse()
      .slice(0, query.limit);
  }
}
