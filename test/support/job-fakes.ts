/**
 * A service with job workers whose outbound world is local stand-ins: an
 * OpenAI-compatible model server, a job board and a video host.
 */
import { FakeJobBoard } from "../fakes/job-board.js";
import { FakeOpenAI } from "../fakes/openai-server.js";
import { FakeVideoHost } from "../fakes/video-host.js";
import { startTestServer, type TestServer } from "./server.js";

/**
 * Quiet maintenance; retries picked up quickly: a failed attempt's retry is
 * due after a twentieth of the service's back-off (100 ms, then 300 ms,
 * instead of 2 s and 6 s), the same attempts in the same order.
 */
export const QUIET_JOBS = { processEveryMs: 200, retryDelayScale: 0.05, intervals: { purge: "1 hour", "webhook-sweep": "1 hour", "job-sweep": "1 hour" } };

export interface JobWorld {
  server: TestServer;
  llm: FakeOpenAI;
  board: FakeJobBoard;
  host: FakeVideoHost;
  close(): Promise<void>;
}

export async function startJobWorld(): Promise<JobWorld> {
  const [llm, board, host] = await Promise.all([FakeOpenAI.start(), FakeJobBoard.start(), FakeVideoHost.start()]);
  const server = await startTestServer(
    {
      AGENTBUS_WORKERS: "true",
      AGENTBUS_ALLOW_PRIVATE_TARGETS: "true",
      OPENAI_API_KEY: llm.apiKey,
      OPENAI_BASE_URL: llm.baseUrl,
      AGENTBUS_LLM_MODEL: llm.model,
      AGENTBUS_LLM_TIMEOUT_MS: "5000",
      AGENTBUS_VIDEO_BASE_URL: host.baseUrl,
    },
    { jobs: QUIET_JOBS },
  );
  return {
    server,
    llm,
    board,
    host,
    async close() {
      await server.close();
      await Promise.all([llm.close(), board.close(), host.close()]);
    },
  };
}
