/** Latency samples (milliseconds) and the percentiles the report needs. */
export class Latencies {
  private samples = new Float64Array(1 << 16);
  private n = 0;

  add(ms: number): void {
    if (this.n === this.samples.length) {
      const bigger = new Float64Array(this.samples.length * 2);
      bigger.set(this.samples);
      this.samples = bigger;
    }
    this.samples[this.n++] = ms;
  }

  get count(): number {
    return this.n;
  }

  /** Nearest-rank percentiles in milliseconds; null without samples. */
  summary(): { count: number; p50_ms: number | null; p90_ms: number | null; p99_ms: number | null; max_ms: number | null } {
    if (this.n === 0) return { count: 0, p50_ms: null, p90_ms: null, p99_ms: null, max_ms: null };
    const sorted = this.samples.slice(0, this.n).sort();
    const at = (p: number) => round(sorted[Math.min(this.n - 1, Math.max(0, Math.ceil((p / 100) * this.n) - 1))] as number);
    return { count: this.n, p50_ms: at(50), p90_ms: at(90), p99_ms: at(99), max_ms: round(sorted[this.n - 1] as number) };
  }
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/**
 * Non-2xx answers that were not expected, by "METHOD route → status code",
 * with one example body each, so a failing run says what failed.
 */
export class ErrorTally {
  readonly byKind = new Map<string, { count: number; example: string }>();
  total = 0;

  add(kind: string, example: string): void {
    this.total++;
    const entry = this.byKind.get(kind);
    if (entry) entry.count++;
    else {
      this.byKind.set(kind, { count: 1, example: example.slice(0, 300) });
      process.stderr.write(`[bench] error: ${kind}: ${example.slice(0, 300)}\n`);
    }
  }

  toJSON(): Record<string, { count: number; example: string }> {
    return Object.fromEntries(this.byKind);
  }
}
