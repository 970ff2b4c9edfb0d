import { defineConfig } from "vitest/config";

/**
 * Tests that bound a latency (the event-loop test's 100 ms /health, the
 * schema thread's turns by key) run
 * alone, after every other file: on two cores the parallel files would be
 * measured, not the service.
 */
const ALONE = ["test/integration/schema-event-loop.test.ts", "test/integration/schema-fairness.test.ts", "test/integration/victim-latency.test.ts"];

/** What both projects run with. Not inherited from the root (no `extends`), so that the global setup runs once per run, not once per project. */
const COMMON = { testTimeout: 30_000, hookTimeout: 60_000, pool: "forks" } as const;

export default defineConfig({
  test: {
    // The root project's setup runs once; both projects see what it provides.
    globalSetup: ["test/support/global-setup.ts"],
    ...COMMON,
    // Vitest's default is one fewer than the cores: one file at a time on a
    // two-core machine. Most files spend their time waiting on real
    // processes (PostgreSQL, servers, Chromium, timers), so two run side by
    // side; VITEST_MAX_WORKERS overrides.
    maxWorkers: 2,
    projects: [
      {
        test: { ...COMMON, name: "parallel", include: ["test/**/*.test.ts", "clients/**/*.test.ts"], exclude: ALONE, sequence: { groupOrder: 0 } },
      },
      {
        test: { ...COMMON, name: "alone", include: ALONE, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
