import net from "node:net";
import { beforeAll, describe, expect, it } from "vitest";
import { formatTimestamp, parseTimestamp } from "../../src/model/time.js";
import { createPool, withTransaction } from "../../src/store/pool.js";
import { isConnectionError } from "../../src/model/storage-errors.js";
import { useTestDatabase } from "../support/database.js";

const db = useTestDatabase();

async function one<T>(sql: string, params: unknown[] = []): Promise<T> {
  const { rows } = await db.pool.query<{ v: T }>(sql, params);
  return rows[0]!.v;
}

/** A port on 127.0.0.1 that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("type parsing", () => {
  it("reads timestamptz as exact integer microseconds", async () => {
    const text = "2026-11-21T03:14:39.743512Z";

    const value = await one<number>("SELECT $1::timestamptz AS v", [text]);

    expect(value).toBe(parseTimestamp(text));
    expect(formatTimestamp(value)).toBe(text);
  });

  it("reads a timestamptz written with an offset as the same instant", async () => {
    const value = await one<number>("SELECT '2026-11-21T05:14:39.000001+02:00'::timestamptz AS v");

    expect(formatTimestamp(value)).toBe("2026-11-21T03:14:39.000001Z");
  });

  it("reads timestamp without time zone as UTC", async () => {
    const value = await one<number>("SELECT '2026-11-21 03:14:39.743512'::timestamp AS v");

    expect(formatTimestamp(value)).toBe("2026-11-21T03:14:39.743512Z");
  });

  it("reads timestamptz arrays element by element, keeping NULLs", async () => {
    const value = await one<unknown>("SELECT ARRAY['2026-11-21T03:14:39.743512Z'::timestamptz, NULL] AS v");

    expect(value).toEqual([parseTimestamp("2026-11-21T03:14:39.743512Z"), null]);
  });

  it("reads infinity timestamps as ±Infinity", async () => {
    const { rows } = await db.pool.query("SELECT 'infinity'::timestamptz AS a, '-infinity'::timestamptz AS b");

    expect(rows[0]).toEqual({ a: Number.POSITIVE_INFINITY, b: Number.NEGATIVE_INFINITY });
  });

  it("reads int8 as a number", async () => {
    const { rows } = await db.pool.query("SELECT count(*) AS n, 9007199254740991::int8 AS max, ARRAY[1, 2]::int8[] AS list");

    expect(rows[0]).toEqual({ n: 1, max: Number.MAX_SAFE_INTEGER, list: [1, 2] });
  });

  it("fails the query rather than round an int8 beyond 2^53", async () => {
    await expect(db.pool.query("SELECT 9007199254740993::int8 AS v")).rejects.toThrow(/does not fit a JS number/);
  });

  it("leaves the global pg type parsers alone", async () => {
    const pg = (await import("pg")).default;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT 5::int8 AS v");
      expect(rows[0]).toEqual({ v: "5" });
    } finally {
      await client.end();
    }
  });

  it("runs every session in UTC", async () => {
    expect(await one<string>("SELECT current_setting('TimeZone') AS v")).toBe("UTC");
  });
});

describe("withTransaction", () => {
  beforeAll(async () => {
    await db.pool.query("CREATE TABLE tx_probe (id int PRIMARY KEY)");
  });

  it("commits what the function wrote and returns its result", async () => {
    const result = await withTransaction(db.pool, async (client) => {
      await client.query("INSERT INTO tx_probe VALUES (1)");
      return "done";
    });

    expect(result).toBe("done");
    expect(await one<number>("SELECT count(*) AS v FROM tx_probe WHERE id = 1")).toBe(1);
  });

  it("rolls back and rethrows when the function throws", async () => {
    const boom = new Error("boom");

    await expect(
      withTransaction(db.pool, async (client) => {
        await client.query("INSERT INTO tx_probe VALUES (2)");
        throw boom;
      }),
    ).rejects.toBe(boom);

    expect(await one<number>("SELECT count(*) AS v FROM tx_probe WHERE id = 2")).toBe(0);
  });

  it("returns the client to the pool whether it commits or fails", async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      await withTransaction(pool, async (c) => c.query("SELECT 1"));
      await withTransaction(pool, async () => Promise.reject(new Error("x"))).catch(() => {});

      // With max 1, a leaked client would make this wait for ever.
      await expect(withTransaction(pool, async (c) => (await c.query("SELECT 1 AS v")).rows[0])).resolves.toEqual({ v: 1 });
    } finally {
      await pool.end();
    }
  });
});

describe("isConnectionError", () => {
  it("is true for a refused connection", async () => {
    const pool = createPool(`postgres://postgres:x@127.0.0.1:${await closedPort()}/agentbus`, { max: 1 });
    try {
      const err = await pool.query("SELECT 1").catch((e: unknown) => e);

      expect(isConnectionError(err)).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it("is true when the server ends the session (57P01)", async () => {
    const pool = createPool(db.url, { max: 1 });
    try {
      const err = await pool.query("SELECT pg_terminate_backend(pg_backend_pid())").catch((e: unknown) => e);

      expect(err).toMatchObject({ code: "57P01" });
      expect(isConnectionError(err)).toBe(true);
    } finally {
      await pool.end();
    }
  });

  it("is false for a syntax error", async () => {
    const err = await db.pool.query("SELEC 1").catch((e: unknown) => e);

    expect(err).toMatchObject({ code: "42601" });
    expect(isConnectionError(err)).toBe(false);
  });

  it("is false for an error raised while the query runs", async () => {
    const err = await db.pool.query("SELECT 1/0").catch((e: unknown) => e);

    expect(isConnectionError(err)).toBe(false);
  });

  it("is false for things that are not errors", () => {
    expect(isConnectionError(undefined)).toBe(false);
    expect(isConnectionError("ECONNREFUSED")).toBe(false);
  });
});
