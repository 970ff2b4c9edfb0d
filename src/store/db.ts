/**
 * The database handle the repositories use. Queries run on the transaction
 * of the current async context when there is one, so a caller can make
 * several repository calls atomic without threading a client through them:
 * the idempotency layer wraps a whole handler this way, and a nested
 * transaction becomes a savepoint.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type pg from "pg";
import { withTransaction } from "./pool.js";

interface TransactionScope {
  client: pg.PoolClient;
  afterCommit: Array<() => void>;
  savepoints: number;
}

export class Db {
  private readonly scope = new AsyncLocalStorage<TransactionScope>();

  constructor(readonly pool: pg.Pool) {}

  /**
   * Runs one statement. A `name` makes it a prepared statement, parsed and
   * planned once per connection: worth it for the hot paths, where planning
   * costs as much as executing.
   */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[], name?: string): Promise<pg.QueryResult<R>> {
    return this.execute<R>(name === undefined ? { text, values } : { name, text, values });
  }

  /** Runs one statement given as pg's QueryConfig (its own type parsers, say), on the current transaction if there is one. */
  execute<R extends pg.QueryResultRow = pg.QueryResultRow>(config: pg.QueryConfig): Promise<pg.QueryResult<R>> {
    const current = this.scope.getStore();
    return current ? current.client.query<R>(config) : this.pool.query<R>(config);
  }

  get inTransaction(): boolean {
    return this.scope.getStore() !== undefined;
  }

  /** Runs fn atomically: a transaction, or a savepoint inside the current one. */
  async transaction<T>(fn: () => Promise<T>): Promise<T> {
    const current = this.scope.getStore();
    if (current) {
      const name = `sp_${++current.savepoints}`;
      const hooksBefore = current.afterCommit.length;
      await current.client.query(`SAVEPOINT ${name}`);
      try {
        const result = await fn();
        await current.client.query(`RELEASE SAVEPOINT ${name}`);
        return result;
      } catch (err) {
        await current.client.query(`ROLLBACK TO SAVEPOINT ${name}`);
        // What the rolled-back part wanted announced never happened.
        current.afterCommit.length = hooksBefore;
        throw err;
      }
    }
    const hooks: Array<() => void> = [];
    const result = await withTransaction(this.pool, (client) =>
      this.scope.run({ client, afterCommit: hooks, savepoints: 0 }, fn),
    );
    for (const hook of hooks) hook();
    return result;
  }

  /**
   * What `change` returns, after telling `listener` now and again once the
   * transaction around it commits: a read that ran in between saw the rows
   * as they were, and whatever it remembered must go too.
   */
  async announceChange<T>(change: Promise<T>, listener: () => void): Promise<T> {
    const result = await change;
    listener();
    this.afterCommit(listener);
    return result;
  }

  /**
   * Runs fn once the current transaction has committed (at once outside a
   * transaction): wake-ups and pushes must never announce a rolled-back write.
   */
  afterCommit(fn: () => void): void {
    const current = this.scope.getStore();
    if (current) current.afterCommit.push(fn);
    else fn();
  }
}
