/**
 * A delivery span per message a receive or claim hands out (docs/decisions.md#spans):
 * the child of the span that posted the message (its stored trace context),
 * so the hand-off sits in the producer's trace, linked to the consumer's own
 * RPC span, so the consumer's trace finds it too.
 */
import { context, SpanKind, trace } from "@opentelemetry/api";
import type { MessageRecord } from "../model/messages.js";
import { contextOf, tracer, tracingEnabled } from "../platform/tracing.js";

export function recordDeliveries(messages: readonly MessageRecord[], keyId: string): void {
  if (!tracingEnabled() || messages.length === 0) return;
  const consumer = trace.getSpan(context.active())?.spanContext();
  for (const m of messages) {
    tracer()
      .startSpan(
        "agentbus.deliver",
        {
          kind: SpanKind.CONSUMER,
          links: consumer === undefined ? [] : [{ context: consumer }],
          attributes: {
            "messaging.system": "agentbus",
            "messaging.operation.type": "receive",
            "messaging.destination.name": m.channelId,
            "messaging.message.id": m.id,
            "agentbus.key_id": keyId,
            "agentbus.delivery_count": m.deliveryCount,
          },
        },
        contextOf(m.trace),
      )
      .end();
  }
}
