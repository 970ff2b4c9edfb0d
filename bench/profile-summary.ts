/**
 * npx tsx bench/profile-summary.ts <file.cpuprofile> [top]
 *
 * Summarises a V8 CPU profile (node --cpu-prof, e.g. from
 * BENCH_SERVER_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=/tmp/prof"): self time
 * by function and by package/source area, and inclusive time of the service's
 * own functions, so one can see where a request's time goes.
 */
import { readFileSync } from "node:fs";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Node {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const file = process.argv[2];
const top = Number(process.argv[3] ?? 30);
if (!file) {
  process.stderr.write("usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [top]\n");
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const selfUs = new Map<number, number>();
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i] as number;
  selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
}
const totalUs = [...selfUs.values()].reduce((a, b) => a + b, 0);

function area(url: string, name: string): string {
  if (name === "(idle)") return "(idle)";
  if (name === "(garbage collector)") return "(gc)";
  if (name === "(program)") return "(program: native/VM)";
  if (!url) return `(native) ${name}`;
  const nm = url.lastIndexOf("node_modules/");
  if (nm !== -1) {
    const rest = url.slice(nm + 13).split("/");
    return `pkg ${rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]}`;
  }
  if (url.startsWith("node:")) return `node ${url.slice(5).split("/")[0]}`;
  const m = /\/(src|gen)\/(.*)$/.exec(url);
  if (m) return `${m[1]}/${m[2]}`;
  return url;
}

const label = (n: Node) => `${n.callFrame.functionName || "(anonymous)"} ${area(n.callFrame.url, n.callFrame.functionName)}:${n.callFrame.lineNumber + 1}`;

const selfByFn = new Map<string, number>();
const selfByArea = new Map<string, number>();
const inclusiveByFn = new Map<string, number>();
for (const [id, us] of selfUs) {
  const n = byId.get(id) as Node;
  selfByFn.set(label(n), (selfByFn.get(label(n)) ?? 0) + us);
  const a = area(n.callFrame.url, n.callFrame.functionName);
  selfByArea.set(a, (selfByArea.get(a) ?? 0) + us);
  // inclusive: each distinct frame on the stack once
  const seen = new Set<string>();
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const l = label(byId.get(cur) as Node);
    if (seen.has(l)) continue;
    seen.add(l);
    inclusiveByFn.set(l, (inclusiveByFn.get(l) ?? 0) + us);
  }
}

const idle = selfByArea.get("(idle)") ?? 0;
const busy = totalUs - idle;
const pct = (us: number) => `${((us / busy) * 100).toFixed(1).padStart(5)}%`;
const print = (title: string, m: Map<string, number>, filter: (k: string) => boolean = () => true) => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, us] of [...m].filter(([k]) => filter(k)).sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${pct(us)}  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}\n`);
  }
};
process.stdout.write(
  `profile ${file}: ${(totalUs / 1e6).toFixed(1)} s sampled, busy ${(busy / 1e6).toFixed(1)} s (${((busy / totalUs) * 100).toFixed(0)}%); percentages are of busy time\n`,
);
print("self time by area", selfByArea, (k) => k !== "(idle)");
print("self time by function", selfByFn, (k) => !k.startsWith("(idle)"));
print("inclusive time, service code (src/)", inclusiveByFn, (k) => k.includes(" src/"));
