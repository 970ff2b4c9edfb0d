/**
 * The job runner's storage: Agenda's PostgreSQL backend over the app's own
 * connection pool (agenda_jobs is our table, migration 0006).
 *
 * Sharing the pool, safely:
 * - Our pool parses timestamps into integer microseconds (store/pool.ts);
 *   Agenda expects Date objects. Agenda gets a view of the pool whose
 *   queries carry pg's default type parsers, so neither side sees the
 *   other's value shapes.
 * - The view's end() does nothing: stopping the runner must never close the
 *   pool the API still uses. (Agenda only ends pools it created itself; the
 *   view makes that a guarantee rather than a reading of its source.)
 * - Agenda's LISTEN connection is one connection of the pool, held while the
 *   runner runs.
 * - The schema is ours, so the backend starts with ensureSchema: false and
 *   no replica runs DDL at start.
 */
import { PostgresBackend } from "@agendajs/postgres-backend";
import type { JobParameters } from "agenda";
import pg from "pg";
import type { FairScheduling } from "../ports/jobs.js";
import { FAIR_NEXT_JOB_SQL } from "./jobs.js";

/** pg's own parsers (timestamps → Date), for Agenda's queries on our pool. */
const defaultTypes: pg.CustomTypesConfig = { getTypeParser: pg.types.getTypeParser };

/** The pool as Agenda sees it: default value parsing, and an end() that leaves the pool open. */
export function agendaPoolView(pool: pg.Pool): pg.Pool {
  const query = (text: string | pg.QueryConfig, values?: unknown[]) =>
    pool.query(typeof text === "string" ? { text, values, types: defaultTypes } : { ...text, types: defaultTypes });
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === "query") return query;
      if (prop === "end") return () => Promise.resolve();
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * Connects once: the runner awaits it (so a failure is an error it can
 * report), Agenda's own call reuses it. For the fair kinds, Agenda's "find
 * and lock the next job" is FAIR_NEXT_JOB_SQL: the choice between keys is
 * made in the one statement that locks, so it holds across worker processes.
 */
class SharedPoolBackend extends PostgresBackend {
  private connecting: Promise<void> | undefined;

  constructor(pool: pg.Pool, fair: FairScheduling) {
    super({ pool, ensureSchema: false });
    const repository = this.repository;
    const agendaNext = repository.getNextJobToRun.bind(repository);
    // rowToJob is the repository's own row mapping (private in its types only).
    const toJob = (row: unknown) => (repository as unknown as { rowToJob(row: unknown): JobParameters }).rowToJob(row);
    repository.getNextJobToRun = async (name, nextScanAt, lockDeadline, now, options) => {
      if (!fair.names.has(name)) return agendaNext(name, nextScanAt, lockDeadline, now, options);
      const { rows } = await pool.query(FAIR_NEXT_JOB_SQL, [now ?? new Date(), name, nextScanAt, lockDeadline, options?.lastModifiedBy ?? null, fair.maxRunningPerKey]);
      return rows[0] === undefined ? undefined : toJob(rows[0]);
    };
  }

  override connect(): Promise<void> {
    return (this.connecting ??= super.connect());
  }
}

/** The backend the job runner opens, over `pool` (never closed by it). */
export function agendaBackend(pool: pg.Pool): (fair: FairScheduling) => PostgresBackend {
  return (fair) => new SharedPoolBackend(agendaPoolView(pool), fair);
}
