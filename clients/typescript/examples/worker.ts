/**
 * A worker: posts a few tasks to a claimable channel, then processes them
 * with runWorker (claim with a lease, heartbeat while working, ack on
 * success, release on failure) until every task is done or Ctrl-C.
 *
 *   AGENTBUS_URL=http://127.0.0.1:8080 npx tsx clients/typescript/examples/worker.ts
 */
import { pathToFileURL } from "node:url";
import { ChannelMode, createClient, runWorker, type WorkerStats } from "../src/index.js";

export async function main(baseUrl: string, options: { tasks?: number; signal?: AbortSignal } = {}): Promise<{ done: string[]; stats: WorkerStats }> {
  const tasks = options.tasks ?? 5;
  const { key } = await createClient({ baseUrl }).keys.createKey({ agentLabel: `worker-${Date.now().toString(36)}` });
  const bus = createClient({ baseUrl, apiKey: key });
  const channel = await bus.channels.createChannel({ name: "thumbnails", mode: ChannelMode.CLAIMABLE });
  for (let i = 1; i <= tasks; i++) await bus.messages.createMessage({ identifier: channel.id, content: `thumbnail ${i}` });

  const stop = new AbortController();
  options.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  const onSigint = () => stop.abort();
  process.once("SIGINT", onSigint);
  const done: string[] = [];
  try {
    const stats = await runWorker({
      client: bus,
      channel: channel.id,
      leaseSeconds: 60,
      signal: stop.signal,
      async handle(message, { signal }) {
        // Real work goes here; honour `signal` to stop early on shutdown.
        if (signal.aborted) throw new Error("stopping");
        done.push(message.content);
        console.log(`processed: ${message.content}`);
        if (done.length === tasks) stop.abort();
      },
      onError: (error, message) => console.error(`worker: ${message?.id ?? "-"}: ${String(error)}`),
    });
    return { done, stats };
  } finally {
    process.off("SIGINT", onSigint);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.env.AGENTBUS_URL ?? "http://127.0.0.1:8080");
}
