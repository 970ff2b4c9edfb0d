/**
 * Waitpoints (issue 29, item 5; docs/decisions.md#waitpoints): a point a
 * task waits at until a person or an outside system completes it. The key
 * that creates one owns it (reads it, lists it, resolves it by id); its
 * token completes it with no key at all, so it can go in an email or a
 * chat button. A lease holder releases its message to wait for one
 * (MessageClaims.release with untilWaitpoint).
 *
 * The token is `wpt_<id, 32 hex>_<secret, 256 bits base64url>`; only
 * SHA-256 of the secret is stored, and a presented one is compared with it
 * in constant time.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import { isUuid } from "../model/ids.js";
import type { JsonValue } from "../model/json.js";
import { MICROS_PER_SECOND, type Clock, type Micros } from "../model/time.js";
import type { WaitpointRecord, WaitpointState } from "../model/waitpoints.js";
import type { WaitpointStore } from "../ports/waitpoints.js";
import { byteLength, MAX_METADATA_BYTES } from "./message-rules.js";
import { formatTimeIdCursor, parseTimeIdCursor, validatePageLimit } from "./paging.js";

export const WAITPOINT_RULES = {
  timeoutSeconds: { min: 1, max: 2_592_000 },
  /** Characters of a description: what a person is asked. */
  maxDescriptionLength: 1_000,
  /** 1..255 printable ASCII, as an Idempotency-Key header. */
  idempotencyKey: /^[\x20-\x7e]{1,255}$/,
  /** Waiting waitpoints one key may have: storage one key may take. */
  maxWaitingPerOwner: 10_000,
} as const;

/** A waitpoint with the token that completes it, as its create answers. */
export interface IssuedWaitpoint {
  waitpoint: WaitpointRecord;
  /** Null on a repeat of a create whose waitpoint no longer waits: there is nothing left to complete. */
  token: string | null;
}

export interface WaitpointsOptions {
  clock: Clock;
  /** Wakes receives of the channel (after commit): its messages are open work again. */
  announce: (channelId: string) => void;
  newId?: () => string;
}

const TOKEN = /^wpt_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

const SUGGESTION = `Give timeout_seconds from ${WAITPOINT_RULES.timeoutSeconds.min} to ${WAITPOINT_RULES.timeoutSeconds.max}, a description of at most ${WAITPOINT_RULES.maxDescriptionLength} characters and an idempotency_key of 1 to 255 printable ASCII characters.`;

const invalid = (message: string, field: string) => new ApiError("invalid_waitpoint", message, { details: { field }, suggestion: SUGGESTION });

const notFound = () => new ApiError("waitpoint_not_found");

const hashSecret = (secret: string): Buffer => createHash("sha256").update(secret, "utf8").digest();

const uuidOfHex = (hex: string) => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;

export class Waitpoints {
  private readonly newId: () => string;

  constructor(
    private readonly store: WaitpointStore,
    private readonly options: WaitpointsOptions,
  ) {
    this.newId = options.newId ?? randomUUID;
  }

  async create(caller: Caller, input: { timeoutSeconds: number; description?: string; idempotencyKey?: string }): Promise<IssuedWaitpoint> {
    const { min, max } = WAITPOINT_RULES.timeoutSeconds;
    if (!Number.isInteger(input.timeoutSeconds) || input.timeoutSeconds < min || input.timeoutSeconds > max) {
      throw invalid(`'timeout_seconds' must be an integer from ${min} to ${max}`, "timeout_seconds");
    }
    if (input.description !== undefined && input.description.length > WAITPOINT_RULES.maxDescriptionLength) {
      throw invalid(`'description' is ${input.description.length} characters; the limit is ${WAITPOINT_RULES.maxDescriptionLength}`, "description");
    }
    if (input.idempotencyKey !== undefined && !WAITPOINT_RULES.idempotencyKey.test(input.idempotencyKey)) {
      throw invalid("'idempotency_key' must be 1 to 255 printable ASCII characters", "idempotency_key");
    }
    const now = this.options.clock.now();
    const id = this.newId();
    const secret = randomBytes(32).toString("base64url");
    const outcome = await this.store.insert(
      {
        id,
        ownerKeyId: caller.keyId,
        tokenHash: hashSecret(secret),
        description: input.description === undefined || input.description === "" ? null : input.description,
        idempotencyKey: input.idempotencyKey ?? null,
        createdAt: now,
        expiresAt: now + input.timeoutSeconds * MICROS_PER_SECOND,
      },
      WAITPOINT_RULES.maxWaitingPerOwner,
      now,
    );
    if (outcome.outcome === "limit_reached") {
      throw new ApiError("too_many_waitpoints", `A key may have at most ${WAITPOINT_RULES.maxWaitingPerOwner} waiting waitpoints`, {
        details: { limit: WAITPOINT_RULES.maxWaitingPerOwner },
      });
    }
    if (outcome.outcome === "replayed") {
      const w = outcome.waitpoint;
      return { waitpoint: w, token: outcome.tokenReplaced ? tokenOf(w.id, secret) : null };
    }
    return { waitpoint: outcome.waitpoint, token: tokenOf(id, secret) };
  }

  async get(caller: Caller, id: string): Promise<WaitpointRecord> {
    if (!isUuid(id)) throw notFound();
    const found = await this.store.find(caller.keyId, id, this.options.clock.now());
    if (!found) throw notFound();
    return found;
  }

  async list(caller: Caller, query: { state?: WaitpointState; limit?: number; cursor?: string }): Promise<{ waitpoints: WaitpointRecord[]; nextCursor: string | null }> {
    const limit = validatePageLimit(query.limit);
    const after = parseTimeIdCursor(query.cursor, isUuid, "waitpoints");
    const waitpoints = await this.store.list({ ownerKeyId: caller.keyId, state: query.state ?? null, after, limit, now: this.options.clock.now() });
    const last = waitpoints.at(-1);
    return { waitpoints, nextCursor: waitpoints.length === limit && last ? formatTimeIdCursor(last) : null };
  }

  /** Completes by token, with no key: the token is the capability. */
  async complete(token: string, data: { [key: string]: JsonValue } | undefined): Promise<WaitpointRecord> {
    const match = TOKEN.exec(token);
    if (!match) throw notFound();
    const checked = checkData(data);
    const now = this.options.clock.now();
    const id = uuidOfHex(match[1]!);
    const found = await this.store.findWithToken(id, now);
    // A wrong secret and an unknown id answer alike; the comparison takes the same time wherever they differ.
    if (!found || !timingSafeEqual(hashSecret(match[2]!), found.tokenHash)) throw notFound();
    return this.finish(id, checked, now);
  }

  /** Completes one of the caller's own waitpoints by id (the console's Approve and Deny). */
  async resolve(caller: Caller, id: string, data: { [key: string]: JsonValue } | undefined): Promise<WaitpointRecord> {
    const checked = checkData(data);
    await this.get(caller, id);
    return this.finish(id, checked, this.options.clock.now());
  }


  private async finish(id: string, data: { [key: string]: JsonValue }, now: Micros): Promise<WaitpointRecord> {
    const outcome = await this.store.complete(id, data, now);
    if (outcome.outcome !== "completed") {
      if (outcome.outcome === "not_found") throw notFound();
      throw new ApiError(outcome.outcome === "already_completed" ? "waitpoint_already_completed" : "waitpoint_timed_out");
    }
    for (const channelId of outcome.channelIds) this.options.announce(channelId);
    return outcome.waitpoint;
  }
}

const tokenOf = (id: string, secret: string) => `wpt_${id.replaceAll("-", "")}_${secret}`;

function checkData(data: { [key: string]: JsonValue } | undefined): { [key: string]: JsonValue } {
  const value = data ?? {};
  const bytes = byteLength(JSON.stringify(value));
  if (bytes > MAX_METADATA_BYTES) throw invalid(`'data' is ${bytes} bytes of JSON; the limit is ${MAX_METADATA_BYTES}`, "data");
  return value;
}
