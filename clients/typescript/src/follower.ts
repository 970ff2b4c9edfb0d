/**
 * followChannel(): every message of a channel, in order, as an async
 * iterable over WatchMessages that survives dropped connections.
 *
 * The service opens each stream with the cursor it starts from, and each
 * message carries its own; after a drop the stream is reopened with `since` =
 * the last cursor received. The service orders a channel strictly by that
 * cursor (created_at follows commit order in a channel), so the resumed stream
 * starts exactly after the last message seen (or, before any, where the first
 * stream started): no gap, no duplicate.
 */
import type { Message } from "../../../gen/agentbus/v1/message_pb.js";
import type { AgentbusClient } from "./client.js";
import { backoffMs, isTransient, sleep } from "./retry.js";

export interface FollowOptions {
  client: AgentbusClient;
  /** Channel id or alias. */
  channel: string;
  /**
   * Start after this cursor (a `cursor` from an earlier run, a list call's
   * `next_cursor`, or "0" for everything live). Absent: only messages created
   * from the moment the first stream opens.
   */
  since?: string;
  /** Ends the iteration (without an error). */
  signal?: AbortSignal;
  /** Reconnect backoff; defaults 250 ms doubling up to 10 s, with jitter. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Called before each reconnect; `error` is undefined when the service ended the stream itself. */
  onReconnect?: (event: { attempt: number; cursor: string | undefined; error: unknown }) => void;
}

export interface FollowedMessage {
  message: Message;
  /** Store it to resume a later run with `since` exactly after this message. */
  cursor: string;
}

/**
 * Yields until `signal` aborts or the caller stops iterating. Rejects only on
 * errors that retrying cannot fix (bad key, no access, unknown channel).
 */
export async function* followChannel(options: FollowOptions): AsyncGenerator<FollowedMessage, void, undefined> {
  const { client, channel, signal } = options;
  let cursor = options.since;
  let attempt = 0;
  while (!signal?.aborted) {
    // One controller per connection, so leaving the loop (break, return,
    // throw in the caller's loop body) closes the stream on the service too.
    const connection = new AbortController();
    const stop = () => connection.abort(signal?.reason);
    signal?.addEventListener("abort", stop, { once: true });
    let error: unknown;
    try {
      for await (const item of client.messages.watchMessages({ identifier: channel, since: cursor }, { signal: connection.signal })) {
        attempt = 0;
        cursor = item.cursor;
        // The opening response: only where the stream starts.
        if (item.message === undefined) continue;
        yield { message: item.message, cursor: item.cursor };
      }
    } catch (err) {
      if (signal?.aborted) return;
      if (!isTransient(err)) throw err;
      error = err;
    } finally {
      signal?.removeEventListener("abort", stop);
      connection.abort();
    }
    attempt++;
    options.onReconnect?.({ attempt, cursor, error });
    await sleep(backoffMs(attempt, options.minBackoffMs ?? 250, options.maxBackoffMs ?? 10_000), signal);
  }
}
