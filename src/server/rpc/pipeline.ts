/**
 * The one call path every RPC takes, whether it arrived as gRPC, gRPC-Web,
 * Connect or REST: authenticate per the method's rules, apply the per-key
 * rate limit, run the handler (under its Idempotency-Key for writes), and
 * normalise any error to the catalog.
 * Connect routes and the REST transcoder are thin adapters over this, so a
 * rule added here holds on every protocol.
 */
import { create, type DescMessage, type DescMethod, type Message, type MessageShape } from "@bufbuild/protobuf";
import { createContextKey, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { timingSafeEqual } from "node:crypto";
import { ApiError } from "../../model/errors.js";
import { effectiveScopes, holdsScope } from "../../model/scopes.js";
import type { AuthenticatedCaller } from "../../model/caller.js";
import type { Keys } from "../../domain/keys.js";
import type { RequestLimiter } from "../../ports/rate-limit.js";
import type { IdempotencyStore } from "../../ports/idempotency.js";
import { baseUrlKey, callerKey, callerWatchKey, requestBudgetKey } from "../../protocol/context.js";
import { CallerWatch, type CallerWatchDeps } from "./caller-watch.js";
import type { ServiceEntry, StreamHandler, UnaryHandler } from "../../protocol/service-entry.js";
import { toApiError, toConnectError, type InternalErrorReporter } from "./errors.js";
import { Idempotency, type IdempotencyOptions } from "./idempotency.js";
import { rulesOf } from "./method-rules.js";
import { seenBeforeDecodingKey } from "./raw-request.js";
import { assertValidRequest } from "./validate-request.js";
import { inRpcSpan, inRpcStreamSpan } from "./rpc-span.js";

/** What admission reads and writes of a call: its headers, its answer's headers, its values. */
export type AdmissionContext = Pick<HandlerContext, "requestHeader" | "responseHeader" | "values">;

/**
 * How admitEarly judged the call: admitted (with the answer headers it set,
 * for a transport whose handler context comes later), or refused;
 * undefined: not judged yet.
 */
const admissionKey = createContextKey<{ admitted: Headers } | ApiError | undefined>(undefined, { description: "early admission" });

export interface PipelineOptions {
  /** Where Idempotency-Key records live; handlers' writes join its transactions. */
  idempotencyStore: IdempotencyStore;
  keys: Keys;
  adminToken: string | undefined;
  rateLimiter: RequestLimiter;
  reportInternal: InternalErrorReporter;
  /** Overrides for the Idempotency-Key handling (tests shorten the wait). */
  idempotency?: IdempotencyOptions;
  /**
   * Ends waiting calls whose key is revoked or narrowed (caller-watch.ts):
   * where key changes are announced, and the clock of the re-checks.
   * Without it, calls are not watched.
   */
  callerWatch?: Omit<CallerWatchDeps, "keys">;
  /**
   * A secret of this process: its own calls to its REST API for an MCP
   * tool carry it in INTERNAL_CALL_HEADER and are not charged to the key's
   * request budget again (the MCP request that made them was).
   */
  internalCallToken?: string;
}

/** Where the service's own calls for an MCP tool carry PipelineOptions.internalCallToken. */
export const INTERNAL_CALL_HEADER = "x-agentbus-internal-call";

export class CallPipeline {
  private readonly unary = new Map<DescMethod, UnaryHandler>();
  private readonly streams = new Map<DescMethod, StreamHandler>();
  private readonly idempotency: Idempotency;

  constructor(
    readonly services: readonly ServiceEntry[],
    readonly options: PipelineOptions,
  ) {
    this.idempotency = new Idempotency(options.idempotencyStore, options.idempotency);
    for (const { service, handlers } of services) {
      for (const method of service.methods) {
        const handler = handlers[method.localName];
        if (method.methodKind === "unary") this.unary.set(method, (handler as UnaryHandler | undefined) ?? notImplemented);
        else if (method.methodKind === "server_streaming") {
          this.streams.set(method, (handler as StreamHandler | undefined) ?? notImplementedStream);
        }
      }
    }
  }

  /** Runs a unary method; throws only ApiError. */
  async callUnary<O extends DescMessage>(method: DescMethod & { output: O }, request: Message, ctx: HandlerContext): Promise<MessageShape<O>> {
    return (await this.runUnary(method, request, ctx, true)) as MessageShape<O>;
  }

  /**
   * callUnary for a caller that reads init shapes as well as messages (the
   * REST renderer): the handler's result comes back as it returned it, a
   * message or its init shape, without create()'s copy of every field of
   * every nested message. A replayed idempotent response is a message.
   */
  async callUnaryShape(method: DescMethod, request: Message, ctx: HandlerContext): Promise<object> {
    return this.runUnary(method, request, ctx, false);
  }

  private runUnary(method: DescMethod, request: Message, ctx: HandlerContext, asMessage: boolean): Promise<object> {
    return inRpcSpan(method, ctx, () => this.runUnaryCall(method, request, ctx, asMessage));
  }

  private async runUnaryCall(method: DescMethod, request: Message, ctx: HandlerContext, asMessage: boolean): Promise<object> {
    try {
      // Whichever decoder built the request, nothing unstorable goes further (see validate-request.ts).
      assertValidRequest(method.input, request, ctx.values.get(seenBeforeDecodingKey));
      await this.admit(method, ctx, request);
      const handler = this.unary.get(method) ?? notImplemented;
      const watch = this.watchCaller(method, ctx);
      const run = async (): Promise<object> => {
        const result = await handler(request, ctx);
        // A wait the key's revocation ended answers with why, not with what it found by then.
        if (watch?.refusal) throw watch.refusal;
        // Anything but an object (undefined: the zero message) goes through create() as before.
        return asMessage || typeof result !== "object" || result === null ? toMessage(method.output, result) : result;
      };
      try {
        return await this.idempotency.run(method, request, ctx, run);
      } finally {
        watch?.dispose();
      }
    } catch (err) {
      throw toApiError(err, this.options.reportInternal);
    }
  }

  /** The watch that ends the call once its key no longer allows it (started only if the handler waits); none without a key. */
  private watchCaller(method: DescMethod, ctx: HandlerContext): CallerWatch | undefined {
    const caller = ctx.values.get(callerKey);
    if (caller === undefined || this.options.callerWatch === undefined) return undefined;
    const watch = new CallerWatch({ ...this.options.callerWatch, keys: this.options.keys }, caller, rulesOf(method).scope);
    ctx.values.set(callerWatchKey, watch);
    return watch;
  }

  /** Runs a server-streaming method; throws only ApiError. */
  callStream(method: DescMethod, request: Message, ctx: HandlerContext): AsyncIterable<Message> {
    return inRpcStreamSpan(method, ctx, () => this.runStream(method, request, ctx));
  }

  private async *runStream(method: DescMethod, request: Message, ctx: HandlerContext): AsyncIterable<Message> {
    try {
      assertValidRequest(method.input, request, ctx.values.get(seenBeforeDecodingKey));
      await this.admit(method, ctx, request);
      const handler = this.streams.get(method) ?? notImplementedStream;
      const watch = this.watchCaller(method, ctx);
      try {
        for await (const item of handler(request, ctx)) yield toMessage(method.output, item);
        // The stream ended because the key no longer allows it: the client is told why.
        if (watch?.refusal) throw watch.refusal;
      } finally {
        watch?.dispose();
      }
    } catch (err) {
      throw toApiError(err, this.options.reportInternal);
    }
  }

  /** Registers every service with Connect, converting errors to ConnectError with an ErrorDetail. */
  registerConnect(router: ConnectRouter): void {
    for (const { service } of this.services) {
      const impl: Record<string, unknown> = {};
      for (const method of service.methods) {
        if (method.methodKind === "unary") {
          impl[method.localName] = async (req: Message, ctx: HandlerContext) => {
            try {
              return await this.callUnary(method, req, ctx);
            } catch (err) {
              throw toConnectError(err as ApiError);
            }
          };
        } else if (method.methodKind === "server_streaming") {
          const callStream = (req: Message, ctx: HandlerContext) => this.callStream(method, req, ctx);
          impl[method.localName] = async function* (req: Message, ctx: HandlerContext) {
            try {
              yield* callStream(req, ctx);
            } catch (err) {
              throw toConnectError(err as ApiError);
            }
          };
        }
      }
      // A method may declare a larger body limit than the default (CreatePdfJob: 10 MiB, docs/decisions.md#size-limits);
      // Connect takes one per service, so its service gets the largest.
      const readMaxBytes = Math.max(0, ...service.methods.map((m) => rulesOf(m).maxBodyBytes));
      // The generic ServiceImpl type cannot be expressed over a runtime service list.
      router.service(service, impl as Parameters<ConnectRouter["service"]>[1], readMaxBytes > 0 ? { readMaxBytes } : undefined);
    }
  }

  /**
   * Admits a call from its headers alone, before a byte of its body is read
   * (issue 26, F3): the key (or admin token) is checked, the request budget
   * charged and the scope judged, so a caller without a valid key never gets
   * to send a body the service would buffer. The transports call this first;
   * the outcome travels in the call's values, and the refusal is thrown. A
   * call missing a key whose refusal points somewhere (redirect_to, built
   * from request fields) is judged once the request is decoded.
   */
  async admitEarly(method: DescMethod, ctx: AdmissionContext): Promise<void> {
    try {
      if (await this.admitHeaders(method, ctx, undefined)) ctx.values.set(admissionKey, { admitted: ctx.responseHeader });
    } catch (err) {
      const refusal = toApiError(err, this.options.reportInternal);
      ctx.values.set(admissionKey, refusal);
      throw refusal;
    }
  }

  private async admit(method: DescMethod, ctx: HandlerContext, request: Message): Promise<void> {
    const early = ctx.values.get(admissionKey);
    if (early instanceof ApiError) throw early;
    if (early !== undefined) {
      if (early.admitted !== ctx.responseHeader) early.admitted.forEach((value, name) => ctx.responseHeader.set(name, value));
      return;
    }
    await this.admitHeaders(method, ctx, request);
  }

  /**
   * Whether the call is admitted; false when it can only be judged with its
   * request (a missing key whose refusal names request fields) and none was
   * given. Throws the refusal.
   */
  private async admitHeaders(method: DescMethod, ctx: AdmissionContext, request: Message | undefined): Promise<boolean> {
    const rules = rulesOf(method);
    if (rules.auth === "none") return true;
    if (rules.auth === "admin_token") {
      this.admitAdmin(ctx);
      return true;
    }
    const presented = ctx.requestHeader.get("x-api-key");
    if (presented === null || presented === "") {
      if (rules.missingKeyRedirect !== undefined && request === undefined) return false;
      const redirect = rules.missingKeyRedirect === undefined || request === undefined ? undefined : fillRedirect(rules.missingKeyRedirect, request, ctx.values.get(baseUrlKey));
      throw new ApiError(rules.missingKeyError, rules.missingKeyError === "unauthorized" ? "Missing X-API-Key header" : undefined, {
        ...(redirect === undefined ? {} : { details: { redirect_to: redirect } }),
      });
    }
    const caller = await this.authenticate(presented, ctx);
    // After the budget, so a key probing what it may do pays for each try.
    const missing = rules.scopes.find((scope) => !holdsScope(caller.scopes, scope));
    if (missing !== undefined) {
      throw new ApiError("insufficient_scope", `This call needs the '${missing}' scope, which this key does not hold`, {
        details: { required_scope: missing, granted_scopes: [...effectiveScopes(caller.scopes)] },
      });
    }
    return true;
  }

  /**
   * The caller a presented key stands for, with its request budget charged
   * (the IETF RateLimit headers set on `ctx`'s answer): 401 for a key that is
   * not a valid one, 429 past the budget. The one admission of a key, for
   * the RPCs and for /mcp. A call the service makes to itself for an MCP
   * tool (internalCallToken) was charged when the MCP request came in.
   */
  async authenticate(presented: string, ctx: AdmissionContext): Promise<AuthenticatedCaller> {
    const caller = await this.options.keys.authenticate(presented);
    ctx.values.set(callerKey, caller);
    if (this.isInternalCall(ctx.requestHeader)) return caller;
    const decision = await this.options.rateLimiter.hit(caller.keyId);
    if (decision.limit > 0) {
      // The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers), on every answer, refusals too.
      ctx.responseHeader.set("RateLimit-Limit", String(decision.limit));
      ctx.responseHeader.set("RateLimit-Remaining", String(decision.remaining));
      ctx.responseHeader.set("RateLimit-Reset", String(decision.retryAfterSeconds));
      ctx.values.set(requestBudgetKey, {
        limit: decision.limit,
        remaining: decision.remaining,
        resetSeconds: decision.retryAfterSeconds,
        windowSeconds: decision.windowSeconds,
      });
    }
    if (!decision.allowed) {
      throw new ApiError("rate_limit_exceeded", undefined, {
        details: { retry_after: decision.retryAfterSeconds },
        headers: { "Retry-After": String(decision.retryAfterSeconds) },
      });
    }
    return caller;
  }

  private isInternalCall(headers: Headers): boolean {
    const expected = this.options.internalCallToken;
    const presented = headers.get(INTERNAL_CALL_HEADER);
    if (expected === undefined || presented === null) return false;
    const a = Buffer.from(presented), b = Buffer.from(expected);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private admitAdmin(ctx: AdmissionContext): void {
    const expected = this.options.adminToken;
    if (expected === undefined) throw new ApiError("admin_disabled");
    const presented = ctx.requestHeader.get("x-admin-token") ?? "";
    const a = Buffer.from(presented), b = Buffer.from(expected);
    if (a.length !== b.length || !timingSafeEqual(a, b)) throw new ApiError("admin_unauthorized");
  }
}

/** A missing_key_redirect with the request's fields filled in, on the request's base URL. */
function fillRedirect(template: string, request: Message, base: string): string {
  const fields = request as unknown as Record<string, unknown>;
  const path = template.replace(/\{([a-z_]+)\}/g, (_m, name: string) => {
    const value = fields[name.replace(/_([a-z])/g, (_c, ch: string) => ch.toUpperCase())];
    return encodeURIComponent(typeof value === "string" ? value : "");
  });
  return `${base}${path}`;
}

function toMessage(schema: DescMessage, value: unknown): Message {
  // Handlers may return a message or its init shape.
  return create(schema, value as Parameters<typeof create>[1]);
}

const notImplemented: UnaryHandler = (_req, ctx) => {
  throw new ApiError("not_implemented", `${ctx.method.parent.name}.${ctx.method.name} is not implemented yet`);
};

// eslint-disable-next-line require-yield
const notImplementedStream: StreamHandler = async function* (_req, ctx) {
  throw new ApiError("not_implemented", `${ctx.method.parent.name}.${ctx.method.name} is not implemented yet`);
};
