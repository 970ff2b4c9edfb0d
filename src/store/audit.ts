/** SQL for security_audit (0022_security_audit.sql). */
import type { AuditEventRecord, AuditKind, NewAuditEvent } from "../model/audit.js";
import type { JsonObject } from "../model/json.js";
import { formatTimestamp, type Micros } from "../model/time.js";
import type { AuditLog, AuditQuery } from "../ports/audit.js";
import type { Db } from "./db.js";

interface AuditRow {
  id: string;
  occurred_at: Micros;
  kind: AuditKind;
  owner_id: string | null;
  actor_key_id: string | null;
  subject: string;
  details: JsonObject;
}

const SELECT_EVENTS = "SELECT id::text, occurred_at, kind, owner_id, actor_key_id, subject, details FROM security_audit";

export class PgAuditLog implements AuditLog {
  constructor(private readonly db: Db) {}

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  async record(event: NewAuditEvent, at: Micros): Promise<void> {
    await this.db.query(
      "INSERT INTO security_audit (occurred_at, kind, owner_id, actor_key_id, subject, details) VALUES ($1, $2, $3, $4, $5, $6)",
      [formatTimestamp(at), event.kind, event.ownerId, event.actorKeyId, event.subject, JSON.stringify(event.details)],
    );
  }

  async list(query: AuditQuery): Promise<AuditEventRecord[]> {
    // Two statements rather than "$1 IS NULL OR owner_id = $1", so each keeps its index.
    const before = query.beforeId ?? null;
    const { rows } =
      query.ownerId === undefined
        ? await this.db.query<AuditRow>(`${SELECT_EVENTS} WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`, [before, query.limit])
        : await this.db.query<AuditRow>(`${SELECT_EVENTS} WHERE owner_id = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`, [
            query.ownerId,
            before,
            query.limit,
          ]);
    return rows.map((r) => ({
      id: r.id,
      occurredAt: r.occurred_at,
      kind: r.kind,
      ownerId: r.owner_id,
      actorKeyId: r.actor_key_id,
      subject: r.subject,
      details: r.details,
    }));
  }
}
