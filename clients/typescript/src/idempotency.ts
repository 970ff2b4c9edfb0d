/**
 * Idempotency keys on mutations: the service replays the stored
 * response for a repeated (API key, Idempotency-Key) pair instead of running
 * the mutation again, so a retry after a lost response cannot post twice.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import type { CallOptions, Interceptor } from "@connectrpc/connect";

export const IDEMPOTENCY_HEADER = "idempotency-key";

/**
 * Whether a method changes state, read from the proto's `idempotency_level`,
 * not from its google.api.http verb: every read is marked NO_SIDE_EFFECTS,
 * while ResolveInvitation is a GET that grants membership. This is the same
 * rule the service's idempotency layer applies (src/server/rpc/method-rules.ts),
 * so the client sends a key exactly where the service honours one. Streams
 * are excluded: the service keys only unary calls (a stream cannot be replayed).
 */
export function isMutation(method: DescMethod): boolean {
  return method.methodKind === "unary" && method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
}

/**
 * Adds a fresh random `idempotency-key` to every mutation that does not carry
 * one already, except a long-poll (`wait` > 0, e.g. ReceiveMessages): the
 * service refuses a keyed request that waits (422 `idempotent_wait`), since
 * the wait would hold the key's transaction. A key generated here protects
 * only against the transport resending the same request; to retry a call
 * yourself, pass your own key (see `idempotent()`), since each new call would
 * otherwise get a new key.
 */
export function idempotencyInterceptor(): Interceptor {
  return (next) => async (req) => {
    if (isMutation(req.method) && !req.header.has(IDEMPOTENCY_HEADER) && !req.stream && waitsFor(req.method, req.message) <= 0) {
      req.header.set(IDEMPOTENCY_HEADER, globalThis.crypto.randomUUID());
    }
    return next(req);
  };
}

/** The request's `wait` seconds, 0 when the method has no such field; the service's own rule (src/server/rpc/idempotency.ts). */
function waitsFor(method: DescMethod, message: unknown): number {
  const field = method.input.fields.find((f) => f.name === "wait");
  if (field === undefined || typeof message !== "object" || message === null) return 0;
  const value: unknown = (message as Record<string, unknown>)[field.localName];
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

/**
 * Call options carrying one idempotency key, to reuse across retries of one
 * logical operation:
 *
 *   const once = idempotent();            // or idempotent("order-42")
 *   await client.messages.createMessage(req, once);
 *   await client.messages.createMessage(req, once); // replayed, not posted again
 *
 * Any other way of putting `idempotency-key` into the call's headers works too.
 * The service keeps a key for 24 hours; reusing it for a different request is
 * refused with `idempotency_key_reused`.
 */
export function idempotent(key: string = globalThis.crypto.randomUUID(), options: CallOptions = {}): CallOptions {
  const headers = new Headers(options.headers);
  headers.set(IDEMPOTENCY_HEADER, key);
  return { ...options, headers };
}
