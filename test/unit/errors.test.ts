import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorDetailSchema } from "../../gen/agentbus/v1/errors_pb.js";
import { ApiError, errorCatalog } from "../../src/model/errors.js";
import { toApiError, toConnectError, toRestError } from "../../src/server/rpc/errors.js";

const neverReported = () => {
  throw new Error("should not be reported");
};

describe("the error catalog", () => {
  it("gives every 409 and 422 a suggestion", () => {
    for (const [code, entry] of Object.entries(errorCatalog)) {
      if (entry.status === 409 || entry.status === 422) expect(entry.suggestion, code).toBeTruthy();
    }
  });

  it("uses lowercase snake_case codes", () => {
    for (const code of Object.keys(errorCatalog)) expect(code).toMatch(/^[a-z]+(_[a-z0-9]+)*$/);
  });
});

describe("REST error body", () => {
  it("carries error, message, suggestion, request_id, documentation_url and the extra details", () => {
    const err = new ApiError("channel_write_rate_exceeded", undefined, { details: { retry_after: 60 }, headers: { "Retry-After": "60" } });
    const rest = toRestError(err, "req-1");
    expect(rest.status).toBe(429);
    expect(rest.headers).toEqual({ "Retry-After": "60" });
    expect(rest.body).toEqual({
      retry_after: 60,
      error: "channel_write_rate_exceeded",
      message: errorCatalog.channel_write_rate_exceeded.message,
      suggestion: errorCatalog.channel_write_rate_exceeded.suggestion,
      request_id: "req-1",
      documentation_url: "/docs/errors#channel_write_rate_exceeded",
    });
  });
});

describe("gRPC error mapping (grpc-status)", () => {
  const cases: Array<[ConstructorParameters<typeof ApiError>[0], Code]> = [
    ["unauthorized", Code.Unauthenticated],
    ["channel_access_denied", Code.PermissionDenied],
    ["channel_not_found", Code.NotFound],
    ["alias_conflict", Code.AlreadyExists],
    ["already_claimed", Code.FailedPrecondition],
    ["message_expired", Code.FailedPrecondition],
    ["payload_too_large", Code.InvalidArgument],
    ["invalid_mode", Code.InvalidArgument],
    ["rate_limit_exceeded", Code.ResourceExhausted],
    ["channel_paused", Code.Unavailable],
    ["not_implemented", Code.Unimplemented],
  ];
  for (const [code, grpc] of cases) {
    it(`maps ${code} to ${Code[grpc]} with an ErrorDetail`, () => {
      const connect = toConnectError(new ApiError(code));
      expect(connect.code).toBe(grpc);
      const [detail] = connect.findDetails(ErrorDetailSchema);
      expect(detail?.error).toBe(code);
      expect(detail?.suggestion).toBe(errorCatalog[code].suggestion ?? "");
    });
  }

  it("round-trips details through the ErrorDetail", () => {
    const original = new ApiError("invalid_fields", "Unknown fields: x", { details: { fields: ["x"] } });
    const back = toApiError(toConnectError(original), neverReported);
    expect(back.code).toBe("invalid_fields");
    expect(back.details).toEqual({ fields: ["x"] });
    expect(back.message).toBe("Unknown fields: x");
  });
});

describe("toApiError", () => {
  it("hides unexpected errors behind internal_error and reports them", () => {
    const reported: unknown[] = [];
    const err = toApiError(new TypeError("secret internals"), (e) => reported.push(e));
    expect(err.code).toBe("internal_error");
    expect(err.message).not.toContain("secret internals");
    expect(reported).toHaveLength(1);
  });

  it("maps a lost database connection to 503 store_unavailable without reporting it as a bug", () => {
    const err = toApiError(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }), neverReported);
    expect(err.code).toBe("store_unavailable");
    expect(err.status).toBe(503);
  });

  it("keeps Connect's own errors as catalog codes", () => {
    expect(toApiError(new ConnectError("nope", Code.Unimplemented), neverReported).code).toBe("not_implemented");
  });
});
