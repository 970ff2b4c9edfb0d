/** Page sizes shared by the listings. */
import { ApiError } from "../model/errors.js";
import type { Micros } from "../model/time.js";

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

/** A listing ordered newest first by (created_at, id): the page continues after this item. */
export interface TimeIdCursor {
  createdAt: Micros;
  id: string;
}

/** "<created_at in µs>.<id>" of the previous page's last item. */
export const formatTimeIdCursor = (last: TimeIdCursor): string => `${last.createdAt}.${last.id}`;

const TIME_ID_CURSOR = /^([0-9]{1,17})\.(.{1,64})$/;

/**
 * The cursor formatTimeIdCursor made, or null for the first page; 422
 * invalid_cursor for anything else, including an id `isId` refuses (one
 * that could not be compared with the id column without a cast error).
 */
export function parseTimeIdCursor(cursor: string | undefined, isId: (id: string) => boolean, what: string): TimeIdCursor | null {
  if (cursor === undefined || cursor === "") return null;
  const match = TIME_ID_CURSOR.exec(cursor);
  if (!match || !isId(match[2] as string)) {
    throw new ApiError("invalid_cursor", `'cursor' must be the next_cursor of a previous page of ${what}`, {
      details: { field: "cursor" },
      suggestion: `Pass next_cursor from the previous page unchanged, or leave cursor out for the newest ${what}.`,
    });
  }
  return { createdAt: Number(match[1]), id: match[2] as string };
}
