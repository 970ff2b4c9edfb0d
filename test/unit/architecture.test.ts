/**
 * The layer rules of .dependency-cruiser.mjs (which `npm run lint` also
 * runs): the source keeps to them, and they do catch an upward import.
 */
import { cruise, type ICruiseOptions, type ICruiseResult, type IViolation } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { readFileSync } from "node:fs";
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
  it("src keeps to the layers, apart from the known violations being removed", async () => {
    const knownViolations = JSON.parse(readFileSync(path.join(root, ".dependency-cruiser-known-violations.json"), "utf8"));
    const tsConfigFile = path.join(root, "tsconfig.json");
    const options = { ...(await rules()), baseDir: root, tsConfig: { fileName: tsConfigFile }, knownViolations, validate: true };
    expect(await violations(["src"], options, { tsConfig: extractTSConfig(tsConfigFile) })).toEqual([]);
  });

  it("reports a model module that imports the transport", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "agentbus-layers-"));
    try {
      await mkdir(path.join(dir, "src/model"), { recursive: true });
      await mkdir(path.join(dir, "src/server"), { recursive: true });
      await writeFile(path.join(dir, "src/server/listener.ts"), "export const port = 1;\n");
      await writeFile(path.join(dir, "src/model/ids.ts"), 'import { port } from "../server/listener";\nexport const id = port;\n');
      const { tsConfig: _ts, ...options } = await rules();
      expect(await violations(["src"], { ...options, baseDir: dir, validate: true })).toEqual([
        "model-imports-only-below: src/model/ids.ts → src/server/listener.ts",
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
