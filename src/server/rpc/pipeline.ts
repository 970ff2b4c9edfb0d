/**
 * The one call path every RPC takes, whether it arrived as gRPC, gRPC-Web,
 * Connect or REST: authenticate per the method's rules, apply the per-key
 * rate limit, run the handler (under its Idempotency-Key for writes), and
 * normalise any error to the catalog.
 * Connect routes and the REST transcoder are thin adapters over this, so a
 * rule added here holds on every protocol.
 */
import { create, type DescMessage, type DescMethod, type Message, type MessageShape } from "@bufbuild/protobuf";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { timingSafeEqual } from "node:crypto";
import { ApiError } from "../../model/errors.js";
import { effectiveScopes, holdsScope } from "../../model/scopes.js";
import type { Keys } from "../../domain/keys.js";
import type { RequestLimiter } from "../../ports/rate-limit.js";
import type { IdempotencyStore } from "../../ports/idempotency.js";
import { baseUrlKey, callerKey, requestBudgetKey } from "../../protocol/context.js";
import type { ServiceEntry, StreamHandler, UnaryHandler } from "../../protocol/service-entry.js";
import { toApiError, toConnectError, type InternalErrorReporter } from "./errors.js";
import { Idempotency, type IdempotencyOptions } from "./idempotency.js";
import { rulesOf } from "./method-rules.js";
import { assertValidRequest } from "./validate-request.js";

export interface PipelineOptions {
  /** Where Idempotency-Key records live; handlers' writes join its transactions. */
  idempotencyStore: IdempotencyStore;
  keys: Keys;
  adminToken: string | undefined;
  rateLimiter: RequestLimiter;
  reportInternal: InternalErrorReporter;
  /** Overrides for the Idempotency-Key handling (tests shorten the wait). */
  idempotency?: IdempotencyOptions;
}

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

  private async runUnary(method: DescMethod, request: Message, ctx: HandlerContext, asMessage: boolean): Promise<object> {
    try {
      // Whichever decoder built the request, nothing unstorable goes further (see validate-request.ts).
      assertValidRequest(method.input, request);
      await this.admit(method, ctx, request);
      const handler = this.unary.get(method) ?? notImplemented;
      const run = async (): Promise<object> => {
        const result = await handler(request, ctx);
        // Anything but an object (undefined: the zero message) goes through create() as before.
        return asMessage || typeof result !== "object" || result === null ? toMessage(method.output, result) : result;
      };
      return await this.idempotency.run(method, request, ctx, run);
    } catch (err) {
      throw toApiError(err, this.options.reportInternal);
    }
  }

  /** Runs a server-streaming method; throws only ApiError. */
  async *callStream(method: DescMethod, request: Message, ctx: HandlerContext): AsyncIterable<Message> {
    try {
      assertValidRequest(method.input, request);
      await this.admit(method, ctx, request);
      const handler = this.streams.get(method) ?? notImplementedStream;
      for await (const item of handler(request, ctx)) yield toMessage(method.output, item);
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

  private async admit(method: DescMethod, ctx: HandlerContext, request: Message): Promise<void> {
    const rules = rulesOf(method);
    if (rules.auth === "none") return;
    if (rules.auth === "admin_token") return this.admitAdmin(ctx);
    const presented = ctx.requestHeader.get("x-api-key");
    if (presented === null || presented === "") {
      const redirect = rules.missingKeyRedirect === undefined ? undefined : fillRedirect(rules.missingKeyRedirect, request, ctx.values.get(baseUrlKey));
      throw new ApiError(rules.missingKeyError, rules.missingKeyError === "unauthorized" ? "Missing X-API-Key header" : undefined, {
        ...(redirect === undefined ? {} : { details: { redirect_to: redirect } }),
      });
    }
    const caller = await this.options.keys.authenticate(presented);
    ctx.values.set(callerKey, caller);
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
    // After the budget, so a key probing what it may do pays for each try.
    if (rules.scope !== undefined && rules.scope !== "any_key" && !holdsScope(caller.scopes, rules.scope)) {
      throw new ApiError("insufficient_scope", `This call needs the '${rules.scope}' scope, which this key does not hold`, {
        details: { required_scope: rules.scope, granted_scopes: [...effectiveScopes(caller.scopes)] },
      });
    }
  }

  private admitAdmin(ctx: HandlerContext): void {
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
