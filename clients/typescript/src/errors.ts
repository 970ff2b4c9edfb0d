/**
 * One error type for everything a call can fail with, keyed by the service's
 * stable string code (the same `error` the REST body carries), so callers
 * branch on "channel_not_found" rather than on a transport-specific status.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/agentbus/v1/errors_pb.js";

export class AgentbusError extends Error {
  override readonly name = "AgentbusError";
  /**
   * The service's error code (e.g. "already_claimed"). For failures that never
   * reached the service's error handling (connection refused, deadline,
   * cancellation) it is the gRPC code name in snake_case, e.g. "unavailable";
   * `fromService` tells the two apart.
   */
  readonly code: string;
  /** What the caller can do about it; "" when the service had no advice. */
  readonly suggestion: string;
  readonly grpcCode: Code;
  /** Seconds to wait before retrying, when the service said so (429, 503, idempotency_in_progress). */
  readonly retryAfterSeconds: number | undefined;
  /** Extra fields of the error (retry_after, violations, fields, ...), as in the REST body. */
  readonly details: JsonObject;
  /** True when the service attached an agentbus.v1.ErrorDetail. */
  readonly fromService: boolean;
  /** Response headers and trailers of the failed call. */
  readonly metadata: Headers;
  override readonly cause: ConnectError;

  constructor(cause: ConnectError) {
    super(cause.rawMessage, { cause });
    this.cause = cause;
    this.grpcCode = cause.code;
    this.metadata = cause.metadata;
    const detail = cause.findDetails(ErrorDetailSchema)[0];
    this.fromService = detail !== undefined && detail.error !== "";
    this.code = this.fromService && detail ? detail.error : snakeCase(Code[cause.code] ?? "unknown");
    this.suggestion = detail?.suggestion ?? "";
    // protobuf-es represents google.protobuf.Struct fields as plain JSON objects.
    this.details = detail?.details ?? {};
    this.retryAfterSeconds = retryAfter(this.details.retry_after, cause.metadata.get("retry-after"));
  }
}

/** Converts what a Connect call threw (always a ConnectError, but be lenient) into an AgentbusError. */
export function toAgentbusError(err: unknown): AgentbusError {
  if (err instanceof AgentbusError) return err;
  return new AgentbusError(ConnectError.from(err));
}

/** True when `err` is an AgentbusError, and when `code` is given, one with that service code. */
export function isAgentbusError(err: unknown, code?: string): err is AgentbusError {
  return err instanceof AgentbusError && (code === undefined || err.code === code);
}

function retryAfter(fromDetail: JsonValue | undefined, fromHeader: string | null): number | undefined {
  if (typeof fromDetail === "number" && Number.isFinite(fromDetail)) return fromDetail;
  const parsed = fromHeader === null ? Number.NaN : Number(fromHeader);
  return Number.isFinite(parsed) ? parsed : undefined;
}

function snakeCase(name: string): string {
  return name.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase();
}
