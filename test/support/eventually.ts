/**
 * Polls until check() gives a value (anything but undefined or false) and
 * returns it; fails after timeoutMs. For what a real server, process or
 * background worker does on its own schedule: the test cannot drive that
 * time, only look again. Timing rules are tested on a ManualClock instead.
 */
export async function eventually<T>(check: () => Promise<T | undefined | false>, timeoutMs = 15_000, intervalMs = 50): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    // Real time: the condition waits on real I/O (see above).
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
