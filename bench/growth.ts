/**
 * BENCH_SCENARIOS=growth (issue 15 item 6; not in the default run: it writes
 * a million messages): one claimable channel grows to BENCH_GROWTH_MESSAGES
 * (default 1,000,000) beside 10,000 other channels (BENCH_GROWTH_CHANNELS),
 * and at each size on the way (10,000, 100,000, 300,000, then every
 * doubling up to the end) the API is measured on that channel:
 *
 *  - write: 200 single posts, one after another;
 *  - list head / list tail: 200 pages of 50 from the oldest message, and
 *    from 150 messages before the newest (a consumer that is caught up);
 *  - receive: 100 receives of 10, each batch acknowledged with batchAck;
 *  - purge: 10,000 of the channel's oldest open messages made expired, then
 *    the service's own purge (PgPurgeStore, as the job runs it) timed until
 *    they are in history.
 *
 * The backlog is written by the same write function posts use
 * (agentbus_create_messages), 5,000 per call over a superuser connection, so
 * the run takes minutes rather than hours; the small channels get 10 rows
 * each by plain INSERT. The service runs without job workers, so the only
 * purge is the one measured. Embedded only (it needs the superuser connection).
 */
import pg from "pg";
import { systemClock } from "../src/model/time.js";
import { Db } from "../src/store/db.js";
import { createPool } from "../src/store/pool.js";
import { PgPurgeStore } from "../src/store/purge.js";
import { Api, content, type Key } from "./api.js";
import { createClient, parseClientKind } from "./http.js";
import { startServer, superuserUrl } from "./server.js";
import { ErrorTally, Latencies, round } from "./stats.js";

type Summary = ReturnType<Latencies["summary"]>;

export interface GrowthPoint {
  messages: number;
  /** Seconds the fill up to this size took (write function, 5,000 per call). */
  fill_seconds: number;
  messages_table_mb: number;
  write: Summary;
  list_head: Summary;
  list_tail: Summary;
  receive: Summary;
  batch_ack: Summary;
  /** Milliseconds the purge took to archive 10,000 expired messages of the channel. */
  purge_10k_ms: number;
  purged: number;
}

const log = (msg: string) => process.stderr.write(`[bench] ${msg}\n`);
const FILL_BATCH = 5_000;

/** 10k, 100k, 300k, then doubling, up to and including max. */
export function checkpoints(max: number): number[] {
  const points = [10_000, 100_000, 300_000].filter((n) => n < max);
  for (let n = 600_000; n < max; n *= 2) points.push(n);
  points.push(max);
  return points;
}

export async function growth(maxMessages: number, channels: number): Promise<{ points: GrowthPoint[]; errors: ErrorTally }> {
  const server = await startServer({ ...process.env, BENCH_URL: "", AGENTBUS_WORKERS: "false" });
  const errors = new ErrorTally();
  const client = createClient(parseClientKind(process.env.BENCH_CLIENT), server.url, 2);
  let sql: pg.Client | undefined;
  let pool: pg.Pool | undefined;
  try {
    if (!server.pgDataDir) throw new Error("the growth scenario needs the embedded server the bench starts (not BENCH_URL)");
    const url = await superuserUrl(server.pgDataDir);
    sql = new pg.Client({ connectionString: url });
    await sql.connect();
    pool = createPool(url, { max: 2 });
    const purge = new PgPurgeStore(new Db(pool));
    const api = new Api(client, errors);
    const owner = await api.mintKey(`growth-${Date.now()}`);
    const big = await api.createChannel(owner, "growth", { ttl_seconds: 7 * 86_400 });
    await fillSmallChannels(sql, owner, channels);

    const points: GrowthPoint[] = [];
    let size = 0;
    for (const target of checkpoints(maxMessages)) {
      const started = performance.now();
      while (size < target) {
        const n = Math.min(FILL_BATCH, target - size);
        await sql.query("SELECT count(*) FROM agentbus_create_messages($1, $2, $3, $4, $5, $6, $7::jsonb[], $8::jsonb[])", [
          big,
          ...[owner.key_id, null, null, null, content("growth", size), "{}", "[]"].map((v) => Array.from({ length: n }, () => v)),
        ]);
        size += n;
      }
      const fillSeconds = (performance.now() - started) / 1000;
      log(`growth: ${size} messages (filled in ${round(fillSeconds, 1)} s); measuring`);
      const point = await measure(api, owner, big, sql, purge);
      points.push({ messages: size, fill_seconds: round(fillSeconds, 1), ...point });
      log(
        `growth @ ${size}: write p50 ${point.write.p50_ms} ms, list head p50 ${point.list_head.p50_ms} ms, tail p50 ${point.list_tail.p50_ms} ms, ` +
          `receive p50 ${point.receive.p50_ms} ms, batchAck p50 ${point.batch_ack.p50_ms} ms, purge of 10,000 ${point.purge_10k_ms} ms, table ${point.messages_table_mb} MB`,
      );
    }
    return { points, errors };
  } finally {
    await sql?.end();
    await pool?.end();
    await client.close();
    await server.stop();
  }
}

/** The other channels of a shared deployment, 10 messages each, written directly (they are only there to be passed over). */
async function fillSmallChannels(sql: pg.Client, owner: Key, channels: number): Promise<void> {
  const started = performance.now();
  await sql.query(
    `WITH k AS (SELECT key_id, owner_id FROM api_keys WHERE key_id = $1),
     c AS (
       INSERT INTO channels (name, mode, access, discoverable, owner_id, created_by_key_id, ttl_seconds, retention_days, created_at, updated_at)
       SELECT 'small ' || i, 'claimable', 'open', false, k.owner_id, k.key_id, 86400, 7, now() - interval '1 hour' + i * interval '1 millisecond', now()
       FROM k, generate_series(1, $2::int) AS i RETURNING id
     )
     INSERT INTO messages (channel_id, author_key_id, content, created_at, expires_at)
     SELECT c.id, $1, 'small', now() - interval '1 hour' + j * interval '1 millisecond', now() + interval '1 day' FROM c, generate_series(1, 10) AS j`,
    [owner.key_id, channels],
  );
  log(`growth: ${channels} other channels with 10 messages each in ${round((performance.now() - started) / 1000, 1)} s`);
}

async function measure(api: Api, owner: Key, channel: string, sql: pg.Client, purge: PgPurgeStore): Promise<Omit<GrowthPoint, "messages" | "fill_seconds">> {
  const base = `/v1/channels/${channel}/messages`;
  const write = new Latencies();
  let tailCursor = "";
  for (let i = 0; i < 200; i++) {
    const a = await api.call("POST", base, "/v1/channels/{id}/messages", owner.key, JSON.stringify({ content: content("growth-write", i) }));
    write.add(a.ms);
    if (i === 49 && a.ok) tailCursor = (JSON.parse(a.body) as { next_cursor: string }).next_cursor;
  }
  const page = async (since: string, into: Latencies) => {
    const a = await api.call("GET", `${base}?since=${encodeURIComponent(since)}&limit=50`, "/v1/channels/{id}/messages", owner.key);
    into.add(a.ms);
  };
  const head = new Latencies();
  const tail = new Latencies();
  for (let i = 0; i < 200; i++) {
    await page("0", head);
    await page(tailCursor, tail);
  }
  const receive = new Latencies();
  const batchAck = new Latencies();
  for (let i = 0; i < 100; i++) {
    const r = await api.call("POST", `${base}:receive`, "/v1/channels/{id}/messages:receive", owner.key, JSON.stringify({ max_messages: 10 }));
    receive.add(r.ms);
    if (!r.ok) continue;
    const ids = (JSON.parse(r.body) as { data: Array<{ message: { id: string } }> }).data.map((d) => d.message.id);
    if (ids.length === 0) continue;
    const a = await api.call("POST", "/v1/messages:batchAck", "/v1/messages:batchAck", owner.key, JSON.stringify({ message_ids: ids }));
    batchAck.add(a.ms);
  }
  // Expire the 10,000 oldest open messages (as their TTL would), then purge them as the job does.
  await sql.query(
    `UPDATE messages SET expires_at = now() - interval '1 second'
     WHERE id IN (SELECT id FROM messages WHERE channel_id = $1 AND claimed_by_key_id IS NULL ORDER BY created_at LIMIT 10000)`,
    [channel],
  );
  const started = performance.now();
  const counts = await purge.purge(systemClock.now());
  const purgeMs = performance.now() - started;
  const { rows } = await sql.query<{ mb: number }>("SELECT round(pg_total_relation_size('messages') / 1048576.0)::int AS mb");
  return {
    messages_table_mb: rows[0]?.mb ?? 0,
    write: write.summary(),
    list_head: head.summary(),
    list_tail: tail.summary(),
    receive: receive.summary(),
    batch_ack: batchAck.summary(),
    purge_10k_ms: round(purgeMs, 1),
    purged: counts.archivedMessages,
  };
}
