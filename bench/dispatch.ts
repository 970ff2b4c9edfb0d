/**
 * What groups, priorities, fair dispatch and a shared limit cost a work
 * queue (issue 28, item 9): receive-with-complete throughput on
 *
 *   plain    — a claimable channel as every other bench makes it;
 *   dispatch — a claimable channel with `dispatch: "fair"` and one shared
 *              limit of generous bounds (max_in_flight 100,000, rate
 *              1,000,000 per 60 s: it is checked and counted on every
 *              delivery, never full), whose messages fall in 1,000 groups
 *              (`group_key` g0..g999, in turn) with priorities 1..5 mixed
 *              at random;
 *
 * each single (`max_messages` 1) and batched (`max_messages` 10), in one
 * run, over the same service.
 *
 *   npx tsx bench/dispatch.ts
 *
 * Starts the service as `npm run bench` does (embedded PostgreSQL in a fresh
 * temporary data dir, or BENCH_URL). Each channel is filled with a backlog of
 * BENCH_DISPATCH_BACKLOG messages (default 80,000: plain batched receives
 * take about 8,000 a second here, and a queue that runs dry inside a window
 * measures the backlog, not the channel) before any window and
 * topped up to it between windows (never inside one), so every window starts
 * on the same backlog. BENCH_CONCURRENCY workers (16), one key each, loop:
 * POST messages:receive {max_messages, complete: what the worker received
 * last}; a task counts when the receive that completes it answers
 * `acknowledged` inside the window. Each round runs the four windows
 * (warm-up BENCH_WARMUP_SECONDS, 1 s, then BENCH_DURATION_SECONDS, 4 s),
 * plain and dispatch alternating which goes first; BENCH_DISPATCH_ROUNDS
 * rounds (5). Prints progress to stderr, then one JSON line to stdout: per
 * mode the median tasks/s of each channel over the rounds, every round's
 * figure, and the ratio dispatch / plain of the medians (issue 28 asks ≥ 0.8).
 * Exit status 1 on any unexpected answer or a task received twice.
 *
 * BENCH_DISPATCH_PARTS (default "fair,groups,priorities,limit") names what
 * the dispatch channel has, to find which part costs what: e.g. "groups"
 * alone gives its messages group keys on a fifo channel without a limit.
 */
import os from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { Api, content, SetupError, type Key } from "./api.js";
import { cpuWindow, type CpuSplit } from "./cpu.js";
import { createClient, parseClientKind } from "./http.js";
import { startServer } from "./server.js";
import { round, ErrorTally } from "./stats.js";
import { mulberry32 } from "../test/support/random.js";
import { numberVar } from "./env.js";

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

type Kind = "plain" | "dispatch";
interface Mode {
  name: "single" | "batched";
  maxMessages: number;
}
const MODES: Mode[] = [
  { name: "single", maxMessages: 1 },
  { name: "batched", maxMessages: 10 },
];
const GROUPS = 1000;
const PARTS = ["fair", "groups", "priorities", "limit"] as const;
const LIMIT = { max_in_flight: 100_000, rate: { count: 1_000_000, per_seconds: 60 } };

interface Queue {
  kind: Kind;
  channel: string;
  /** Messages posted and not yet received. */
  backlog: number;
  posted: number;
  draft: (n: number) => Record<string, unknown>;
}

interface Window {
  kind: Kind;
  mode: Mode["name"];
  round: number;
  tasks_per_s: number;
  acked: number;
  receives: number;
  empty_receives: number;
  seconds: number;
  cpu: CpuSplit;
}

async function main(): Promise<number> {
  const rounds = Math.floor(numberVar("BENCH_DISPATCH_ROUNDS", 5, 1));
  const durationMs = numberVar("BENCH_DURATION_SECONDS", 4, 0.5) * 1000;
  const warmupMs = numberVar("BENCH_WARMUP_SECONDS", 1, 0) * 1000;
  const concurrency = Math.floor(numberVar("BENCH_CONCURRENCY", 16, 1));
  const backlogTarget = Math.floor(numberVar("BENCH_DISPATCH_BACKLOG", 80_000, 1000));
  const clientKind = parseClientKind(process.env.BENCH_CLIENT);
  const parts = new Set((process.env.BENCH_DISPATCH_PARTS ?? PARTS.join(",")).split(",").map((x) => x.trim()).filter(Boolean));
  for (const x of parts) if (!(PARTS as readonly string[]).includes(x)) throw new Error(`BENCH_DISPATCH_PARTS: unknown part ${x} (use ${PARTS.join(",")})`);

  const server = await startServer(process.env);
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping`);
    void server.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  const errors = new ErrorTally();
  const client = createClient(clientKind, server.url, concurrency + 4);
  const api = new Api(client, errors);
  const runId = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const report: Record<string, unknown> = {};
  let duplicates = 0;
  let failed = false;
  try {
    const owner = await api.mintKey(`bench-${runId}-owner`);
    const workers: Key[] = [];
    for (let i = 0; i < concurrency; i++) workers.push(await api.mintKey(`bench-${runId}-worker-${i}`));

    const limitName = `bench-${runId}`;
    if (parts.has("limit")) await api.must("POST", "/v1/limits", "/v1/limits", owner.key, JSON.stringify({ name: limitName, ...LIMIT }));
    const settings: Record<string, unknown> = {};
    if (parts.has("fair")) settings.dispatch = "fair";
    if (parts.has("limit")) settings.limits = [limitName];
    // The same mix of priorities on every run.
    const random = mulberry32(28);
    const queues: Record<Kind, Queue> = {
      plain: { kind: "plain", channel: await api.createChannel(owner, `bench-${runId}-plain`), backlog: 0, posted: 0, draft: (n) => ({ content: content("plain", n) }) },
      dispatch: {
        kind: "dispatch",
        channel: await api.createChannel(owner, `bench-${runId}-dispatch`, settings),
        backlog: 0,
        posted: 0,
        draft: (n) => ({
          content: content("dispatch", n),
          ...(parts.has("groups") ? { group_key: `g${n % GROUPS}` } : {}),
          ...(parts.has("priorities") ? { priority: 1 + Math.floor(random() * 5) } : {}),
        }),
      },
    };

    // Posters: a key holds at most 250,000 live messages (its quota), and
    // acknowledged messages stay live until their TTL, so a fresh key takes
    // over after 200,000 posts.
    let poster = await api.mintKey(`bench-${runId}-poster-0`);
    let posterUsed = 0;
    let posters = 1;
    const posterFor = async (count: number): Promise<Key> => {
      if (posterUsed + count > 200_000) {
        poster = await api.mintKey(`bench-${runId}-poster-${posters++}`);
        posterUsed = 0;
      }
      posterUsed += count;
      return poster;
    };

    /** Posts until the queue's backlog is back at the target: 100 a batchCreate, four posts at a time. */
    const topUp = async (q: Queue) => {
      const missing = backlogTarget - q.backlog;
      if (missing <= 0) return;
      const started = performance.now();
      const batches: number[] = [];
      for (let left = missing; left > 0; left -= 100) batches.push(Math.min(100, left));
      let next = 0;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          while (next < batches.length) {
            const count = batches[next++]!;
            const first = q.posted;
            q.posted += count;
            const messages = Array.from({ length: count }, (_, i) => q.draft(first + i));
            const key = await posterFor(count);
            await api.must("POST", `/v1/channels/${q.channel}/messages:batchCreate`, "/v1/channels/{id}/messages:batchCreate", key.key, JSON.stringify({ messages }));
            q.backlog += count;
          }
        }),
      );
      log(`${q.kind}: posted ${missing} to a backlog of ${q.backlog} in ${round((performance.now() - started) / 1000)} s`);
    };

    const seen = new Set<string>();
    /** One window on one queue: warm-up, then the measured part; the workers' last tasks are acknowledged after it. */
    const measure = async (q: Queue, mode: Mode, r: number): Promise<Window> => {
      let measuring = false;
      let stopping = false;
      let acked = 0;
      let receives = 0;
      let empty = 0;
      const finished: string[][] = workers.map(() => []);
      const path = `/v1/channels/${q.channel}/messages:receive`;
      const loops = workers.map(async (k, index) => {
        while (!stopping) {
          const complete = finished[index]!;
          finished[index] = [];
          const body: Record<string, unknown> = { max_messages: mode.maxMessages, lease_seconds: 600 };
          if (complete.length > 0) body.complete = complete.map((id) => ({ message_id: id }));
          const a = await api.call("POST", path, "/v1/channels/{id}/messages:receive", k.key, JSON.stringify(body));
          if (!a.ok) {
            finished[index]!.push(...complete);
            continue;
          }
          const answer = JSON.parse(a.body) as { data: Array<{ message: { id: string } }>; completed: Array<{ message_id: string; status: string | null }> };
          for (const c of answer.completed) {
            if (c.status !== "acknowledged") errors.add(`complete → ${c.status ?? "error"} (unexpected)`, a.body);
            else if (measuring) acked++;
          }
          if (measuring) receives++;
          q.backlog -= answer.data.length;
          for (const { message } of answer.data) {
            if (seen.has(message.id)) {
              duplicates++;
              errors.add("task received twice", message.id);
            }
            seen.add(message.id);
            finished[index]!.push(message.id);
          }
          if (answer.data.length === 0) {
            if (measuring) empty++;
            await sleep(2);
          }
        }
      });
      const label = `round ${r}, ${q.kind}, ${mode.name} (max_messages ${mode.maxMessages})`;
      log(`${label}: warming up for ${warmupMs / 1000} s`);
      await sleep(warmupMs);
      const cpu = cpuWindow(server.pid);
      const t0 = performance.now();
      measuring = true;
      await sleep(durationMs);
      measuring = false;
      const seconds = (performance.now() - t0) / 1000;
      const split = cpu();
      stopping = true;
      await Promise.all(loops);
      // What each worker received last, completed without a receive that would lease more.
      for (const [index, ids] of finished.entries()) {
        for (let i = 0; i < ids.length; i += 100) {
          const a = await api.call("POST", "/v1/messages:batchAck", "/v1/messages:batchAck", workers[index]!.key, JSON.stringify({ message_ids: ids.slice(i, i + 100) }));
          if (!a.ok) continue;
          for (const x of (JSON.parse(a.body) as { results: Array<{ status: string | null }> }).results) if (x.status !== "acknowledged") errors.add(`ack → ${x.status ?? "error"} (unexpected)`, a.body);
        }
      }
      const w: Window = { kind: q.kind, mode: mode.name, round: r, tasks_per_s: Math.round(acked / seconds), acked, receives, empty_receives: empty, seconds: round(seconds), cpu: split };
      log(`${label}: ${w.tasks_per_s} tasks/s (${acked} in ${w.seconds} s, ${empty} empty receives), cpu ${JSON.stringify(split)}`);
      if (empty > 0) log(`${label}: WARNING: ${empty} receives found nothing; raise BENCH_DISPATCH_BACKLOG`);
      if (split.other_pct !== null && split.other_pct > 15) log(`${label}: WARNING: other processes used ${split.other_pct}% CPU during the window`);
      return w;
    };

    await topUp(queues.plain);
    await topUp(queues.dispatch);
    const windows: Window[] = [];
    for (let r = 1; r <= rounds; r++) {
      for (const mode of MODES) {
        const order: Kind[] = r % 2 === 1 ? ["plain", "dispatch"] : ["dispatch", "plain"];
        for (const kind of order) {
          windows.push(await measure(queues[kind], mode, r));
          await topUp(queues[kind]);
        }
      }
    }

    const median = (xs: number[]) => {
      const s = [...xs].sort((p, q) => p - q);
      const mid = Math.floor(s.length / 2);
      return s.length % 2 === 1 ? s[mid]! : Math.round((s[mid - 1]! + s[mid]!) / 2);
    };
    const results: Record<string, unknown> = {};
    for (const mode of MODES) {
      const of = (kind: Kind) => windows.filter((w) => w.kind === kind && w.mode === mode.name).map((w) => w.tasks_per_s);
      const plain = median(of("plain"));
      const dispatch = median(of("dispatch"));
      const ratio = plain === 0 ? null : round(dispatch / plain, 3);
      results[mode.name] = { max_messages: mode.maxMessages, plain_tasks_per_s: plain, dispatch_tasks_per_s: dispatch, ratio, plain_rounds: of("plain"), dispatch_rounds: of("dispatch") };
      log(`${mode.name} (max_messages ${mode.maxMessages}): plain median ${plain} tasks/s, dispatch median ${dispatch} tasks/s, ratio ${ratio}`);
    }
    Object.assign(report, {
      results,
      target_ratio: 0.8,
      targets_met: Object.fromEntries(MODES.map((m) => [m.name, ((results[m.name] as { ratio: number | null }).ratio ?? 0) >= 0.8])),
      duplicates,
      errors: errors.total,
      disturbed_by_other_processes: windows.some((w) => (w.cpu.other_pct ?? 0) > 15),
      windows,
    });
    failed = errors.total > 0 || duplicates > 0;
  } catch (err) {
    failed = true;
    report.failure = err instanceof SetupError ? err.message : String((err as Error).stack ?? err);
    log(`failed: ${report.failure as string}`);
  } finally {
    await client.close();
    await server.stop();
  }
  Object.assign(report, {
    error_details: errors.toJSON(),
    settings: {
      server: server.kind,
      client: clientKind,
      concurrency,
      rounds,
      duration_s: durationMs / 1000,
      warmup_s: warmupMs / 1000,
      backlog: backlogTarget,
      dispatch_parts: [...parts],
      groups: parts.has("groups") ? GROUPS : 0,
      limit: parts.has("limit") ? LIMIT : null,
      server_entry: process.env.BENCH_URL ? undefined : (process.env.BENCH_SERVER_ENTRY ?? "tsx"),
    },
    machine: { cpus: os.availableParallelism(), cpu_model: os.cpus()[0]?.model ?? null, node: process.version },
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${(err as Error).message ?? String(err)}`);
    process.exit(1);
  },
);
