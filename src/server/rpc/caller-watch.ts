/**
 * A long call ends when its key stops allowing it (issue 26, F5;
 * docs/decisions.md#revocation): a watch stream, a long-poll or an MCP
 * session of a key that is revoked, or narrowed so that it loses the call's
 * scope, is ended within seconds, on every replica, instead of delivering
 * until the client leaves.
 *
 * How a replica learns of it: the change is announced on the wake bus
 * (Keys.onChange → `key:<key id>`), and each open call of that key re-reads
 * the key from the database at once; in case the announcement is lost (Redis
 * down, a reconnecting LISTEN) each open call also re-checks the key every
 * few seconds through the key cache (one lookup per key and cache lifetime,
 * not per call). The watch is only started for calls that wait (they ask for
 * the call's signal), so an ordinary request pays nothing.
 */
import type { Caller } from "../../model/caller.js";
import { ApiError } from "../../model/errors.js";
import { effectiveScopes, holdsScope, type KeyScope, type KeyScopes } from "../../model/scopes.js";
import type { Clock, Timer } from "../../model/time.js";

/** What the watch needs of the keys. */
export interface KeyChecks {
  /** The key as the database has it now; undefined once revoked or gone. */
  recheck(keyId: string): Promise<{ scopes: KeyScopes } | undefined>;
  /** The key as this process last saw it (cached for a few seconds); undefined once revoked or gone. */
  current(keyId: string): Promise<{ scopes: KeyScopes } | undefined>;
}

/** Where key changes are announced (the wake bus, by topic). */
export interface KeyChangeFeed {
  subscribe(topic: string, listener: () => void): () => void;
}

export interface CallerWatchDeps {
  keys: KeyChecks;
  feed: KeyChangeFeed | undefined;
  /** The topic a key's changes are announced on. */
  topic: (keyId: string) => string;
  clock: Clock;
  /** How often an open call re-checks its key without an announcement. */
  recheckMs: number;
}

/** Why a key no longer allows a call it had started, or undefined while it does. */
export async function keyRefusal(keys: KeyChecks, caller: Caller, scope: KeyScope | "any_key" | undefined, fresh: boolean): Promise<ApiError | undefined> {
  const record = fresh ? await keys.recheck(caller.keyId) : await keys.current(caller.keyId);
  if (record === undefined) {
    return new ApiError("unauthorized", "This key was revoked while the call was open", {
      suggestion: "Mint a new key with POST /v1/keys and open the call again with it.",
    });
  }
  if (scope !== undefined && scope !== "any_key" && !holdsScope(record.scopes, scope)) {
    return new ApiError("insufficient_scope", `This key no longer holds the '${scope}' scope this call needs`, {
      details: { required_scope: scope, granted_scopes: [...effectiveScopes(record.scopes)] },
    });
  }
  return undefined;
}

export class CallerWatch {
  private controller: AbortController | undefined;
  private unsubscribe: (() => void) | undefined;
  private timer: Timer | undefined;
  private disposed = false;
  private checking = false;
  /** An announcement came while a check ran: check again, from the database. */
  private again = false;

  constructor(
    private readonly deps: CallerWatchDeps,
    private readonly caller: Caller,
    private readonly scope: KeyScope | "any_key" | undefined,
  ) {}

  /** Aborts, with the refusal as its reason, once the key no longer allows the call; the watch starts on first use. */
  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (!this.disposed) {
        this.unsubscribe = this.deps.feed?.subscribe(this.deps.topic(this.caller.keyId), () => void this.check(true));
        this.arm();
      }
    }
    return this.controller.signal;
  }

  /** The refusal the watch ended the call with; undefined while the key allows it. */
  get refusal(): ApiError | undefined {
    const reason: unknown = this.controller?.signal.reason;
    return this.controller?.signal.aborted === true && reason instanceof ApiError ? reason : undefined;
  }

  dispose(): void {
    this.disposed = true;
    this.unsubscribe?.();
    this.timer?.cancel();
  }

  private arm(): void {
    this.timer = this.deps.clock.setTimer(this.deps.recheckMs, () => void this.check(false).finally(() => !this.disposed && !this.controller!.signal.aborted && this.arm()), { unref: true });
  }

  private async check(fresh: boolean): Promise<void> {
    if (this.disposed || this.controller?.signal.aborted) return;
    if (this.checking) {
      this.again ||= fresh;
      return;
    }
    this.checking = true;
    try {
      const refusal = await keyRefusal(this.deps.keys, this.caller, this.scope, fresh);
      if (refusal !== undefined && !this.disposed) this.controller?.abort(refusal);
    } catch {
      // The database did not answer: the call goes on, and the next check decides.
    } finally {
      this.checking = false;
    }
    if (this.again) {
      this.again = false;
      await this.check(true);
    }
  }
}
