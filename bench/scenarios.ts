/**
 * The scenarios. Each runs closed loops (a virtual client sends its
 * next request as soon as the previous answer arrived) for a warm-up, then
 * for the measured window; only operations completing inside the window count.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { content, type Api, type Key, type ListJson, type MessageJson } from "./api.js";
import { cpuWindow, type CpuSplit } from "./cpu.js";
import type { PgProfile, PgProfiler } from "./pgprofile.js";
import { Latencies, round, type ErrorTally } from "./stats.js";

export interface Settings {
  warmupMs: number;
  durationMs: number;
  serverPid: number | undefined;
  runId: string;
  log: (msg: string) => void;
  errors: ErrorTally;
  /** BENCH_PG_PROFILE=1: PostgreSQL statements and session states per window. */
  profiler?: PgProfiler;
  /** BENCH_PG_ANALYZE=1: refresh the planner statistics before each scenario's load starts. */
  analyze?: () => Promise<void>;
}

interface Window {
  measuring: boolean;
  stopping: boolean;
}

interface Timed {
  seconds: number;
  cpu: CpuSplit;
  pg?: PgProfile;
}

/** Runs every step function in its own loop: warm-up, measured window, then stop and drain. */
async function run(steps: Array<() => Promise<void>>, w: Window, s: Settings, label: string, onMeasure?: () => void): Promise<Timed> {
  if (s.analyze) {
    s.log(`${label}: ANALYZE (BENCH_PG_ANALYZE=1)`);
    await s.analyze();
  }
  const loops = steps.map(async (step) => {
    while (!w.stopping) {
      try {
        await step();
      } catch (err) {
        // e.g. a 2xx whose body is not what the API promises
        s.errors.add(`${label}: unexpected answer`, String((err as Error).message ?? err));
      }
    }
  });
  s.log(`${label}: warming up for ${s.warmupMs / 1000} s`);
  await sleep(s.warmupMs);
  await s.profiler?.start();
  const t0 = performance.now();
  const cpu = cpuWindow(s.serverPid);
  onMeasure?.();
  w.measuring = true;
  s.log(`${label}: measuring for ${s.durationMs / 1000} s`);
  await sleep(s.durationMs);
  w.measuring = false;
  const seconds = (performance.now() - t0) / 1000;
  const split = cpu();
  if (split.other_pct !== null && split.other_pct > 15) {
    s.log(`${label}: WARNING: other processes used ${split.other_pct}% CPU during the window; the figures are understated, rerun on a quiet machine`);
  }
  const pg = await s.profiler?.stop();
  w.stopping = true;
  await Promise.all(loops);
  return { seconds, cpu: split, ...(pg ? { pg } : {}) };
}

function perSecond(count: number, seconds: number): number {
  return Math.round(count / seconds);
}

// ---------------------------------------------------------------- creates

export interface CreatesResult {
  creates_per_s: number;
  count: number;
  seconds: number;
  latency: ReturnType<Latencies["summary"]>;
  cpu: CpuSplit;
  channels: number;
  pg_profile?: PgProfile;
}

/** `clients` concurrent writers, one key each, POSTing ~100-byte messages to one claimable channel. */
export async function creates(api: Api, owner: Key, writers: Key[], channels: number, s: Settings): Promise<CreatesResult> {
  // One channel by default (writes to a channel are serialised by its row
  // lock, docs/decisions.md#cursor-order); BENCH_CREATE_CHANNELS spreads the writers over more.
  const paths: string[] = [];
  for (let i = 0; i < channels; i++) paths.push(`/v1/channels/${await api.createChannel(owner, `bench-${s.runId}-creates-${i}`)}/messages`);
  const lat = new Latencies();
  const w: Window = { measuring: false, stopping: false };
  let n = 0;
  let count = 0;
  const steps = writers.map((k, i) => async () => {
    const a = await api.call("POST", paths[i % paths.length] as string, "/v1/channels/{id}/messages", k.key, JSON.stringify({ content: content("creates", n++) }));
    if (w.measuring && a.ok) {
      count++;
      lat.add(a.ms);
    }
  });
  const t = await run(steps, w, s, "creates");
  return { creates_per_s: perSecond(count, t.seconds), count, seconds: round(t.seconds), latency: lat.summary(), cpu: t.cpu, channels, pg_profile: t.pg };
}

// ---------------------------------------------------------------- lists

export interface ListsResult {
  lists_per_s: number;
  count: number;
  seconds: number;
  latency: ReturnType<Latencies["summary"]>;
  cpu: CpuSplit;
  channel_messages: number;
  page_limit: number;
  cursors: number;
  pages_checked: number;
  short_pages: number;
  pg_profile?: PgProfile;
}

/**
 * `readers` concurrent readers GET /v1/channels/{id}/messages?since=<cursor>&limit=50
 * on a channel seeded with `seed` messages; each request starts at a random
 * cursor taken from the channel with at least 50 messages after it, so every
 * page is a full page of 50 (what a consumer catching up reads).
 */
export async function lists(api: Api, owner: Key, readers: Key[], seed: number, s: Settings): Promise<ListsResult> {
  const limit = 50;
  const channel = await api.createChannel(owner, `bench-${s.runId}-lists`);
  const base = `/v1/channels/${channel}/messages`;
  s.log(`lists: seeding the channel with ${seed} messages`);
  let next = 0;
  await Promise.all(
    readers.map(async (k) => {
      while (next < seed) {
        const i = next++;
        await api.must("POST", base, "/v1/channels/{id}/messages", k.key, JSON.stringify({ content: content("lists", i) }));
      }
    }),
  );
  // Every 10th created_at, as a cursor; keep those with a full page after them.
  const cursors: string[] = [];
  let since = "0";
  let total = 0;
  for (;;) {
    const a = await api.must("GET", `${base}?since=${encodeURIComponent(since)}&limit=10`, "/v1/channels/{id}/messages", owner.key);
    const page = JSON.parse(a.body) as ListJson;
    if (page.data.length === 0 || page.next_cursor === null) break;
    total += page.data.length;
    cursors.push(page.next_cursor);
    since = page.next_cursor;
  }
  if (total !== seed) throw new Error(`lists: the channel holds ${total} messages after seeding ${seed}`);
  const usable = cursors.slice(0, Math.max(1, cursors.length - limit / 10));
  usable.unshift("0");
  const paths = usable.map((c) => `${base}?since=${encodeURIComponent(c)}&limit=${limit}`);

  const lat = new Latencies();
  const w: Window = { measuring: false, stopping: false };
  let count = 0;
  let checked = 0;
  let short = 0;
  let r = 0;
  const steps = readers.map((k) => async () => {
    const path = paths[Math.floor(Math.random() * paths.length)] as string;
    const a = await api.call("GET", path, "/v1/channels/{id}/messages", k.key);
    if (w.measuring && a.ok) {
      count++;
      lat.add(a.ms);
    }
    // Parsing 50 messages costs the client real CPU; check one page in ten.
    if (a.ok && r++ % 10 === 0) {
      checked++;
      if ((JSON.parse(a.body) as ListJson).data.length !== limit) short++;
    }
  });
  const t = await run(steps, w, s, "lists");
  return {
    lists_per_s: perSecond(count, t.seconds),
    count,
    seconds: round(t.seconds),
    latency: lat.summary(),
    cpu: t.cpu,
    channel_messages: total,
    page_limit: limit,
    cursors: paths.length,
    pages_checked: checked,
    short_pages: short,
    pg_profile: t.pg,
  };
}

// ---------------------------------------------------------------- work queue

export interface WorkQueueResult {
  tasks_per_s: number;
  produced_per_s: number;
  acked: number;
  seconds: number;
  claim_latency: ReturnType<Latencies["summary"]>;
  list_latency: ReturnType<Latencies["summary"]>;
  ack_latency: ReturnType<Latencies["summary"]>;
  create_latency: ReturnType<Latencies["summary"]>;
  claim_attempts: number;
  conflicts: number;
  duplicate_claims: number;
  empty_lists: number;
  unexpected_statuses: number;
  backlog_at_start: number;
  backlog_at_end: number;
  cpu: CpuSplit;
  totals: { produced: number; claimed: number; acked: number };
  verification: Verification;
  pg_profile?: PgProfile;
}

export interface Verification {
  /** Messages the listing shows as claimed. */
  claimed_listed: number;
  unclaimed_listed: number;
  /** Acked by a worker but not exactly once in the claimed listing. */
  acked_not_listed_once: number;
  /** Listed as claimed by another key than the one whose claim succeeded. */
  claimant_mismatch: number;
  /** Listed with acknowledged_by other than exactly the claiming actor. */
  ack_mismatch: number;
  /** Claimed in the listing without a successful claim seen by a worker. */
  claimed_unseen: number;
  /** produced − (claimed + unclaimed) listed. */
  missing: number;
  ok: boolean;
}

/**
 * Producers keep the channel stocked with tasks (at most `backlogCap`
 * unclaimed ones); each worker loops: list status=unclaimed&limit=10, claim
 * the listed messages in turn from a random starting point until one claim
 * succeeds (a 409 already_claimed means another worker won it), then ack it.
 */
export async function workQueue(
  api: Api,
  owner: Key,
  producers: Key[],
  workers: Key[],
  opts: { listLimit: number } & StockOptions,
  s: Settings,
): Promise<WorkQueueResult> {
  const channel = await api.createChannel(owner, `bench-${s.runId}-work`);
  const base = `/v1/channels/${channel}/messages`;
  const listPath = `${base}?status=unclaimed&limit=${opts.listLimit}`;
  const w: Window = { measuring: false, stopping: false };
  const claimLat = new Latencies();
  const listLat = new Latencies();
  const ackLat = new Latencies();
  let claimedTotal = 0;
  let ackedInWindow = 0;
  let claimAttempts = 0;
  let conflicts = 0;
  let duplicates = 0;
  let emptyLists = 0;
  let unexpected = 0;
  /** message id → the worker (index) whose claim answered "claimed", and the actor it claimed as */
  const claims = new Map<string, { worker: number; actorId: string }>();
  const acked = new Set<string>();

  const stock = producersOf(api, base, producers, opts, w);
  const { wake, createLat } = stock;

  const idle = workers.map(() => false);
  const workerSteps = workers.map((k, index) => async () => {
    // After an empty page, long-poll (wait=1) so an idle worker does not spin.
    const l = await api.call("GET", idle[index] ? `${listPath}&wait=1` : listPath, "/v1/channels/{id}/messages", k.key);
    if (w.measuring) listLat.add(l.ms);
    if (!l.ok) return;
    const page = JSON.parse(l.body) as ListJson;
    idle[index] = page.data.length === 0;
    if (page.data.length === 0) {
      emptyLists++;
      // A server without long-poll answers at once: back off a little.
      if (l.ms < 50) await sleep(2);
      return;
    }
    // Workers start at different places in the page (worker index), which
    // spreads them over the listed tasks better than a random start.
    const start = index % page.data.length;
    for (let j = 0; j < page.data.length; j++) {
      const m = page.data[(start + j) % page.data.length] as MessageJson;
      const c = await api.call("POST", `/v1/messages/${m.id}/claim`, "/v1/messages/{id}/claim", k.key, "{}", [409]);
      claimAttempts++;
      if (w.measuring) claimLat.add(c.ms);
      if (c.status === 409) {
        conflicts++;
        continue;
      }
      if (!c.ok) return;
      const claim = JSON.parse(c.body) as { status: string; message: MessageJson };
      if (claim.status !== "claimed") {
        // Each worker has its own key and claims a message at most once, so
        // "already_claimed"/"already_acknowledged" would mean a wrong answer.
        unexpected++;
        api.errors.add(`POST /v1/messages/{id}/claim → 200 ${claim.status} (unexpected)`, c.body);
        continue;
      }
      claimedTotal++;
      stock.taken++;
      wake();
      if (claims.has(m.id)) {
        duplicates++;
        api.errors.add("duplicate claim", `message ${m.id} claimed by workers ${claims.get(m.id)?.worker} and ${index}`);
      } else {
        claims.set(m.id, { worker: index, actorId: claim.message.claimed_by?.id ?? "" });
      }
      // Finish the task even when the window has closed, so that every
      // claimed task is acked before the verification.
      const a = await api.call("POST", `/v1/messages/${m.id}/ack`, "/v1/messages/{id}/ack", k.key, "{}");
      if (!a.ok) return;
      const ack = JSON.parse(a.body) as { status: string };
      if (ack.status !== "acknowledged") {
        unexpected++;
        api.errors.add(`POST /v1/messages/{id}/ack → 200 ${ack.status} (unexpected)`, a.body);
      }
      acked.add(m.id);
      if (w.measuring) {
        ackLat.add(a.ms);
        ackedInWindow++;
      }
      return;
    }
  });

  // The warm-up also stocks the queue, so the window starts in steady state.
  let backlogAtStart = 0;
  const timed = await run([...stock.steps, ...workerSteps], w, s, "work queue", () => (backlogAtStart = stock.backlog()));
  const backlogAtEnd = stock.backlog();
  const produced = stock.produced;
  s.log(`work queue: ${produced} produced, ${claimedTotal} claimed, ${acked.size} acked; verifying by listing the channel`);

  const verification = await verify(api, owner, base, produced, claims, acked, workers);
  return {
    tasks_per_s: perSecond(ackedInWindow, timed.seconds),
    produced_per_s: perSecond(stock.producedInWindow, timed.seconds),
    acked: ackedInWindow,
    seconds: round(timed.seconds),
    claim_latency: claimLat.summary(),
    list_latency: listLat.summary(),
    ack_latency: ackLat.summary(),
    create_latency: createLat.summary(),
    claim_attempts: claimAttempts,
    conflicts,
    duplicate_claims: duplicates,
    empty_lists: emptyLists,
    unexpected_statuses: unexpected,
    backlog_at_start: backlogAtStart,
    backlog_at_end: backlogAtEnd,
    cpu: timed.cpu,
    totals: { produced, claimed: claimedTotal, acked: acked.size },
    verification,
    pg_profile: timed.pg,
  };
}

export interface StockOptions {
  backlogCap: number;
  producerInflight: number;
  /** Tasks per post: 1 posts each task alone, more posts them with messages:batchCreate. */
  producerBatch: number;
}

/**
 * Producers that keep a channel stocked with tasks: at most `backlogCap`
 * produced but not yet `taken`. Each producer (one key) keeps
 * `producerInflight` posts in flight: two strictly sequential posters would
 * cap the queue at 2 / create latency. With `producerBatch` > 1 each post is
 * a batchCreate of up to that many tasks (fewer when the backlog is nearly
 * full), as a producer with work piling up would send it.
 */
function producersOf(api: Api, base: string, producers: Key[], opts: StockOptions, w: Window) {
  const stock = {
    produced: 0,
    producedInWindow: 0,
    /** Tasks the workers took off the queue (claimed or received). */
    taken: 0,
    createLat: new Latencies(),
    backlog: () => stock.produced - stock.taken,
    /** Lets waiting producers re-check the backlog: call after taking tasks. */
    wake: () => {
      const r = room;
      room = undefined;
      roomPromise = undefined;
      r?.();
    },
    steps: [] as Array<() => Promise<void>>,
  };
  let room: (() => void) | undefined;
  let roomPromise: Promise<void> | undefined;
  let n = 0;
  const waitForRoom = async () => {
    while (!w.stopping && stock.backlog() >= opts.backlogCap) {
      roomPromise ??= new Promise<void>((resolve) => (room = resolve));
      await Promise.race([roomPromise, sleep(50)]);
    }
  };
  stock.steps = producers.flatMap((k) =>
    Array.from({ length: opts.producerInflight }, () => async () => {
      await waitForRoom();
      if (w.stopping) return;
      const count = Math.max(1, Math.min(opts.producerBatch, opts.backlogCap - stock.backlog()));
      const a =
        opts.producerBatch === 1
          ? await api.call("POST", base, "/v1/channels/{id}/messages", k.key, JSON.stringify({ content: content("work", n++) }))
          : await api.call(
              "POST",
              `${base}:batchCreate`,
              "/v1/channels/{id}/messages:batchCreate",
              k.key,
              JSON.stringify({ messages: Array.from({ length: count }, () => ({ content: content("work", n++) })) }),
            );
      if (a.ok) {
        const made = opts.producerBatch === 1 ? 1 : count;
        stock.produced += made;
        if (w.measuring) {
          stock.producedInWindow += made;
          stock.createLat.add(a.ms);
        }
      }
    }),
  );
  return stock;
}

// ---------------------------------------------------------------- receive queue

/** How a worker acknowledges what it received: one ack per task, one batchAck per receive, or with its next receive (`complete`). */
export type AckMode = "each" | "batch" | "next-receive";

export interface ReceiveQueueResult {
  max_messages: number;
  ack_mode: AckMode;
  tasks_per_s: number;
  produced_per_s: number;
  acked: number;
  seconds: number;
  receive_latency: ReturnType<Latencies["summary"]>;
  ack_latency: ReturnType<Latencies["summary"]>;
  create_latency: ReturnType<Latencies["summary"]>;
  receives: number;
  empty_receives: number;
  /** Mean messages per non-empty receive. */
  batch_mean: number;
  duplicate_leases: number;
  unexpected_statuses: number;
  backlog_at_start: number;
  backlog_at_end: number;
  cpu: CpuSplit;
  totals: { produced: number; received: number; acked: number };
  verification: Verification;
  pg_profile?: PgProfile;
}

/**
 * The work queue again, with receive instead of list → claim: producers as in
 * workQueue; each worker loops: POST messages:receive {max_messages}, then
 * acks the leased messages one by one (each), all in one messages:batchAck
 * (batch), or by naming them in `complete` of its next receive
 * (next-receive: one request per task). No lease runs out within a run
 * (default 300 s), so a message received twice is a duplicate.
 */
export async function receiveQueue(
  api: Api,
  owner: Key,
  producers: Key[],
  workers: Key[],
  opts: { maxMessages: number; ackMode: AckMode } & StockOptions,
  s: Settings,
): Promise<ReceiveQueueResult> {
  const channel = await api.createChannel(owner, `bench-${s.runId}-receive-${opts.maxMessages}-${opts.ackMode}`);
  const base = `/v1/channels/${channel}/messages`;
  const w: Window = { measuring: false, stopping: false };
  const receiveLat = new Latencies();
  const ackLat = new Latencies();
  const stock = producersOf(api, base, producers, opts, w);
  let receivedTotal = 0;
  let ackedInWindow = 0;
  let receives = 0;
  let nonEmpty = 0;
  let emptyReceives = 0;
  let duplicates = 0;
  let unexpected = 0;
  const leases = new Map<string, { worker: number; actorId: string }>();
  const acked = new Set<string>();

  const idle = workers.map(() => false);
  // next-receive: what each worker finished, acknowledged by its next receive.
  const finished: string[][] = workers.map(() => []);
  // Ack every received task, also after the window closed, so the verification finds them done.
  const settled = (id: string, status: string | null, body: string) => {
    if (status !== "acknowledged") {
      unexpected++;
      api.errors.add(`ack → ${status ?? "error"} (unexpected)`, body);
    }
    acked.add(id);
    if (w.measuring) ackedInWindow++;
  };
  const workerSteps = workers.map((k, index) => async () => {
    const request: Record<string, unknown> = { max_messages: opts.maxMessages };
    // After an empty answer, long-poll (wait=1) so an idle worker does not spin.
    if (idle[index]) request.wait = 1;
    const completing = finished[index]!;
    if (completing.length > 0) request.complete = completing.map((id) => ({ message_id: id }));
    finished[index] = [];
    const r = await api.call("POST", `${base}:receive`, "/v1/channels/{id}/messages:receive", k.key, JSON.stringify(request));
    receives++;
    if (w.measuring) receiveLat.add(r.ms);
    if (!r.ok) {
      finished[index]!.push(...completing);
      return;
    }
    const { data, completed } = JSON.parse(r.body) as {
      data: Array<{ message: MessageJson; lease_token: string }>;
      completed: Array<{ message_id: string; status: string | null }>;
    };
    for (const c of completed) settled(c.message_id, c.status, r.body);
    idle[index] = data.length === 0;
    if (data.length === 0) {
      emptyReceives++;
      if (r.ms < 50) await sleep(2);
      return;
    }
    nonEmpty++;
    receivedTotal += data.length;
    stock.taken += data.length;
    stock.wake();
    for (const { message: m } of data) {
      if (leases.has(m.id)) {
        duplicates++;
        api.errors.add("duplicate lease", `message ${m.id} received by workers ${leases.get(m.id)?.worker} and ${index}`);
      } else {
        leases.set(m.id, { worker: index, actorId: m.claimed_by?.id ?? "" });
      }
    }
    if (opts.ackMode === "next-receive") {
      finished[index]!.push(...data.map((d) => d.message.id));
      return;
    }
    if (opts.ackMode === "batch") {
      const a = await api.call("POST", "/v1/messages:batchAck", "/v1/messages:batchAck", k.key, JSON.stringify({ message_ids: data.map((d) => d.message.id) }));
      if (!a.ok) return;
      if (w.measuring) ackLat.add(a.ms);
      const { results } = JSON.parse(a.body) as { results: Array<{ message_id: string; status: string | null }> };
      for (const r of results) settled(r.message_id, r.status, a.body);
      return;
    }
    for (const { message: m } of data) {
      const a = await api.call("POST", `/v1/messages/${m.id}/ack`, "/v1/messages/{id}/ack", k.key, "{}");
      if (!a.ok) continue;
      if (w.measuring) ackLat.add(a.ms);
      settled(m.id, (JSON.parse(a.body) as { status: string }).status, a.body);
    }
  });

  let backlogAtStart = 0;
  const label = `receive max_messages=${opts.maxMessages}, ack ${opts.ackMode}`;
  const timed = await run([...stock.steps, ...workerSteps], w, s, label, () => (backlogAtStart = stock.backlog()));
  const backlogAtEnd = stock.backlog();
  // The tasks each worker finished last, left for a receive that will not come.
  for (const [index, ids] of finished.entries()) {
    if (ids.length === 0) continue;
    const a = await api.call("POST", "/v1/messages:batchAck", "/v1/messages:batchAck", workers[index]!.key, JSON.stringify({ message_ids: ids }));
    if (!a.ok) continue;
    const { results } = JSON.parse(a.body) as { results: Array<{ message_id: string; status: string | null }> };
    for (const r of results) {
      if (r.status !== "acknowledged") api.errors.add(`ack → ${r.status ?? "error"} (unexpected)`, a.body);
      acked.add(r.message_id);
    }
  }
  s.log(`${label}: ${stock.produced} produced, ${receivedTotal} received, ${acked.size} acked; verifying by listing the channel`);
  const verification = await verify(api, owner, base, stock.produced, leases, acked, workers);
  return {
    max_messages: opts.maxMessages,
    ack_mode: opts.ackMode,
    tasks_per_s: perSecond(ackedInWindow, timed.seconds),
    produced_per_s: perSecond(stock.producedInWindow, timed.seconds),
    acked: ackedInWindow,
    seconds: round(timed.seconds),
    receive_latency: receiveLat.summary(),
    ack_latency: ackLat.summary(),
    create_latency: stock.createLat.summary(),
    receives,
    empty_receives: emptyReceives,
    batch_mean: nonEmpty === 0 ? 0 : round(receivedTotal / nonEmpty),
    duplicate_leases: duplicates,
    unexpected_statuses: unexpected,
    backlog_at_start: backlogAtStart,
    backlog_at_end: backlogAtEnd,
    cpu: timed.cpu,
    totals: { produced: stock.produced, received: receivedTotal, acked: acked.size },
    verification,
    pg_profile: timed.pg,
  };
}

/**
 * After the run, read the whole channel back (status=claimed, then
 * status=unclaimed) and check that every acked task was claimed exactly once,
 * by the key whose claim succeeded, and acknowledged by that claimant only.
 */
async function verify(
  api: Api,
  owner: Key,
  base: string,
  produced: number,
  claims: Map<string, { worker: number; actorId: string }>,
  acked: Set<string>,
  workers: Key[],
): Promise<Verification> {
  const readAll = async (status: string): Promise<MessageJson[]> => {
    const out: MessageJson[] = [];
    let since = "0";
    for (;;) {
      const a = await api.must("GET", `${base}?status=${status}&limit=100&since=${encodeURIComponent(since)}`, "/v1/channels/{id}/messages", owner.key);
      const page = JSON.parse(a.body) as ListJson;
      out.push(...page.data);
      if (page.data.length === 0 || page.next_cursor === null) return out;
      since = page.next_cursor;
    }
  };
  const claimed = await readAll("claimed");
  const unclaimed = await readAll("unclaimed");
  const seen = new Map<string, number>();
  let claimantMismatch = 0;
  let ackMismatch = 0;
  let unseen = 0;
  for (const m of claimed) {
    seen.set(m.id, (seen.get(m.id) ?? 0) + 1);
    const c = claims.get(m.id);
    if (!c) {
      unseen++;
      continue;
    }
    if (m.claimed_by_key_id !== workers[c.worker]?.key_id) claimantMismatch++;
    if (m.acknowledged_by.length !== 1 || m.acknowledged_by[0]?.id !== c.actorId) ackMismatch++;
  }
  let ackedNotOnce = 0;
  for (const id of acked) if (seen.get(id) !== 1) ackedNotOnce++;
  const missing = produced - claimed.length - unclaimed.length;
  return {
    claimed_listed: claimed.length,
    unclaimed_listed: unclaimed.length,
    acked_not_listed_once: ackedNotOnce,
    claimant_mismatch: claimantMismatch,
    ack_mismatch: ackMismatch,
    claimed_unseen: unseen,
    missing,
    ok: ackedNotOnce === 0 && claimantMismatch === 0 && ackMismatch === 0 && unseen === 0 && missing === 0,
  };
}

// ---------------------------------------------------------------- webhooks

export interface WebhooksResult {
  /** Messages created in the window (each one is a webhook delivery). */
  count: number;
  creates_per_s: number;
  seconds: number;
  /** Create answer → the receiver has the POST's body. Negative gaps (the POST won the race) count as 0. */
  after_response: ReturnType<Latencies["summary"]>;
  /** Create request sent → the receiver has the POST's body. */
  after_request: ReturnType<Latencies["summary"]>;
  /** Deliveries that reached the receiver before the create answer reached the client. */
  arrived_before_response: number;
  /** Measured messages whose POST had not arrived 10 s after the window. */
  missing: number;
  cpu: CpuSplit;
}

/**
 * First-attempt webhook latency (docs/decisions.md#webhook-delivery): `writers`
 * closed-loop clients post to a channel whose webhook_url is a receiver in this
 * process (127.0.0.1, so the service must run with
 * AGENTBUS_ALLOW_PRIVATE_TARGETS=true; run.ts sets it for the service it
 * starts). The receiver answers 200 at once and notes when each message's POST
 * arrived.
 */
export async function webhooks(api: Api, owner: Key, writers: Key[], s: Settings): Promise<WebhooksResult> {
  const arrived = new Map<string, number>();
  const receiver = () => http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const at = performance.now();
      res.end();
      try {
        const id = (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { message?: { id?: string } }).message?.id;
        if (id) arrived.set(id, at);
      } catch {
        s.errors.add("webhooks: receiver got a body that is not JSON", Buffer.concat(chunks).toString("utf8").slice(0, 200));
      }
    });
  });
  // One channel and one receiving server (one destination, host:port) per
  // writer: a destination gets at most AGENTBUS_WEBHOOK_DESTINATION_CONCURRENCY
  // requests at a time, by design, so all writers on one destination would
  // measure that cap's queue rather than delivery latency.
  const receivers = writers.map(receiver);
  await Promise.all(receivers.map((r) => new Promise<void>((resolve) => r.listen(0, "127.0.0.1", resolve))));
  try {
    const paths: string[] = [];
    for (const [i, r] of receivers.entries()) {
      const hook = `http://127.0.0.1:${(r.address() as AddressInfo).port}/hook`;
      const created = await api.must(
        "POST",
        "/v1/channels",
        "/v1/channels",
        owner.key,
        JSON.stringify({ name: `bench-${s.runId}-webhooks-${i}`, mode: "broadcast", discoverable: false, ttl_seconds: 3600, webhook_url: hook, webhook_secret: "bench-secret" }),
      );
      paths.push(`/v1/channels/${(JSON.parse(created.body) as { id: string }).id}/messages`);
    }
    const sent = new Map<string, { started: number; answered: number }>();
    const w: Window = { measuring: false, stopping: false };
    let n = 0;
    const steps = writers.map((k, i) => async () => {
      const path = paths[i]!;
      const started = performance.now();
      const a = await api.call("POST", path, "/v1/channels/{id}/messages", k.key, JSON.stringify({ content: content("webhooks", n++) }));
      if (w.measuring && a.ok) sent.set((JSON.parse(a.body) as { message: MessageJson }).message.id, { started, answered: started + a.ms });
    });
    const t = await run(steps, w, s, "webhooks");
    const deadline = performance.now() + 10_000;
    while ([...sent.keys()].some((id) => !arrived.has(id)) && performance.now() < deadline) await sleep(50);

    const afterResponse = new Latencies();
    const afterRequest = new Latencies();
    let early = 0;
    let missing = 0;
    for (const [id, times] of sent) {
      const at = arrived.get(id);
      if (at === undefined) {
        missing++;
        continue;
      }
      if (at < times.answered) early++;
      afterResponse.add(Math.max(0, at - times.answered));
      afterRequest.add(at - times.started);
    }
    if (missing > 0) s.errors.add("webhooks: POST never arrived", `${missing} of ${sent.size} measured messages`);
    return {
      count: sent.size,
      creates_per_s: perSecond(sent.size, t.seconds),
      seconds: round(t.seconds),
      after_response: afterResponse.summary(),
      after_request: afterRequest.summary(),
      arrived_before_response: early,
      missing,
      cpu: t.cpu,
    };
  } finally {
    for (const r of receivers) r.closeAllConnections();
    await Promise.all(receivers.map((r) => new Promise<void>((resolve) => r.close(() => resolve()))));
  }
}
