/**
 * The service compiled once per test run, for the child processes tests
 * start (`agentbus serve`, `worker`, the shell commands): loading src/
 * through tsx costs every child about a second of CPU before it does
 * anything (each module transformed through a loader hook, and tsx loaded
 * again on the schema thread), paid about a hundred times a run on two
 * cores. The tests in the test process itself still import src/ directly.
 *
 * The same transform tsx applies (esbuild, per file, with this tsconfig),
 * laid out as `npm run build` lays out dist/: src/ and gen/ compiled side by
 * side, the SQL beside the compiled store, package.json at the top (the
 * version, "type": "module"), the built console under dist/console. It sits
 * under node_modules/.cache, so the packages resolve as from the checkout.
 * A run compiles into a folder of its own (several runs may share a
 * checkout) and removes it at the end; a killed run's folder is removed by
 * the next run.
 */
import { cp, mkdir, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CACHE = path.join(ROOT, "node_modules/.cache/agentbus-tests");

async function sources(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const entry of await readdir(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await sources(rel)));
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith(".d.ts")) found.push(rel);
  }
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Compiles the service into a folder of this run's own; returns the folder and how to remove it. */
export async function compileService(): Promise<{ dir: string; remove: () => Promise<void> }> {
  await mkdir(CACHE, { recursive: true });
  for (const name of await readdir(CACHE)) {
    const pid = Number(/^run-(\d+)-/.exec(name)?.[1]);
    if (Number.isInteger(pid) && !alive(pid)) await rm(path.join(CACHE, name), { recursive: true, force: true });
  }
  const dir = path.join(CACHE, `run-${process.pid}-${Date.now().toString(36)}`);
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    const entryPoints = [...(await sources("src")), ...(await sources("gen"))];
    await build({
      absWorkingDir: ROOT,
      entryPoints,
      outdir: dir,
      outbase: ".",
      format: "esm",
      platform: "node",
      tsconfig: path.join(ROOT, "tsconfig.json"),
      logLevel: "warning",
    });
    for (const assets of ["src/store/migrations", "src/store/sql"]) await cp(path.join(ROOT, assets), path.join(dir, assets), { recursive: true });
    await writeFile(path.join(dir, "package.json"), await readFile(path.join(ROOT, "package.json")));
    await mkdir(path.join(dir, "dist"));
    await symlink(path.join(ROOT, "dist/console"), path.join(dir, "dist/console"));
  } catch (err) {
    await remove();
    throw err;
  }
  return { dir, remove };
}
