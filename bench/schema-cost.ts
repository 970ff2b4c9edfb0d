/**
 * Event-loop cost of metadata schemas (docs/decisions.md#schemas-off-thread): the API thread's
 * time for the nastiest schemas and metadata, before (Ajv with native RegExp
 * compiling and validating on the API thread) and after (cheap checks on the
 * API thread, the rest on the schema thread). Run: npx tsx bench/schema-cost.ts
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Ajv } from "ajv";
import { checkMetadataSchema, validateMetadataSchema } from "../src/domain/channels.js";
import type { JsonValue } from "../src/model/json.js";
import { violationsOffThread } from "../src/domain/json-schema-thread.js";

type Schema = { [key: string]: JsonValue };
const fit = (build: (n: number) => Schema): Schema => {
  let n = 1;
  while (JSON.stringify(build(n * 2)).length <= 64 * 1024) n *= 2;
  let step = n / 2;
  while (step >= 1) {
    if (JSON.stringify(build(n + step)).length <= 64 * 1024) n += step;
    step /= 2;
  }
  return build(n);
};
const worst: Record<string, Schema> = {
  patternProperties64KiB: fit((n) => ({ patternProperties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`^p${i}$`, { type: "string" }])) })),
  properties64KiB: fit((n) => ({ properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "string" }])) })),
  atTheBound: { properties: Object.fromEntries(Array.from({ length: 198 }, (_, i) => [`p${i}`, { type: "string", minLength: 1, maxLength: 50, pattern: "^(a+)+$" }])) },
};
const evil = { a: `${"a".repeat(27)}!` };
const evilSchema: Schema = { properties: { a: { type: "string", pattern: "^(a+)+$" } } };

function blocked(fn: () => unknown): number {
  const started = performance.now();
  try {
    fn();
  } catch {
    // refusals count too
  }
  return performance.now() - started;
}

const before = new Ajv({ allErrors: true, strict: false, addUsedSchema: false, logger: false });
for (const [name, schema] of Object.entries(worst)) console.log(`before ${name}: ${blocked(() => before.compile(schema)).toFixed(1)} ms on the event loop (compile)`);
const validate = before.compile(evilSchema);
console.log(`before ^(a+)+$ on 27 a's + '!': ${blocked(() => validate(evil)).toFixed(1)} ms on the event loop (each extra character doubles it)`);

// Starting the schema thread is once per process; not what a request costs.
await checkMetadataSchema("bench", { type: "object" });
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();
for (const [name, schema] of Object.entries(worst)) {
  const started = performance.now();
  let sync = 0;
  let pending: Promise<void> = Promise.resolve();
  try {
    validateMetadataSchema(schema);
    pending = checkMetadataSchema("bench", { ...schema, $comment: name });
  } catch (err) {
    pending = Promise.reject(err as Error);
  } finally {
    sync = performance.now() - started;
  }
  const outcome = await pending.then(() => "", (err: unknown) => String(err));
  console.log(`after ${name}: ${sync.toFixed(1)} ms on the event loop, ${(performance.now() - started).toFixed(0)} ms on the schema thread (${outcome ? String(outcome).slice(0, 60) : "accepted"})`);
}
const started = performance.now();
await violationsOffThread("bench", evilSchema, { a: `${"a".repeat(16_000)}!` });
console.log(`after ^(a+)+$ on 16 000 a's + '!': ${(performance.now() - started).toFixed(1)} ms, off the event loop`);
delay.disable();
console.log(`after: event-loop delay max ${(delay.max / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms`);
