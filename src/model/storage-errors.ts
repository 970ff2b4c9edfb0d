/**
 * Whether a failure means the database was out of reach, as opposed to an
 * error about the query itself. It sits in the model because three layers
 * decide on it — the store (retry a batch row by row or not), the transport
 * (503 store_unavailable) and the log limiter (one line per outage) — and
 * none of them may import another's internals to ask.
 */
const CONNECTION_ERRNOS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

// 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now.
const SHUTDOWN_SQLSTATES = new Set(["57P01", "57P02", "57P03"]);

// pg reports a dropped or timed-out connection only through the message.
const CONNECTION_MESSAGES = [
  "Connection terminated",
  "timeout exceeded when trying to connect",
  "Client has encountered a connection error and is not queryable",
];

/**
 * True when err means the database could not be reached or the connection
 * was lost (callers answer 503 store_unavailable), false for an error the
 * server raised about the query itself.
 */
export function isConnectionError(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message, errors } = err as { code?: unknown; message?: unknown; errors?: unknown };
  if (typeof code === "string") {
    if (CONNECTION_ERRNOS.has(code) || SHUTDOWN_SQLSTATES.has(code)) return true;
    // SQLSTATE class 08: connection exception.
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  if (typeof message === "string" && CONNECTION_MESSAGES.some((m) => message.includes(m))) return true;
  // Node's happy-eyeballs connect (localhost → ::1 and 127.0.0.1) fails with
  // an AggregateError holding one error per address.
  if (Array.isArray(errors)) return errors.some(isConnectionError);
  return false;
}
