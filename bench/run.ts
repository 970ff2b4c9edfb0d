/**
 * npm run bench — throughput and latency of the REST API on this machine.
 *
 * Starts the service (embedded PostgreSQL, fresh temporary data dir; or uses
 * BENCH_URL), runs three scenarios with closed-loop clients over HTTP/1.1
 * keep-alive, prints progress to stderr and one JSON line to stdout.
 * See "Benchmarks" in README.md for the scenarios and the variables.
 */
import os from "node:os";
import { Api, SetupError, type Key } from "./api.js";
import { createClient, parseClientKind } from "./http.js";
import { pdfJobs, pdfLog, type PdfReport } from "./pdf.js";
import { PgProfiler } from "./pgprofile.js";
import { creates, lists, receiveQueue, webhooks, workQueue, type AckMode, type ReceiveQueueResult, type Settings } from "./scenarios.js";
import { FLOOR, wakeLatency, type WakeResult } from "./wake.js";
import { growth, type GrowthPoint } from "./growth.js";
import { startServer, superuser, type ServerUnderTest } from "./server.js";
import { ErrorTally } from "./stats.js";
import { numberVar } from "./env.js";

/**
 * Issue 15's targets: ten times the reference (Backchannel) measured on this
 * machine, on a fresh database. The work queue's are its receive API's
 * (tasks_per_s: one task per receive, acked by the worker's next receive,
 * one request per task, as BullMQ's "complete and fetch next";
 * tasks_batched_per_s: ten per receive, one batchAck); receive then ack
 * (two requests per task) and list → claim → ack run beside them for
 * comparison, without a target. Wake targets: p50 ≤ 7 ms with 50 waiters;
 * p50 ≤ 5 ms and p99 ≤ 25 ms with 1,000 (issue 5).
 */
const TARGETS = {
  creates_per_s: 2600,
  lists_per_s: 1500,
  tasks_per_s: 1500,
  tasks_batched_per_s: 4000,
  webhook_p50_ms: 50,
  wake_50_p50_ms: 7,
  wake_p50_ms: 5,
  wake_p99_ms: 25,
};
const SCENARIOS = ["creates", "lists", "work", "work-list", "webhooks", "wake", "pdf", "growth"] as const;
/** What runs without BENCH_SCENARIOS. */
const DEFAULT_SCENARIOS = ["creates", "lists", "work", "work-list", "webhooks", "wake"];

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);

/** BENCH_WAKE_WAITERS: one count or several, comma-separated; default 50 and 1,000. */
function wakeWaiters(): number[] {
  const raw = process.env.BENCH_WAKE_WAITERS?.trim() || "50,1000";
  return raw.split(",").map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_WAKE_WAITERS must be positive integers, comma-separated (got ${JSON.stringify(raw)})`);
    return n;
  });
}

async function main(): Promise<number> {
  const durationMs = numberVar("BENCH_DURATION_SECONDS", 10, 0.1) * 1000;
  const warmupMs = numberVar("BENCH_WARMUP_SECONDS", 2, 0) * 1000;
  const concurrency = Math.floor(numberVar("BENCH_CONCURRENCY", 16, 1));
  const listSeed = Math.floor(numberVar("BENCH_LIST_MESSAGES", 2000, 60));
  const clientKind = parseClientKind(process.env.BENCH_CLIENT);
  const createChannels = Math.floor(numberVar("BENCH_CREATE_CHANNELS", 1, 1));
  const producerInflight = Math.floor(numberVar("BENCH_PRODUCER_INFLIGHT", 2, 1));
  const producerBatch = Math.floor(numberVar("BENCH_PRODUCER_BATCH", 50, 1));
  const webhookWriters = Math.floor(numberVar("BENCH_WEBHOOK_WRITERS", 4, 1));
  const wanted = (process.env.BENCH_SCENARIOS ?? DEFAULT_SCENARIOS.join(",")).split(",").map((x) => x.trim()).filter(Boolean);
  for (const x of wanted) if (!(SCENARIOS as readonly string[]).includes(x)) throw new Error(`BENCH_SCENARIOS: unknown scenario ${x} (use ${SCENARIOS.join(",")})`);

  // The webhook receiver is this process, on 127.0.0.1: the service we start
  // must be allowed to post there (docs/decisions.md#outbound-addresses). A
  // BENCH_URL service needs it set too.
  const serverEnv = wanted.includes("webhooks") ? { ...process.env, AGENTBUS_ALLOW_PRIVATE_TARGETS: "true" } : process.env;
  const server: ServerUnderTest = await startServer(serverEnv);
  const onSignal = (signal: NodeJS.Signals) => {
    log(`${signal}: stopping`);
    void server.stop().finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  const errors = new ErrorTally();
  // Producers + workers is the most connections a scenario keeps busy.
  const client = createClient(clientKind, server.url, concurrency + 2 * producerInflight);
  const api = new Api(client, errors);
  const runId = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const settings: Settings = { warmupMs, durationMs, serverPid: server.pid, runId, log, errors };
  const report: Record<string, unknown> = {};
  let failed = false;
  try {
    if (process.env.BENCH_PG_PROFILE === "1") {
      if (!server.pgDataDir) throw new Error("BENCH_PG_PROFILE=1 needs the embedded server the bench starts (not BENCH_URL)");
      settings.profiler = await PgProfiler.open(server.pgDataDir);
    }
    if (process.env.BENCH_PG_ANALYZE === "1") {
      if (!server.pgDataDir) throw new Error("BENCH_PG_ANALYZE=1 needs the embedded server the bench starts (not BENCH_URL)");
      const dir = server.pgDataDir;
      settings.analyze = async () => {
        const db = await superuser(dir);
        try {
          await db.query("ANALYZE");
        } finally {
          await db.end();
        }
      };
    }
    log(`minting ${concurrency + 3} keys`);
    const owner = await api.mintKey(`bench-${runId}-owner`);
    const clients: Key[] = [];
    for (let i = 0; i < concurrency; i++) clients.push(await api.mintKey(`bench-${runId}-client-${i}`));
    const producers = [await api.mintKey(`bench-${runId}-producer-0`), await api.mintKey(`bench-${runId}-producer-1`)];

    let c, l, q, wh;
    if (wanted.includes("creates")) {
      c = await creates(api, owner, clients, createChannels, settings);
      log(`creates: ${c.creates_per_s}/s, p50 ${c.latency.p50_ms} ms, p99 ${c.latency.p99_ms} ms, cpu ${JSON.stringify(c.cpu)}`);
    }
    if (wanted.includes("lists")) {
      l = await lists(api, owner, clients, listSeed, settings);
      log(`lists: ${l.lists_per_s}/s, p50 ${l.latency.p50_ms} ms, p99 ${l.latency.p99_ms} ms, cpu ${JSON.stringify(l.cpu)}`);
    }
    if (wanted.includes("work-list")) {
      q = await workQueue(api, owner, producers, clients, { listLimit: 10, backlogCap: 500, producerInflight, producerBatch }, settings);
      log(
        `list → claim → ack: ${q.tasks_per_s} tasks/s, claim p50 ${q.claim_latency.p50_ms} ms, p99 ${q.claim_latency.p99_ms} ms, ` +
          `${q.conflicts} conflicts, ${q.duplicate_claims} duplicate claims, verification ${q.verification.ok ? "ok" : "FAILED"}, cpu ${JSON.stringify(q.cpu)}`,
      );
    }
    const rq: ReceiveQueueResult[] = [];
    if (wanted.includes("work")) {
      // One task per receive, acked with the next receive (one request per
      // task) and, for comparison, acked alone; ten per receive, acked with
      // one batchAck.
      const runs: Array<{ maxMessages: number; ackMode: AckMode }> = [
        { maxMessages: 1, ackMode: "next-receive" },
        { maxMessages: 1, ackMode: "each" },
        { maxMessages: 10, ackMode: "batch" },
      ];
      for (const { maxMessages, ackMode } of runs) {
        const r = await receiveQueue(api, owner, producers, clients, { maxMessages, ackMode, backlogCap: 500, producerInflight, producerBatch }, settings);
        rq.push(r);
        log(
          `work queue (receive max_messages=${maxMessages}, ack ${ackMode}): ${r.tasks_per_s} tasks/s, receive p50 ${r.receive_latency.p50_ms} ms, p99 ${r.receive_latency.p99_ms} ms, ` +
            `mean batch ${r.batch_mean}, ${r.duplicate_leases} duplicate leases, verification ${r.verification.ok ? "ok" : "FAILED"}, cpu ${JSON.stringify(r.cpu)}`,
        );
      }
    }

    if (wanted.includes("webhooks")) {
      wh = await webhooks(api, owner, clients.slice(0, webhookWriters), settings);
      log(
        `webhooks: ${wh.count} deliveries (${wh.creates_per_s}/s), first attempt after the create answer p50 ${wh.after_response.p50_ms} ms, ` +
          `p99 ${wh.after_response.p99_ms} ms; after the create request p50 ${wh.after_request.p50_ms} ms, p99 ${wh.after_request.p99_ms} ms; ` +
          `${wh.arrived_before_response} arrived before the answer, ${wh.missing} missing, cpu ${JSON.stringify(wh.cpu)}`,
      );
    }

    let wk: WakeResult[] | undefined;
    if (wanted.includes("wake")) {
      // Starts its own service per wake bus; the one above idles meanwhile.
      wk = [];
      for (const waiters of wakeWaiters()) wk.push(...(await wakeLatency(waiters, Math.floor(numberVar("BENCH_WAKE_ROUNDS", 10, 1)))));
    }

    let grown: GrowthPoint[] | undefined;
    if (wanted.includes("growth")) {
      // Only when named: it starts its own service and writes a million messages (several minutes).
      const result = await growth(Math.floor(numberVar("BENCH_GROWTH_MESSAGES", 1_000_000, 10_000)), Math.floor(numberVar("BENCH_GROWTH_CHANNELS", 10_000, 0)));
      grown = result.points;
      for (const [kind, entry] of result.errors.byKind) for (let i = 0; i < entry.count; i++) errors.add(`growth: ${kind}`, entry.example);
    }

    let pdf: PdfReport | undefined;
    if (wanted.includes("pdf")) {
      // Only when named: it needs Chromium and keeps the CPU busy for about a minute.
      const pdfClients = Math.floor(numberVar("BENCH_PDF_CLIENTS", 4, 1));
      pdf = await pdfJobs(api, clients.slice(0, pdfClients), settings, { clients: pdfClients, pollMs: numberVar("BENCH_PDF_POLL_MS", 10, 1), baseUrl: server.url });
      log(pdfLog(pdf));
    }

    const single = rq.find((r) => r.ack_mode === "next-receive");
    const receiveThenAck = rq.find((r) => r.ack_mode === "each");
    const batched = rq.find((r) => r.ack_mode === "batch");
    const served = (wk ?? []).filter((w) => w.bus !== FLOOR);
    const wake50 = served.filter((w) => w.waiters === 50);
    const wake1000 = served.filter((w) => w.waiters === 1000);
    Object.assign(report, {
      growth: grown ?? null,
      wake: wk ?? null,
      pdf: pdf ?? null,
      creates_per_s: c?.creates_per_s ?? null,
      creates_p50_ms: c?.latency.p50_ms ?? null,
      creates_p99_ms: c?.latency.p99_ms ?? null,
      lists_per_s: l?.lists_per_s ?? null,
      lists_p50_ms: l?.latency.p50_ms ?? null,
      lists_p99_ms: l?.latency.p99_ms ?? null,
      tasks_per_s: single?.tasks_per_s ?? null,
      tasks_receive_then_ack_per_s: receiveThenAck?.tasks_per_s ?? null,
      tasks_batched_per_s: batched?.tasks_per_s ?? null,
      list_claim_tasks_per_s: q?.tasks_per_s ?? null,
      claim_p50_ms: q?.claim_latency.p50_ms ?? null,
      claim_p99_ms: q?.claim_latency.p99_ms ?? null,
      webhook_p50_ms: wh?.after_response.p50_ms ?? null,
      webhook_p99_ms: wh?.after_response.p99_ms ?? null,
      duplicate_claims: q?.duplicate_claims ?? null,
      conflicts: q?.conflicts ?? null,
      errors: errors.total,
      verification_ok: q ? q.verification.ok : null,
      targets: TARGETS,
      targets_met: {
        creates: c ? c.creates_per_s >= TARGETS.creates_per_s : null,
        lists: l ? l.lists_per_s >= TARGETS.lists_per_s : null,
        tasks: single ? single.tasks_per_s >= TARGETS.tasks_per_s : null,
        tasks_batched: batched ? batched.tasks_per_s >= TARGETS.tasks_batched_per_s : null,
        no_duplicate_claims: q ? q.duplicate_claims === 0 && q.verification.ok : null,
        no_duplicate_leases: rq.length > 0 ? rq.every((r) => r.duplicate_leases === 0 && r.verification.ok) : null,
        webhooks: wh && wh.after_response.p50_ms !== null ? wh.after_response.p50_ms <= TARGETS.webhook_p50_ms : null,
        wake_50: wake50.length > 0 ? wake50.every((w) => (w.p50_ms ?? Infinity) <= TARGETS.wake_50_p50_ms) : null,
        wake: wake1000.length > 0 ? wake1000.every((w) => (w.p50_ms ?? Infinity) <= TARGETS.wake_p50_ms && (w.p99_ms ?? Infinity) <= TARGETS.wake_p99_ms) : null,
      },
    });
    const others = [c?.cpu, l?.cpu, q?.cpu, ...rq.map((r) => r.cpu), wh?.cpu].map((x) => x?.other_pct ?? 0);
    // Another process busy on the machine during a window makes the figures meaningless.
    report.disturbed_by_other_processes = Math.max(...others) > 15;
    failed =
      errors.total > 0 ||
      (q !== undefined && (q.duplicate_claims > 0 || !q.verification.ok)) ||
      rq.some((r) => r.duplicate_leases > 0 || !r.verification.ok) || (wh !== undefined && wh.missing > 0);
    report.scenarios = { creates: c ?? null, lists: l ?? null, work_queue: rq.length > 0 ? rq : null, list_claim_queue: q ?? null, webhooks: wh ?? null };
  } catch (err) {
    failed = true;
    report.failure = err instanceof SetupError ? err.message : String((err as Error).stack ?? err);
    log(`failed: ${report.failure as string}`);
    report.errors = errors.total;
  } finally {
    await settings.profiler?.close();
    await client.close();
    await server.stop();
  }

  Object.assign(report, {
    error_details: errors.toJSON(),
    settings: {
      server: server.kind,
      url: process.env.BENCH_URL ? server.url : undefined,
      client: clientKind,
      concurrency,
      producers: 2,
      producer_inflight: producerInflight,
      producer_batch: producerBatch,
      work_backlog_cap: 500,
      webhook_writers: wanted.includes("webhooks") ? webhookWriters : undefined,
      duration_s: durationMs / 1000,
      warmup_s: warmupMs / 1000,
      create_channels: createChannels,
      list_channel_messages: listSeed,
      server_entry: process.env.BENCH_URL ? undefined : (process.env.BENCH_SERVER_ENTRY ?? "tsx"),
      server_node_options: process.env.BENCH_SERVER_NODE_OPTIONS || undefined,
      pg_profile: process.env.BENCH_PG_PROFILE === "1" || undefined,
      pg_analyze: process.env.BENCH_PG_ANALYZE === "1" || undefined,
      pg_settings: process.env.BENCH_PG_SETTINGS || undefined,
    },
    machine: {
      cpus: os.availableParallelism(),
      cpu_model: os.cpus()[0]?.model ?? null,
      memory_gb: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);

  const missed = Object.entries(report.targets_met ?? {}).filter(([, v]) => v === false);
  if (missed.length > 0) log(`targets missed: ${missed.map(([k]) => k).join(", ")}`);
  if (failed) return 1;
  if (process.env.BENCH_ENFORCE_TARGETS === "1" && missed.length > 0) return 1;
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    log(`failed: ${(err as Error).message ?? String(err)}`);
    process.exit(1);
  },
);
