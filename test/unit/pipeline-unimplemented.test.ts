/** A method whose handler is missing answers not_implemented, after authentication, on every protocol. */
import { createContextValues, createHandlerContext } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { KeyService } from "../../gen/agentbus/v1/key_service_pb.js";
import { create } from "@bufbuild/protobuf";
import { CreateKeyRequestSchema } from "../../gen/agentbus/v1/key_service_pb.js";
import { ApiError } from "../../src/model/errors.js";
import { FixedWindowLimiter } from "../../src/domain/rate-limit.js";
import { systemClock } from "../../src/model/time.js";
import type { Keys } from "../../src/domain/keys.js";
import type { IdempotencyStore } from "../../src/ports/idempotency.js";
import { CallPipeline } from "../../src/server/rpc/pipeline.js";

describe("CallPipeline", () => {
  it("answers 501 not_implemented for a method without a handler", async () => {
    const pipeline = new CallPipeline([{ service: KeyService, handlers: {} }], {
      idempotencyStore: {} as IdempotencyStore,
      keys: {} as Keys,
      adminToken: undefined,
      rateLimiter: new FixedWindowLimiter(0, 60_000, systemClock),
      reportInternal: () => {},
    });
    const method = KeyService.method.createKey;
    const ctx = createHandlerContext({
      service: KeyService,
      method,
      protocolName: "test",
      requestMethod: "POST",
      url: "http://test/",
      contextValues: createContextValues(),
    });
    const err = await pipeline.callUnary(method, create(CreateKeyRequestSchema, { agentLabel: "x" }), ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe("not_implemented");
    expect((err as ApiError).status).toBe(501);
  });
});
