/**
 * A worker: posts a few tasks to a claimable channel, then processes them
 * with runWorker (receive a batch with leases, heartbeat while working, ack
 * with the handler's result on success, release on failure) until every task
 * is done or Ctrl-C. Meanwhile a producer uses call() to post one more task
 * and await its result.
 *
 *   AGENTBUS_URL=http://127.0.0.1:8080 npx tsx clients/typescript/examples/worker.ts
 */
import { pathToFileURL } from "node:url";
import { call, ChannelMode, createClient, runWorker, type WorkerStats } from "../src/index.js";

export async function main(
  baseUrl: string,
  options: { tasks?: number; signal?: AbortSignal } = {},
): Promise<{ done: string[]; stats: WorkerStats; answer: string | undefined }> {
  const tasks = options.tasks ?? 5;
  const { key } = await createClient({ baseUrl }).keys.createKey({ agentLabel: `worker-${Date.now().toString(36)}` });
  const bus = createClient({ baseUrl, apiKey: key });
  const channel = await bus.channels.createChannel({ name: "thumbnails", mode: ChannelMode.CLAIMABLE });
  await bus.messages.batchCreateMessages({
    identifier: channel.id,
    messages: Array.from({ length: tasks }, (_, i) => ({ content: `thumbnail ${i + 1}` })),
  });

  const stop = new AbortController();
  options.signal?.addEventListener("abort", () => stop.abort(), { once: true });
  const onSigint = () => stop.abort();
  process.once("SIGINT", onSigint);
  const done: string[] = [];
  try {
    const worker = runWorker({
      client: bus,
      channel: channel.id,
      leaseSeconds: 60,
      // Lease up to 4 tasks per receive and work on them side by side.
      batchSize: 4,
      signal: stop.signal,
      async handle(message, { signal, deliveryCount }) {
        // Real work goes here; honour `signal` to stop early on shutdown.
        if (signal.aborted) throw new Error("stopping");
        done.push(message.content);
        console.log(`processed: ${message.content}${deliveryCount > 1 ? ` (delivery ${deliveryCount})` : ""}`);
        if (done.length === tasks + 1) stop.abort();
        // The return value is the ack's result: what call() hands back.
        return { thumbnail: `${message.content}.png` };
      },
      onError: (error, message) => console.error(`worker: ${message?.id ?? "-"}: ${String(error)}`),
    });
    // A producer: post one more task and wait for the worker's answer.
    const { result: answer } = await call(bus, channel.id, "thumbnail for call()", { timeoutSeconds: 30 });
    console.log(`call() answered: ${answer ?? "(no result)"}`);
    const stats = await worker;
    return { done, stats, answer };
  } finally {
    process.off("SIGINT", onSigint);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.env.AGENTBUS_URL ?? "http://127.0.0.1:8080");
}
