/** What a whole suite shares: started before its first test, stopped after its last. */
import { afterAll, beforeAll } from "vitest";

/**
 * Starts `start()` in the enclosing suite's beforeAll and passes the result to
 * `stop` in its afterAll. Returns a stand-in that reads through to the started
 * value, so a suite can name it once at the top (`const server = …`) and use it
 * from its hooks and tests. Vitest runs beforeAll hooks in the order they are
 * declared and afterAll hooks in reverse, so hooks declared after this call see
 * the value started and are torn down before it stops.
 */
export function forSuite<T extends object>(start: () => Promise<T>, stop: (value: T) => Promise<void>): T {
  let value: T | undefined;
  beforeAll(async () => {
    value = await start();
  });
  afterAll(async () => {
    if (value !== undefined) await stop(value);
  });
  return new Proxy({} as T, {
    get(_target, property) {
      if (value === undefined) throw new Error("a suite's shared value starts in beforeAll: use it from a hook or a test");
      const field: unknown = Reflect.get(value, property, value);
      return typeof field === "function" ? (field as (...args: unknown[]) => unknown).bind(value) : field;
    },
  });
}
