/** Security audit events (docs/decisions.md#security-audit). */
import type { JsonObject } from "./json.js";
import type { Micros } from "./time.js";

export type AuditKind =
  | "key.issued"
  | "key.revoked"
  | "key.scopes_changed"
  | "channel.paused"
  | "channel.resumed"
  | "channel.member_added"
  | "channel.member_removed"
  | "session.member_added"
  | "session.member_removed"
  | "minting.switched";

export interface NewAuditEvent {
  kind: AuditKind;
  /**
   * The key whose resources the event concerns (the key itself, the
   * channel's or the session's owner key): the one that reads it. Null for
   * service-wide events, which only the operator sees.
   */
  ownerKeyId: string | null;
  /** That key's label (owner_id), for people and the operator's filter. */
  ownerId: string | null;
  /** The key that made the change; null when the operator did. */
  actorKeyId: string | null;
  /** A key id, channel id or session id. */
  subject: string;
  details: JsonObject;
}

export interface AuditEventRecord extends NewAuditEvent {
  /** A bigint sequence as a decimal string: later events have larger ids. */
  id: string;
  occurredAt: Micros;
}
