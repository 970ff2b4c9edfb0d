/**
 * Turning whatever a handler threw into what the caller sees: a ConnectError
 * with an ErrorDetail for gRPC/Connect, the error body for REST. Both carry
 * the catalog code and suggestion; internals never leave the process.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "../../../gen/agentbus/v1/errors_pb.js";
import { ApiError, errorCatalog, isErrorCode, type ErrorCode, type GrpcStatus } from "../../model/errors.js";
import type { JsonValue } from "../../model/json.js";
import { isConnectionError } from "../../model/storage-errors.js";

const grpcCodes: Record<GrpcStatus, Code> = {
  invalid_argument: Code.InvalidArgument,
  unauthenticated: Code.Unauthenticated,
  permission_denied: Code.PermissionDenied,
  not_found: Code.NotFound,
  already_exists: Code.AlreadyExists,
  failed_precondition: Code.FailedPrecondition,
  aborted: Code.Aborted,
  resource_exhausted: Code.ResourceExhausted,
  unimplemented: Code.Unimplemented,
  internal: Code.Internal,
  unavailable: Code.Unavailable,
};

/** Used when something a client could not have caused goes wrong. */
export type InternalErrorReporter = (err: unknown) => void;

/** Normalises anything thrown into an ApiError; unexpected errors are reported, not shown. */
export function toApiError(err: unknown, report: InternalErrorReporter): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ConnectError) {
    const detail = err.findDetails(ErrorDetailSchema)[0];
    if (detail && isErrorCode(detail.error)) {
      // protobuf-es represents google.protobuf.Struct fields as plain JSON objects.
      const details = (detail.details ?? {}) as Record<string, JsonValue>;
      return new ApiError(detail.error, err.rawMessage, { suggestion: detail.suggestion || undefined, details });
    }
    // Errors raised by Connect itself (bad protobuf input, deadlines, aborts).
    return new ApiError(connectCodeToErrorCode(err.code), err.rawMessage);
  }
  if (isConnectionError(err)) return new ApiError("store_unavailable", undefined, { cause: err });
  if (isUnstorableText(err)) {
    return new ApiError("invalid_string", "Text must not contain the NUL character (U+0000)", {
      suggestion: "Remove U+0000 from strings and metadata; PostgreSQL cannot store it.",
      cause: err,
    });
  }
  report(err);
  return new ApiError("internal_error", undefined, { cause: err });
}

// 22021 character_not_in_repertoire (NUL in text), 22P05 untranslatable_character
// (\u0000 in jsonb): the caller sent text PostgreSQL cannot store, not a bug.
const UNSTORABLE_TEXT = new Set(["22021", "22P05"]);

function isUnstorableText(err: unknown): boolean {
  return typeof err === "object" && err !== null && UNSTORABLE_TEXT.has(String((err as { code?: unknown }).code));
}

function connectCodeToErrorCode(code: Code): ErrorCode {
  switch (code) {
    case Code.InvalidArgument:
    case Code.OutOfRange:
      return "invalid_field";
    case Code.Unauthenticated:
      return "unauthorized";
    case Code.PermissionDenied:
      return "forbidden";
    case Code.NotFound:
      return "not_found";
    case Code.ResourceExhausted:
      return "payload_too_large";
    case Code.Unimplemented:
      return "not_implemented";
    case Code.Unavailable:
    case Code.Canceled:
    case Code.DeadlineExceeded:
      return "shutting_down";
    default:
      return "internal_error";
  }
}

export function toConnectError(err: ApiError): ConnectError {
  const entry = errorCatalog[err.code];
  const detail = create(ErrorDetailSchema, {
    error: err.code,
    suggestion: err.suggestion ?? "",
    details: Object.keys(err.details).length > 0 ? (err.details as JsonObject) : undefined,
  });
  return new ConnectError(err.message, grpcCodes[entry.grpc], err.headers, [{ desc: ErrorDetailSchema, value: detail }], err);
}

export interface RestError {
  status: number;
  headers: Record<string, string>;
  body: Record<string, JsonValue>;
}

/** The REST error body (docs/decisions.md#error-body): {error, message, suggestion, request_id, documentation_url, ...details}. */
export function toRestError(err: ApiError, requestId: string): RestError {
  return {
    status: err.status,
    headers: err.headers,
    body: {
      ...err.details,
      error: err.code,
      message: err.message,
      ...(err.suggestion ? { suggestion: err.suggestion } : {}),
      request_id: requestId,
      documentation_url: `/docs/errors#${err.code}`,
    },
  };
}
