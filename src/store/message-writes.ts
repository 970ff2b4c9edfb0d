/**
 * The write of a batch of new messages to one channel: one call of
 * agentbus_create_messages (lock, pause and throttle checks, insert, outbox,
 * ring buffer, counters), each message's outcome in input order.
 */
import { freshLifecycle, type CreateOutcome, type NewMessage } from "../model/messages.js";
import type { Micros } from "../model/time.js";
import type { Db } from "./db.js";

export async function writeMessages(db: Db, channelId: string, inputs: readonly NewMessage[]): Promise<CreateOutcome[]> {
  const { rows } = await db.query<{ ord: number; outcome: string; retry_after: number | null; message_id: string; created_at: Micros; expires_at: Micros; available_at: Micros }>(
    "SELECT * FROM agentbus_create_messages($1, $2, $3, $4, $5, $6, $7::jsonb[], $8::jsonb[], $9::float8[], $10::text[], $11::smallint[], $12::int[], $13::jsonb[], $14::text[], $15::text[])",
    [
      channelId,
      inputs.map((m) => m.authorKeyId),
      inputs.map((m) => m.actor?.id ?? null),
      inputs.map((m) => m.actor?.name ?? null),
      inputs.map((m) => m.actorLabel),
      inputs.map((m) => m.content),
      inputs.map((m) => JSON.stringify(m.metadata)),
      inputs.map((m) => JSON.stringify(m.mentions)),
      inputs.map((m) => m.delaySeconds ?? 0),
      inputs.map((m) => m.groupKey ?? null),
      inputs.map((m) => m.priority ?? 3),
      inputs.map((m) => m.ttlSeconds ?? null),
      inputs.map((m) => (m.limitIds === undefined || m.limitIds.length === 0 ? null : JSON.stringify(m.limitIds))),
      inputs.map((m) => m.trace?.traceparent ?? null),
      inputs.map((m) => m.trace?.tracestate ?? null),
    ],
    "create_messages",
  );
  const outcomes: CreateOutcome[] = new Array(inputs.length);
  for (const row of rows) {
    const input = inputs[row.ord - 1]!;
    outcomes[row.ord - 1] =
      row.outcome === "created"
        ? {
            outcome: "created",
            message: {
              id: row.message_id,
              channelId,
              authorKeyId: input.authorKeyId,
              authorLabel: input.authorLabel,
              actor: input.actor,
              actorLabel: input.actorLabel,
              content: input.content,
              metadata: input.metadata,
              mentions: input.mentions,
              createdAt: row.created_at,
              expiresAt: row.expires_at,
              availableAt: row.available_at,
              claim: null,
              acknowledgedBy: [],
              deliveryCount: 0,
              result: null,
              deadLetter: null,
              groupKey: input.groupKey ?? null,
              priority: input.priority ?? 3,
              limits: input.limitNames ?? [],
              trace: input.trace ?? null,
              ...freshLifecycle(),
            },
          }
        : { outcome: row.outcome as "channel_not_found" | "channel_paused" | "channel_write_rate_exceeded", retryAfter: row.retry_after };
  }
  return outcomes;
}
