/**
 * Idempotency keys (docs/decisions.md#idempotency) for every state-changing RPC of an API-key
 * caller, whichever protocol it came in on: the key arrives as the
 * `Idempotency-Key` header (REST) or `idempotency-key` metadata (gRPC,
 * Connect), scoped to the caller's key id, and lives 24 hours.
 *
 * Exactly-once by construction, not by timing. The handler runs inside one
 * database transaction whose first statement inserts a placeholder record
 * under the key's primary key:
 *
 *  1. claim: INSERT the placeholder (request hash, no response). A concurrent
 *     request with the same key blocks on the primary key until the first
 *     transaction ends, for at most LOCK_TIMEOUT_MS (then 409
 *     idempotency_in_progress).
 *  2. first request: run the handler (its writes join the transaction), then
 *     store the encoded response and its REST status, and commit. Record and
 *     effects commit together or not at all; a failed handler rolls both back,
 *     so only successes are stored and the client may retry with the same key.
 *  3. duplicate: once the first has committed, the record is there. Another
 *     request hash → 422 idempotency_key_reused; the same → the stored response
 *     is decoded and returned with its original status and
 *     `X-Idempotent-Replay: true`, and the handler does not run.
 *
 * A keyed request may not long-poll (`wait` > 0, e.g. ReceiveMessages): the
 * wait would hold the transaction, and its connection, for all of it.
 *
 * `Idempotency-Key` is echoed on every response to a keyed request. Response
 * headers a handler sets are not stored: a replay carries status and body.
 */
import { create, fromBinary, toBinary, toJson, type DescMethod, type Message } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { createHash } from "node:crypto";
import { ApiError } from "../../model/errors.js";
import type { IdempotencyStore } from "../../ports/idempotency.js";
import { callerOf, httpStatusKey } from "../../protocol/context.js";
import { rulesOf } from "./method-rules.js";

/**
 * How long a duplicate waits for the first request with its key to finish.
 * Five seconds: a state-changing handler normally finishes in milliseconds,
 * so waiting this long lets nearly every retry or racing duplicate get the
 * real result (a replay) instead of an error, while a client whose first
 * request is stuck hears 409 well before typical client timeouts (10–30 s)
 * and while it still holds only one pooled connection per waiter.
 */
export const LOCK_TIMEOUT_MS = 5_000;
/** How long a stored response is replayed. */
export const WINDOW_SECONDS = 24 * 60 * 60;

const HEADER = "idempotency-key";
/** 1 to 255 printable ASCII characters. */
const VALID_KEY = /^[\x20-\x7e]{1,255}$/;

export interface IdempotencyOptions {
  lockTimeoutMs?: number;
  windowSeconds?: number;
}

export class Idempotency {
  private readonly lockTimeoutMs: number;
  private readonly windowSeconds: number;

  constructor(
    private readonly store: IdempotencyStore,
    options: IdempotencyOptions = {},
  ) {
    this.lockTimeoutMs = options.lockTimeoutMs ?? LOCK_TIMEOUT_MS;
    this.windowSeconds = options.windowSeconds ?? WINDOW_SECONDS;
  }

  /**
   * Runs `call` (the handler, returning the response message or its init
   * shape, which is stored as the message create() makes of it) under the
   * request's Idempotency-Key, or directly when the method is a read, the
   * caller is not an API key, or no key was sent. Call after authentication.
   */
  async run(method: DescMethod, request: Message, ctx: HandlerContext, call: () => Promise<object>): Promise<object> {
    const rules = rulesOf(method);
    if (!rules.mutates || rules.auth !== "api_key" || method.methodKind !== "unary") return call();
    // A stored copy of a secret the service keeps only hashed would undo the hashing.
    if (rules.secretResponse) return call();
    const idempotencyKey = ctx.requestHeader.get(HEADER);
    // No keyless de-duplication: without the header every request runs.
    if (idempotencyKey === null) return call();
    if (!VALID_KEY.test(idempotencyKey)) {
      throw new ApiError("invalid_idempotency_key", "Idempotency-Key must be 1 to 255 printable ASCII characters");
    }
    // The handler runs inside the transaction that holds the key, on one
    // pooled connection: a long-poll there would pin a connection for the
    // whole wait, and a few such requests could starve every other caller.
    if (waitsFor(method, request) > 0) {
      throw new ApiError("idempotent_wait", `${method.name} was sent with an Idempotency-Key and 'wait'`, { details: { field: "wait" } });
    }
    const keyId = callerOf(ctx).keyId;
    ctx.responseHeader.set("Idempotency-Key", idempotencyKey);
    const requestHash = hashRequest(method, request);

    return this.store.transaction(async () => {
      const claim = await this.store.claim({
        keyId,
        idempotencyKey,
        requestHash,
        windowSeconds: this.windowSeconds,
        lockTimeoutMs: this.lockTimeoutMs,
      });
      if (claim.outcome === "in_progress") throw inProgress();
      if (claim.outcome === "stored") {
        const { stored } = claim;
        if (!stored.requestHash.equals(requestHash)) throw new ApiError("idempotency_key_reused");
        // A placeholder is never committed; seeing one would be a bug, not a replay.
        if (stored.response === null || stored.status === null) throw inProgress();
        ctx.values.set(httpStatusKey, stored.status);
        ctx.responseHeader.set("X-Idempotent-Replay", "true");
        return fromBinary(method.output, stored.response);
      }
      const response = await call();
      const status = ctx.values.get(httpStatusKey) ?? rules.successStatus;
      // create() returns a message as is, and makes one of an init shape.
      const message = create(method.output, response as Parameters<typeof create>[1]);
      await this.store.complete(keyId, idempotencyKey, toBinary(method.output, message), status);
      return response;
    });
  }
}

/** The request's long-poll seconds, for a mutating method that has a `wait` field (e.g. ReceiveMessages); 0 otherwise. */
function waitsFor(method: DescMethod, request: Message): number {
  const field = method.input.fields.find((f) => f.name === "wait");
  if (field === undefined) return 0;
  const value: unknown = (request as unknown as Record<string, unknown>)[field.localName];
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

function inProgress(): ApiError {
  return new ApiError("idempotency_in_progress", undefined, { headers: { "Retry-After": "1" } });
}

/**
 * SHA-256 of the method's full name and the request. The request is hashed as
 * proto3 JSON with every object's keys sorted, not as protobuf binary: binary
 * writes map entries (and google.protobuf.Struct, e.g. `metadata`) in
 * insertion order, so two equal requests whose JSON bodies list keys in
 * another order would hash differently. Unknown fields are not part of it.
 */
export function hashRequest(method: DescMethod, request: Message): Buffer {
  const hash = createHash("sha256").update(`/${method.parent.typeName}/${method.name}\n`);
  try {
    return hash.update(JSON.stringify(toJson(method.input, request), sortedKeys)).digest();
  } catch {
    // Values JSON cannot express (a NaN in a Struct, a Timestamp out of range)
    // can only arrive in binary; such a request hashes as its binary form.
    return hash.update(toBinary(method.input, request, { writeUnknownFields: false })).digest();
  }
}

function sortedKeys(_key: string, value: unknown): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const sorted: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) sorted[k] = (value as Record<string, unknown>)[k];
  return sorted;
}
