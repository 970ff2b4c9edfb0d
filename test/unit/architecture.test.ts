/**
 * The layer rules of .dependency-cruiser.mjs (which `npm run lint` also
 * runs): the source keeps to them, and they do catch an upward import.
 */
import { cruise, type ICruiseOptions, type ICruiseResult, type IViolation } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));

async function rules(): Promise<ICruiseOptions> {
  return extractDepcruiseOptions(path.join(root, ".dependency-cruiser.mjs"));
}

function describeViolation(v: IViolation): string {
  return `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (${v.cycle.map((c) => c.name).join(" → ")})` : ""}`;
}

async function violations(files: string[], options: ICruiseOptions, transpile = {}): Promise<string[]> {
  const { output } = await cruise(files, options, undefined, transpile);
  return (output as ICruiseResult).summary.violations.filter((v) => v.rule.severity !== "ignore").map(describeViolation);
}

describe("architecture", () => {
  it("src keeps to the layers", async () => {
    const tsConfigFile = path.join(root, "tsconfig.json");
    const options = { ...(await rules()), baseDir: root, tsConfig: { fileName: tsConfigFile }, validate: true };
    expect(await violations(["src"], options, { tsConfig: extractTSConfig(tsConfigFile) })).toEqual([]);
  });

  /** Cruises a two-file tree in which `from` imports `to`. */
  async function violationsOfOneImport(from: string, to: string): Promise<string[]> {
    const dir = await mkdtemp(path.join(tmpdir(), "agentbus-layers-"));
    try {
      for (const file of [from, to]) await mkdir(path.join(dir, path.dirname(file)), { recursive: true });
      await writeFile(path.join(dir, to), "export const value = 1;\n");
      const relative = path.relative(path.dirname(from), to).replace(/\.ts$/, "");
      await writeFile(path.join(dir, from), `import { value } from "./${relative}";\nexport const copy = value;\n`);
      const { tsConfig: _ts, ...options } = await rules();
      return await violations(["src"], { ...options, baseDir: dir, validate: true });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  it("reports a model module that imports the transport", async () => {
    expect(await violationsOfOneImport("src/model/ids.ts", "src/server/listener.ts")).toEqual([
      "model-imports-only-below: src/model/ids.ts → src/server/listener.ts",
    ]);
  });

  it("reports a handler that reaches the store past the ports", async () => {
    expect(await violationsOfOneImport("src/services/key-service.ts", "src/store/keys.ts")).toEqual([
      "handlers-imports-only-below: src/services/key-service.ts → src/store/keys.ts",
    ]);
  });

  it("reports a domain module that imports an adapter", async () => {
    expect(await violationsOfOneImport("src/domain/keys.ts", "src/pdf/renderer.ts")).toEqual([
      "domain-imports-only-below: src/domain/keys.ts → src/pdf/renderer.ts",
    ]);
  });
});
