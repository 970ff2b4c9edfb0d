/**
 * Group commit inside one process. Requests that reach the same statement
 * while an earlier batch of it is in the database wait together and go in
 * as the next batch: one round trip, one plan execution and one commit (one
 * WAL flush) for all of them. Nothing waits on a timer: an idle queue sends
 * a lone request at once, and batches grow only under load, as large as the
 * database's own latency lets them. Measured in the work-queue benchmark
 * (docs/decisions.md#group-commit): commits per task halved, and the Node
 * process's per-request cost of a query shared out over the batch.
 */

/** One request in a queue: its input and how to answer it. */
export interface Waiting<I, O> {
  readonly input: I;
  resolve(output: O): void;
  reject(err: unknown): void;
}

export interface CoalescerOptions<I, O> {
  /** Removes the next batch from the head of a non-empty queue (at least one item). */
  take(queue: Array<Waiting<I, O>>): Array<Waiting<I, O>>;
  /** Runs one statement for the batch: one output per input, in order. */
  run(key: string, inputs: readonly I[]): Promise<O[]>;
  /**
   * Whether a failed batch may be run again item by item, so that only the
   * items the database refuses fail (a bad value in one request must not
   * fail the others'): true only when nothing of the batch was committed.
   */
  retryAlone(err: unknown): boolean;
}

export class Coalescer<I, O> {
  private readonly queues = new Map<string, Array<Waiting<I, O>>>();

  constructor(private readonly options: CoalescerOptions<I, O>) {}

  /** Queues `input` behind `key`'s batch in flight, or sends it now when there is none. */
  submit(key: string, input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      const waiting = { input, resolve, reject };
      const queue = this.queues.get(key);
      if (queue) {
        queue.push(waiting);
        return;
      }
      const fresh = [waiting];
      this.queues.set(key, fresh);
      void this.drain(key, fresh);
    });
  }

  private async drain(key: string, queue: Array<Waiting<I, O>>): Promise<void> {
    while (queue.length > 0) {
      const batch = this.options.take(queue);
      try {
        const outputs = await this.options.run(key, batch.map((w) => w.input));
        batch.forEach((w, i) => w.resolve(outputs[i]!));
      } catch (err) {
        if (batch.length > 1 && this.options.retryAlone(err)) {
          for (const w of batch) await this.options.run(key, [w.input]).then((o) => w.resolve(o[0]!), (e: unknown) => w.reject(e));
        } else {
          for (const w of batch) w.reject(err);
        }
      }
    }
    this.queues.delete(key);
  }
}

/** The first `max` items. */
export function takeUpTo<I, O>(max: number): (queue: Array<Waiting<I, O>>) => Array<Waiting<I, O>> {
  return (queue) => queue.splice(0, max);
}

/**
 * Up to `max` items with distinct `identity`, in queue order; an item whose
 * identity is already in the batch stays queued (with everything after it
 * keeping its place) for a later batch, so that one statement never touches
 * a row twice.
 */
export function takeDistinct<I, O>(max: number, identity: (input: I) => string): (queue: Array<Waiting<I, O>>) => Array<Waiting<I, O>> {
  return (queue) => {
    const seen = new Set<string>();
    const batch: Array<Waiting<I, O>> = [];
    const rest: Array<Waiting<I, O>> = [];
    for (const w of queue) {
      const id = identity(w.input);
      if (batch.length < max && !seen.has(id)) {
        seen.add(id);
        batch.push(w);
      } else {
        rest.push(w);
      }
    }
    queue.splice(0, queue.length, ...rest);
    return batch;
  };
}
