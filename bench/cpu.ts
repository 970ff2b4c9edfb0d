/**
 * Where the CPU goes during a scenario: this process (the load generator),
 * the service's node process and everything it started (the embedded
 * PostgreSQL: postmaster, backends, walwriter, ...). Linux /proc only; with
 * BENCH_URL or elsewhere only the client's share is known.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

interface ProcStat {
  pid: number;
  ppid: number;
  comm: string;
  /** utime + stime in seconds */
  cpu: number;
  /** stime (kernel) in seconds */
  sys: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    const close = text.lastIndexOf(")");
    const comm = text.slice(text.indexOf("(") + 1, close);
    const fields = text.slice(close + 2).split(" ");
    // fields[0] is state (field 3); utime is field 14, stime field 15.
    const ppid = Number(fields[1]);
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return { pid, ppid, comm, cpu: (utime + stime) / clockTicks(), sys: stime / clockTicks() };
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by the service's node process and by its descendants (PostgreSQL). */
function serverTree(rootPid: number): { node: number; nodeSys: number; postgres: number; postgresSys: number; processes: number } | undefined {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const stats = new Map<number, ProcStat>();
  for (const e of entries) {
    const pid = Number(e);
    if (!Number.isInteger(pid)) continue;
    const s = readStat(pid);
    if (s) stats.set(pid, s);
  }
  const root = stats.get(rootPid);
  if (!root) return undefined;
  const children = new Map<number, number[]>();
  for (const s of stats.values()) {
    const list = children.get(s.ppid);
    if (list) list.push(s.pid);
    else children.set(s.ppid, [s.pid]);
  }
  let postgres = 0;
  let postgresSys = 0;
  let processes = 0;
  const stack = [...(children.get(rootPid) ?? [])];
  while (stack.length > 0) {
    const pid = stack.pop() as number;
    const s = stats.get(pid);
    if (!s) continue;
    postgres += s.cpu;
    postgresSys += s.sys;
    processes++;
    stack.push(...(children.get(pid) ?? []));
  }
  return { node: root.cpu, nodeSys: root.sys, postgres, postgresSys, processes };
}

/** Whole-machine CPU seconds from /proc/stat: busy (everything but idle and iowait), idle, steal. */
function machine(): { busy: number; idle: number; steal: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] as string;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
    const t = clockTicks();
    return { busy: (user + nice + system + irq + softirq) / t, idle: (idle + iowait) / t, steal: steal / t };
  } catch {
    return undefined;
  }
}

/** The service's main thread (its event loop): ns on CPU and ns runnable but waiting for a CPU. */
function schedstat(pid: number): { run: number; wait: number } | undefined {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(" ").map(Number);
    return run === undefined || wait === undefined ? undefined : { run: run / 1e9, wait: wait / 1e9 };
  } catch {
    return undefined;
  }
}

export interface CpuSplit {
  /** Share of one core, in percent, over the window (200 = both cores of a 2-core machine). */
  bench_client_pct: number;
  server_node_pct: number | null;
  postgres_pct: number | null;
  /** The kernel part (system time) of each of the three. */
  bench_client_sys_pct: number;
  server_node_sys_pct: number | null;
  postgres_sys_pct: number | null;
  /**
   * The service's event loop thread: share of the window on a CPU, and
   * runnable but waiting for one (the cores are busy with PostgreSQL and the
   * client). Together near 100 % means the event loop is the bottleneck.
   */
  server_loop_running_pct: number | null;
  server_loop_runqueue_pct: number | null;
  /** All CPU time used on the machine (steal excluded). */
  machine_busy_pct: number | null;
  /** machine_busy − client − service − PostgreSQL: other processes (and the kernel on their behalf); should be near 0 for a clean run. */
  other_pct: number | null;
  /** Time the hypervisor gave our vCPUs to someone else. */
  steal_pct: number | null;
}

/** Starts measuring; the returned function ends the window and reports the split. */
export function cpuWindow(serverPid: number | undefined): () => CpuSplit {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  const s0 = serverPid === undefined ? undefined : serverTree(serverPid);
  const m0 = machine();
  const l0 = serverPid === undefined ? undefined : schedstat(serverPid);
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    const s1 = serverPid === undefined ? undefined : serverTree(serverPid);
    const m1 = machine();
    const l1 = serverPid === undefined ? undefined : schedstat(serverPid);
    const pct = (cpuSeconds: number) => Math.round((cpuSeconds / seconds) * 1000) / 10;
    const client = (c.user + c.system) / 1e6;
    const node = s0 && s1 ? s1.node - s0.node : null;
    // Backends that exit inside the window take their CPU time with them;
    // the service's pool keeps its connections, so this is small.
    const postgres = s0 && s1 ? s1.postgres - s0.postgres : null;
    const busy = m0 && m1 ? m1.busy - m0.busy : null;
    return {
      bench_client_pct: pct(client),
      server_node_pct: node === null ? null : pct(node),
      postgres_pct: postgres === null ? null : pct(postgres),
      bench_client_sys_pct: pct(c.system / 1e6),
      server_node_sys_pct: s0 && s1 ? pct(s1.nodeSys - s0.nodeSys) : null,
      postgres_sys_pct: s0 && s1 ? pct(s1.postgresSys - s0.postgresSys) : null,
      server_loop_running_pct: l0 && l1 ? pct(l1.run - l0.run) : null,
      server_loop_runqueue_pct: l0 && l1 ? pct(l1.wait - l0.wait) : null,
      machine_busy_pct: busy === null ? null : pct(busy),
      other_pct: busy === null || node === null || postgres === null ? null : pct(Math.max(0, busy - client - node - postgres)),
      steal_pct: m0 && m1 ? pct(m1.steal - m0.steal) : null,
    };
  };
}
