/**
 * Rate-limited logging for conditions that repeat while something we depend
 * on is down (the database, Redis): every retry loop and every request would
 * otherwise log its own line, each with a stack (about 20 per second during a
 * database outage, drowning what matters).
 *
 * Per condition (its message): the first occurrence is logged at once; later
 * ones are counted and summed up at most once per interval ("N more in the
 * last Xs"); `recovered` logs one line when the caller knows it is over.
 * Expected failures (connection refused, connection lost) are logged as
 * their message and code, without the stack, which says nothing about them.
 */
import { JobFailure } from "../model/job-failure.js";
import type { Logger } from "./logger.js";
import { isConnectionError } from "../model/storage-errors.js";
import { systemClock, type Clock, type Timer } from "../model/time.js";

type Level = "debug" | "warn" | "error";

interface Condition {
  level: Level;
  fields: Record<string, unknown>;
  /** Occurrences since the last line logged. */
  pending: number;
  since: number;
  timer: Timer | undefined;
}

export interface LogLimiterOptions {
  intervalMs: number;
  /** Times the intervals (default: the system clock). */
  clock?: Clock;
}

export class LogLimiter {
  private readonly conditions = new Map<string, Condition>();
  private readonly clock: Clock;

  constructor(
    private readonly logger: Logger,
    private readonly options: LogLimiterOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /**
   * For what anyone can cause at will and is no fault of ours (a client
   * abandoning its upload): a debug line without a stack, summed up like
   * the rest, so a flood of them cannot flood the log.
   */
  debug(msg: string, fields: Record<string, unknown> = {}): void {
    this.report("debug", msg, undefined, fields);
  }

  warn(msg: string, err?: unknown, fields: Record<string, unknown> = {}): void {
    this.report("warn", msg, err, fields);
  }

  error(msg: string, err?: unknown, fields: Record<string, unknown> = {}): void {
    this.report("error", msg, err, fields);
  }

  /** The condition is over: one line with what was not logged yet, if it was seen at all. */
  recovered(msg: string, recoveryMsg: string): void {
    const state = this.conditions.get(msg);
    if (!state) return;
    state.timer?.cancel();
    this.conditions.delete(msg);
    this.logger.info({ ...state.fields, suppressed: state.pending }, recoveryMsg);
  }

  /** A limiter whose lines carry these fields too (e.g. the component). */
  child(fields: Record<string, unknown>): LogLimiter {
    return new LogLimiter(this.logger.child(fields), this.options);
  }

  private report(level: Level, msg: string, err: unknown, fields: Record<string, unknown>): void {
    const state = this.conditions.get(msg);
    if (state?.timer !== undefined) {
      state.pending++;
      return;
    }
    // New, or quiet for a whole interval: logged at once. A quiet condition
    // is kept (retries back off beyond the interval), so that `recovered`
    // still reports its end.
    this.logger[level]({ ...fields, ...errorFields(err) }, msg);
    const current: Condition = state ?? { level, fields, pending: 0, since: this.clock.monotonicMs(), timer: undefined };
    current.since = this.clock.monotonicMs();
    this.conditions.set(msg, current);
    this.schedule(msg, current);
  }

  /** At the end of each interval: a summary if anything was counted, else the condition goes quiet. */
  private schedule(msg: string, state: Condition): void {
    state.timer = this.clock.setTimer(
      this.options.intervalMs,
      () => {
        if (this.conditions.get(msg) !== state) return;
        if (state.pending === 0) {
          state.timer = undefined;
          return;
        }
        const seconds = Math.round((this.clock.monotonicMs() - state.since) / 100) / 10;
        this.logger[state.level]({ ...state.fields, repeated: state.pending }, `${msg} (${state.pending} more in the last ${seconds}s)`);
        state.pending = 0;
        state.since = this.clock.monotonicMs();
        this.schedule(msg, state);
      },
      { unref: true },
    );
  }
}

// ioredis's own wording for a lost or refused connection.
const REDIS_CONNECTION_MESSAGES = ["Connection is closed", "Reached the max retries per request limit", "Stream isn't writeable"];

/**
 * A failure of the kind an outage produces, or one a job raised on purpose
 * (a JobFailure: the video host unreachable, a 429): its message says it
 * all, the stack nothing.
 */
export function isExpectedFailure(err: unknown): boolean {
  if (err instanceof JobFailure) return true;
  if (isConnectionError(err)) return true;
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (code === "store_unavailable") return true;
  return typeof message === "string" && REDIS_CONNECTION_MESSAGES.some((m) => message.includes(m));
}

/**
 * Log fields for err: the full error (pino prints its stack) unless it is an
 * expected failure. That one is its own message only: pino's serializer
 * would append every cause's message ("…: cannot resolve h: getaddrinfo
 * ENOTFOUND h"), and the messages that wrap a cause already say what it was.
 * The innermost system code (ENOTFOUND, ECONNREFUSED) is kept as `cause`.
 */
export function errorFields(err: unknown): Record<string, unknown> {
  if (err === undefined) return {};
  if (!isExpectedFailure(err)) return { err };
  const { code, message } = err as { code?: unknown; message?: unknown };
  // Node's happy-eyeballs connect leaves the message empty and lists one error per address.
  const inner = (err as { errors?: Array<{ message?: string }> }).errors?.map((e) => e.message).join("; ");
  const text = typeof message === "string" && message !== "" ? message : inner || String(err);
  const cause = systemCode((err as { cause?: unknown }).cause);
  return { error: { message: text, ...(typeof code === "string" ? { code } : {}), ...(cause && cause !== code ? { cause } : {}) } };
}

/** The innermost errno-style code (ENOTFOUND, ECONNREFUSED) in a chain of causes. */
function systemCode(err: unknown): string | undefined {
  let found: string | undefined;
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    const { code } = e as { code?: unknown };
    if (typeof code === "string" && /^E[A-Z_]+$/.test(code)) found = code;
  }
  return found;
}
