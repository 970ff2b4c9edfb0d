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
  owner_key_id: string | null;
  owner_id: string | null;
  actor_key_id: string | null;
  subject: string;
  details: JsonObject;
}

const SELECT_EVENTS = "SELECT id::text, occurred_at, kind, owner_key_id, owner_id, actor_key_id, subject, details FROM security_audit";

export class PgAuditLog implements AuditLog {
  constructor(private readonly db: Db) {}

  atomically<T>(fn: () => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  async record(event: NewAuditEvent, at: Micros): Promise<void> {
    await this.db.query(
      "INSERT INTO security_audit (occurred_at, kind, owner_key_id, owner_id, actor_key_id, subject, details) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [formatTimestamp(at), event.kind, event.ownerKeyId, event.ownerId, event.actorKeyId, event.subject, JSON.stringify(event.details)],
    );
  }

  async list(query: AuditQuery): Promise<AuditEventRecord[]> {
    // One statement per filter rather than "$1 IS NULL OR …", so each keeps its index.
    const before = query.beforeId ?? null;
    const [column, value] =
      query.ownerKeyId !== undefined ? ["owner_key_id", query.ownerKeyId] : query.ownerId !== undefined ? ["owner_id", query.ownerId] : [undefined, undefined];
    const { rows } =
      column === undefined
        ? await this.db.query<AuditRow>(`${SELECT_EVENTS} WHERE ($1::bigint IS NULL OR id < $1) ORDER BY id DESC LIMIT $2`, [before, query.limit])
        : await this.db.query<AuditRow>(`${SELECT_EVENTS} WHERE ${column} = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`, [
            value,
            before,
            query.limit,
          ]);
    return rows.map((r) => ({
      id: r.id,
      occurredAt: r.occurred_at,
      kind: r.kind,
      ownerKeyId: r.owner_key_id,
      ownerId: r.owner_id,
      actorKeyId: r.actor_key_id,
      subject: r.subject,
      details: r.details,
    }));
  }
}
