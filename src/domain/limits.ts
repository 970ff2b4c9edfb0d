/**
 * Shared limits (issue 28, item 4; docs/decisions.md#shared-limits): a bound
 * on the messages in flight at once and on deliveries per sliding window,
 * shared by every channel and message of its owner that names it (a model
 * provider's quota, say). The key that created a limit owns it; its name is
 * unique among that key's limits. Any other key is told 404
 * limit_not_found, as for a limit that does not exist.
 *
 * This module is the resource (create, list, read, change, delete) and its
 * live use; holding units on delivery is the receive path's.
 */
import { randomUUID } from "node:crypto";
import type { Caller } from "../model/caller.js";
import { ApiError } from "../model/errors.js";
import type { LimitBounds, LimitRate, LimitView } from "../model/limits.js";
import type { Clock } from "../model/time.js";
import { updateMaskParser } from "./update-mask.js";
import type { LimitStore } from "../ports/limits.js";

export const LIMIT_RULES = {
  /** 1..64 characters: ASCII letters, digits, '.', '_', '-', ':'. */
  name: /^[A-Za-z0-9._:-]{1,64}$/,
  maxInFlight: { min: 1, max: 100_000 },
  rateCount: { min: 1, max: 1_000_000 },
  ratePerSeconds: { min: 1, max: 86_400 },
  /** Limits per key: storage one key may take. */
  maxPerOwner: 1_000,
} as const;

export const isLimitName = (name: string): boolean => LIMIT_RULES.name.test(name);

export interface LimitsOptions {
  clock: Clock;
  /** Limit ids; random UUIDs unless a test names them. */
  newId?: () => string;
}

export interface NewLimitInput {
  name: string;
  /** Unset: no bound. */
  maxInFlight: number | undefined;
  /** Unset: no rate. */
  rate: LimitRate | undefined;
}

/** An update in domain terms; undefined = unset (a masked unset field removes that bound). */
export interface LimitChangeInput {
  maxInFlight: number | undefined;
  rate: LimitRate | undefined;
}

/** The LimitUpdate fields, by their proto (REST) names. */
export const LIMIT_UPDATABLE_FIELDS = ["max_in_flight", "rate"] as const;
type LimitField = (typeof LIMIT_UPDATABLE_FIELDS)[number];

const SUGGESTION =
  `Give max_in_flight (${LIMIT_RULES.maxInFlight.min} to ${LIMIT_RULES.maxInFlight.max}), ` +
  `rate {count: ${LIMIT_RULES.rateCount.min} to ${LIMIT_RULES.rateCount.max}, per_seconds: ${LIMIT_RULES.ratePerSeconds.min} to ${LIMIT_RULES.ratePerSeconds.max}}, or both; ` +
  "a name is 1 to 64 letters, digits, '.', '_', '-' or ':'.";

const invalidLimit = (message: string, field: string) => new ApiError("invalid_limit", message, { details: { field }, suggestion: SUGGESTION });

const shown = (name: string) => name.slice(0, 64);

const notFound = (name: string) => new ApiError("limit_not_found", `Limit '${shown(name)}' not found`, { details: { name: shown(name) } });

export class Limits {
  private readonly newId: () => string;

  constructor(
    private readonly store: LimitStore,
    private readonly options: LimitsOptions,
  ) {
    this.newId = options.newId ?? randomUUID;
  }

  async create(caller: Caller, input: NewLimitInput): Promise<LimitView> {
    const name = validateLimitName(input.name);
    const bounds = requireBound({
      maxInFlight: input.maxInFlight === undefined ? null : validateMaxInFlight(input.maxInFlight),
      rate: input.rate === undefined ? null : validateRate(input.rate),
    });
    const now = this.options.clock.now();
    const limit = { id: this.newId(), ownerKeyId: caller.keyId, name, ...bounds, createdAt: now, updatedAt: now };
    const outcome = await this.store.insert(limit, LIMIT_RULES.maxPerOwner);
    if (outcome === "exists") {
      throw new ApiError("limit_exists", `Your key already has a limit named '${name}'`, { details: { name } });
    }
    if (outcome === "limit_reached") {
      throw new ApiError("too_many_limits", `A key may own at most ${LIMIT_RULES.maxPerOwner} limits`, { details: { limit: LIMIT_RULES.maxPerOwner } });
    }
    // Nothing can hold a limit that did not exist a moment ago.
    return { ...limit, inFlight: 0, usedInWindow: 0 };
  }

  /** The caller's limits, by name, with their live use. */
  async list(caller: Caller): Promise<LimitView[]> {
    return this.store.list(caller.keyId, this.options.clock.now());
  }

  async get(caller: Caller, name: string): Promise<LimitView> {
    if (!isLimitName(name)) throw notFound(name);
    const limit = await this.store.find(caller.keyId, name, this.options.clock.now());
    if (!limit) throw notFound(name);
    return limit;
  }

  /**
   * Changes the bounds the mask names (over REST always given: the body's
   * keys); a named bound that is unset (null in JSON) is removed. Without a
   * mask (a gRPC caller that sends none) the bounds that are set are
   * changed. At least one bound must remain. Runs under the limit's row
   * lock, so concurrent changes apply one after another.
   */
  async update(caller: Caller, name: string, change: LimitChangeInput, mask: readonly string[] | undefined): Promise<LimitView> {
    const fields = mask === undefined ? fieldsSetIn(change) : parseLimitUpdateMask(mask);
    const patch: Partial<LimitBounds> = {};
    for (const field of fields) {
      if (field === "max_in_flight") patch.maxInFlight = change.maxInFlight === undefined ? null : validateMaxInFlight(change.maxInFlight);
      else patch.rate = change.rate === undefined ? null : validateRate(change.rate);
    }
    if (!isLimitName(name)) throw notFound(name);
    return this.store.atomically(async () => {
      const current = await this.store.find(caller.keyId, name, this.options.clock.now(), true);
      if (!current) throw notFound(name);
      if (fields.length === 0) return current;
      const bounds = requireBound({ maxInFlight: current.maxInFlight, rate: current.rate, ...patch });
      await this.store.saveBounds(current.id, bounds, this.options.clock.now());
      // Read again: the rate window (and so used_in_window) may have changed.
      const changed = await this.store.find(caller.keyId, name, this.options.clock.now());
      if (!changed) throw notFound(name);
      return changed;
    });
  }

  /** Deletes the limit; the channels and messages that named it stop naming it, in the same transaction. */
  async delete(caller: Caller, name: string): Promise<void> {
    if (!isLimitName(name) || !(await this.store.delete(caller.keyId, name))) throw notFound(name);
  }
}

/** The mask's paths as LimitUpdate fields (proto or JSON names), de-duplicated; 422 invalid_update_mask naming the others. */
export const parseLimitUpdateMask = updateMaskParser(LIMIT_UPDATABLE_FIELDS, "LimitUpdate");

function fieldsSetIn(change: LimitChangeInput): LimitField[] {
  return LIMIT_UPDATABLE_FIELDS.filter((field) => (field === "max_in_flight" ? change.maxInFlight !== undefined : change.rate !== undefined));
}

export function validateLimitName(name: string): string {
  if (!isLimitName(name)) {
    throw invalidLimit("'name' must be 1 to 64 characters: letters, digits, '.', '_', '-' or ':'", "name");
  }
  return name;
}

function inRange(value: number, range: { min: number; max: number }): boolean {
  return Number.isInteger(value) && value >= range.min && value <= range.max;
}

export function validateMaxInFlight(value: number): number {
  const range = LIMIT_RULES.maxInFlight;
  if (!inRange(value, range)) throw invalidLimit(`'max_in_flight' must be an integer from ${range.min} to ${range.max}`, "max_in_flight");
  return value;
}

export function validateRate(rate: LimitRate): LimitRate {
  const { rateCount, ratePerSeconds } = LIMIT_RULES;
  if (!inRange(rate.count, rateCount)) throw invalidLimit(`'rate.count' must be an integer from ${rateCount.min} to ${rateCount.max}`, "rate.count");
  if (!inRange(rate.perSeconds, ratePerSeconds)) {
    throw invalidLimit(`'rate.per_seconds' must be an integer from ${ratePerSeconds.min} to ${ratePerSeconds.max}`, "rate.per_seconds");
  }
  return { count: rate.count, perSeconds: rate.perSeconds };
}

/** A limit without a bound limits nothing: 422 invalid_limit. */
function requireBound(bounds: LimitBounds): LimitBounds {
  if (bounds.maxInFlight === null && bounds.rate === null) {
    throw new ApiError("invalid_limit", "A limit needs max_in_flight, rate or both: without a bound it limits nothing", {
      details: { fields: [...LIMIT_UPDATABLE_FIELDS] },
      suggestion: SUGGESTION,
    });
  }
  return bounds;
}
