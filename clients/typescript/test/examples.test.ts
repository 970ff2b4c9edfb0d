/** Every example in clients/typescript/examples runs against the real service. */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/server.js";
import { main as follower } from "../examples/follower.js";
import { main as quickstart } from "../examples/quickstart.js";
import { main as worker } from "../examples/worker.js";
import { AckStatus, ClaimStatus } from "../src/index.js";

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  // The examples narrate on the console; keep the test output clean.
  vi.spyOn(console, "log").mockImplementation(() => {});
});
afterAll(async () => {
  vi.restoreAllMocks();
  await server?.close();
});

describe("examples", () => {
  it("quickstart mints a key, posts a task, then claims and acknowledges it", async () => {
    const result = await quickstart(server.url);
    expect(result).toMatchObject({ claim: ClaimStatus.CLAIMED, ack: AckStatus.ACKNOWLEDGED });
  });

  it("worker processes every posted task once, and call() gets the worker's result", async () => {
    const { done, stats, answer } = await worker(server.url, { tasks: 4 });
    expect(done.slice().sort()).toEqual(["thumbnail 1", "thumbnail 2", "thumbnail 3", "thumbnail 4", "thumbnail for call()"]);
    expect(stats).toEqual({ acked: 5, failed: 0 });
    expect(answer).toBe('{"thumbnail":"thumbnail for call().png"}');
  });

  it("follower reads the announcements in order and ends with a cursor to resume from", async () => {
    const { received, lastCursor } = await follower(server.url, { count: 3 });
    expect(received).toEqual(["announcement 1", "announcement 2", "announcement 3"]);
    expect(lastCursor).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  });
});
