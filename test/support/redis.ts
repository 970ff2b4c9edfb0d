/**
 * A throwaway Redis server on a free loopback port for tests that need one
 * (CI installs Debian's redis-server). It keeps nothing on disk and is
 * killed when the test file is done.
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { freePort } from "../../src/platform/free-port.js";

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  /** Kills the server (to test outages); `start` brings it back on the same port. */
  kill(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server process (SIGSTOP): it keeps its connections and its port but answers nothing, until `thaw`. */
  freeze(): void;
  thaw(): void;
}

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (ok) return;
    // Real time: polls a real Redis port.
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`redis-server did not listen on ${port} within ${timeoutMs} ms`);
}

export async function startTestRedis(): Promise<TestRedis> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
    });
    await waitForPort(port, 5_000);
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill("SIGKILL");
    await exited;
  };
  await start();
  const signal = (sig: NodeJS.Signals) => {
    if (child && child.exitCode === null) child.kill(sig);
  };
  const stop = async () => {
    // A frozen server cannot act on SIGKILL's cleanup before it is thawed; SIGKILL needs no cooperation anyway.
    signal("SIGCONT");
    await kill();
  };
  return { url: `redis://127.0.0.1:${port}`, port, stop, kill, start, freeze: () => signal("SIGSTOP"), thaw: () => signal("SIGCONT") };
}
