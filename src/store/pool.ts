/**
 * The PostgreSQL connection pool and the two helpers every store module uses.
 *
 * Type parsing is configured per pool, not through the global pg.types
 * registry, so that no other library sharing the `pg` module (Agenda, tests)
 * sees its values change shape behind its back.
 */
import pg from "pg";
import { parsePgTimestamp, type Micros } from "../model/time.js";

const OID = {
  INT8: 20,
  JSON: 114,
  JSONB: 3802,
  TEXT_ARRAY: 1009,
  INT8_ARRAY: 1016,
  TIMESTAMP: 1114,
  TIMESTAMP_ARRAY: 1115,
  TIMESTAMPTZ: 1184,
  TIMESTAMPTZ_ARRAY: 1185,
} as const;

/**
 * Timestamps become integer microseconds: pg's default turns them into a JS
 * Date, which drops the microseconds that cursors must keep (docs/decisions.md#json-timestamps).
 */
function parseMicros(text: string): Micros {
  if (text === "infinity") return Number.POSITIVE_INFINITY;
  if (text === "-infinity") return Number.NEGATIVE_INFINITY;
  // `timestamp` (without time zone) has no offset in its text form; we only
  // ever store UTC in it, and every session runs with TimeZone=UTC.
  // parsePgTimestamp reads the usual text by character position, not by regex.
  const micros = parsePgTimestamp(text);
  // Throwing here fails the query (pg catches row-parse errors) rather than
  // handing a caller a silently wrong instant, e.g. for BC or year > 9999.
  if (micros === undefined) throw new Error(`Unsupported timestamp value from PostgreSQL: ${JSON.stringify(text)}`);
  return micros;
}

/**
 * int8 becomes a number: counts, sequence ids and sizes stay far below 2^53.
 * Refuse rather than round if one ever does not.
 */
function parseInt8(text: string): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`int8 value ${text} does not fit a JS number exactly`);
  return value;
}

/**
 * json and jsonb as pg parses them (JSON.parse), except the empty object and
 * array: every message row carries metadata, mentions and acknowledged_by,
 * mostly {} and [], and a literal costs a tenth of a JSON.parse call.
 */
function parseJson(text: string): unknown {
  if (text === "{}") return {};
  if (text === "[]") return [];
  return JSON.parse(text);
}

type Nested<T> = T | null | Nested<T>[];

// pg-types' TypeId enum omits array OIDs, though its registry has them.
const builtinParser = pg.types.getTypeParser as (oid: number, format?: "text" | "binary") => (text: string) => unknown;
const textArrayParser = builtinParser(OID.TEXT_ARRAY, "text") as (text: string) => Nested<string>;

/** Reuses pg's text[] parser (quoting, NULLs, nesting) and converts each element. */
function arrayOf<T>(element: (text: string) => T): (text: string) => Nested<T> {
  const convert = (value: Nested<string>): Nested<T> =>
    value === null ? null : Array.isArray(value) ? value.map(convert) : element(value);
  return (text) => convert(textArrayParser(text));
}

const parsers = new Map<number, (text: string) => unknown>([
  [OID.INT8, parseInt8],
  [OID.JSON, parseJson],
  [OID.JSONB, parseJson],
  [OID.INT8_ARRAY, arrayOf(parseInt8)],
  [OID.TIMESTAMP, parseMicros],
  [OID.TIMESTAMP_ARRAY, arrayOf(parseMicros)],
  [OID.TIMESTAMPTZ, parseMicros],
  [OID.TIMESTAMPTZ_ARRAY, arrayOf(parseMicros)],
]);

const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    (format !== "binary" && parsers.get(oid)) || builtinParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
};

export interface PoolOptions {
  /** Most connections this process opens. */
  max: number;
  /** Called for errors on idle clients (e.g. the server restarted); defaults to ignoring them. */
  onError?: (err: Error) => void;
}

export function createPool(url: string, options: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max,
    types,
    // Every session in UTC, so now()::date, date_trunc and casts to
    // timestamp agree across servers whatever their configured zone.
    options: "-c TimeZone=UTC",
    application_name: "agentbus",
    // A black-holed server would otherwise hang a request for the OS TCP
    // timeout (minutes); this turns it into a prompt store_unavailable.
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  // Without a listener an idle client's error (server restart, network drop)
  // is an unhandled 'error' event and kills the process. The pool already
  // discards that client; the next checkout reconnects.
  pool.on("error", (err) => options.onError?.(err));
  const open = new Set<pg.Client>();
  openConnections.set(pool, open);
  pool.on("connect", (client) => {
    open.add(client);
    client.once("end", () => open.delete(client));
  });
  return pool;
}

const openConnections = new WeakMap<pg.Pool, Set<pg.Client>>();

/**
 * pool.end(), and then until its connections have really closed (bounded).
 * pg-pool resolves end() as soon as it has asked its idle clients to
 * close; a database stopped right after would still find them open and
 * terminate them, each termination logged twice (by PostgreSQL and by the
 * pool's error listener) on every clean shutdown.
 */
export async function closePool(pool: pg.Pool, timeoutMs = 2_000): Promise<void> {
  await pool.end();
  const open = openConnections.get(pool);
  const deadline = Date.now() + timeoutMs;
  while (open !== undefined && open.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

/**
 * Runs fn inside BEGIN/COMMIT on one client; rolls back when it throws.
 * The client is always released; a client whose connection failed or whose
 * ROLLBACK failed is destroyed instead of returned, since its state is unknown.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  // pg-pool removes its error listener while a client is checked out; a
  // connection lost between two queries of fn would otherwise be an
  // unhandled 'error' event. The next query on this client fails anyway.
  const onError = (err: Error) => {
    broken = err;
  };
  client.on("error", onError);
  try {
    await client.query("BEGIN");
    const result = await fn(client);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    try {
      await client.query("ROLLBACK");
    } catch (rollbackErr) {
      broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
    }
    throw err;
  } finally {
    client.off("error", onError);
    client.release(broken);
  }
}

