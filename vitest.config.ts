import { defineConfig } from "vitest/config";

/**
 * Tests that bound a latency (the event-loop test's 100 ms /health, the
 * schema thread's turns by key) run
 * alone, after every other file: on two cores the parallel files would be
 * measured, not the service.
 */
const ALONE = ["test/integration/schema-event-loop.test.ts", "test/integration/schema-fairness.test.ts", "test/integration/victim-latency.test.ts"];

export default defineConfig({
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: { name: "parallel", include: ["test/**/*.test.ts", "clients/**/*.test.ts"], exclude: ALONE, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: "alone", include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
