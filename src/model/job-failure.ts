/**
 * Why an async job could not produce its result. `code` is a catalog code
 * (src/model/errors.ts), so a failed job's `error` ({error, message}) is
 * documented at /docs/errors like every other error. `retryable` says
 * whether running the job again may succeed (a timeout, a 429 or 5xx from a
 * provider) or not (no captions, a refused address, an unusable answer).
 */
import type { ErrorCode } from "../model/errors.js";

export class JobFailure extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly retryable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "JobFailure";
  }

  /** The `error` object of a failed job (docs/decisions.md#job-record). */
  toJobError(): { error: string; message: string } {
    return { error: this.code, message: this.message };
  }
}
