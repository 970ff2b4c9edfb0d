/**
 * Update masks (an update applies the fields its mask names; over REST the
 * body's keys): one parser for every resource with an update.
 */
import { ApiError } from "../model/errors.js";

/** A proto field name as its JSON name (max_in_flight → maxInFlight). */
export const camel = (snake: string) => snake.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * A parser of masks over `fields` (proto names; their JSON names are
 * accepted too): the named fields, de-duplicated, in the order named; 422
 * invalid_update_mask naming every path `message` does not have.
 */
export function updateMaskParser<F extends string>(fields: readonly F[], message: string): (paths: readonly string[]) => F[] {
  const names = new Map<string, F>(fields.flatMap((f) => [[f, f] as [string, F], [camel(f), f] as [string, F]]));
  return (paths) => {
    const named: F[] = [];
    const bad: string[] = [];
    for (const path of paths) {
      const field = names.get(path);
      if (field === undefined) bad.push(path);
      else if (!named.includes(field)) named.push(field);
    }
    if (bad.length > 0) {
      throw new ApiError("invalid_update_mask", `update_mask names ${bad.length > 1 ? "paths" : "a path"} that ${message} does not have: ${bad.join(", ")}`, {
        details: { fields: bad },
        suggestion: `Name only these fields: ${fields.join(", ")}.`,
      });
    }
    return named;
  };
}
