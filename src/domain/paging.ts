/** Page sizes shared by the listings. */
import { ApiError } from "../model/errors.js";

export interface PageBounds {
  readonly min: number;
  readonly max: number;
  readonly default: number;
}

/** The usual listing page: 1..100, default 50. */
export const STANDARD_PAGE: PageBounds = { min: 1, max: 100, default: 50 };

/** The page size asked for, or the default; 422 invalid_limit outside the bounds. */
export function validatePageLimit(limit: number | undefined, bounds: PageBounds = STANDARD_PAGE): number {
  const value = limit ?? bounds.default;
  if (!Number.isInteger(value) || value < bounds.min || value > bounds.max) {
    throw new ApiError("invalid_limit", `'limit' must be an integer from ${bounds.min} to ${bounds.max}`, { details: { field: "limit" } });
  }
  return value;
}
