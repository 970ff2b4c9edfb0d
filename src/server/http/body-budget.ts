/**
 * How many request-body bytes the process holds at once, per key and in all
 * (issue 26, F3; docs/operations.md#body-limits). A body is buffered whole
 * before it is decoded (up to 10 MiB for a PDF), so without a bound a few
 * callers uploading in parallel could pin the process's memory; with one,
 * a key past its share is refused (429 too_many_request_bytes) and the
 * process past its total answers 503 server_busy, each at once and without
 * reading further. Bytes are charged as they arrive and given back when the
 * request ends. Callers without a key (the keyless routes, whose bodies are
 * small) share one account.
 */
import { ApiError } from "../../model/errors.js";

export interface BodyBudgetLimits {
  /** Bytes one key's requests may hold at once. */
  perKeyBytes: number;
  /** Bytes all requests of the process may hold at once. */
  totalBytes: number;
}

/** One request's charge against the budget. */
export interface BodyAccount {
  /** Adds `bytes` to the request's charge; throws the refusal when it does not fit, charging nothing. */
  charge(bytes: number): void;
  /** Gives the whole charge back; idempotent. */
  release(): void;
}

/** The account keyless requests share. */
export const KEYLESS_ACCOUNT = "";

export class BodyBudget {
  private total = 0;
  private readonly byKey = new Map<string, number>();

  constructor(private readonly limits: BodyBudgetLimits) {}

  /** Bytes held now (all requests). */
  get held(): number {
    return this.total;
  }

  open(key: string): BodyAccount {
    let charged = 0;
    let released = false;
    return {
      charge: (bytes) => {
        if (released || bytes <= 0) return;
        const ofKey = this.byKey.get(key) ?? 0;
        if (ofKey + bytes > this.limits.perKeyBytes) {
          throw new ApiError("too_many_request_bytes", `This key's requests already hold ${mib(ofKey)} of request bodies on this server; the limit is ${mib(this.limits.perKeyBytes)}`, {
            details: { max_buffered_bytes_per_key: this.limits.perKeyBytes, retry_after: 1 },
            headers: { "Retry-After": "1" },
          });
        }
        if (this.total + bytes > this.limits.totalBytes) {
          throw new ApiError("server_busy", "The server is receiving as many request bodies as it holds at once", {
            details: { retry_after: 1 },
            headers: { "Retry-After": "1" },
          });
        }
        this.byKey.set(key, ofKey + bytes);
        this.total += bytes;
        charged += bytes;
      },
      release: () => {
        if (released) return;
        released = true;
        if (charged === 0) return;
        this.total -= charged;
        const left = (this.byKey.get(key) ?? charged) - charged;
        if (left > 0) this.byKey.set(key, left);
        else this.byKey.delete(key);
      },
    };
  }
}

const mib = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`;
