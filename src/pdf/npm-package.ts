/**
 * Installed npm packages whose files (not modules) the renderer uses: the
 * Chromium archive and the fonts. None of them exports ./package.json, so
 * the folder is found from the main entry upwards.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);

export interface NpmPackage {
  dir: string;
  version: string;
}

export function npmPackage(name: string): NpmPackage {
  let dir = path.dirname(require.resolve(name));
  for (;;) {
    try {
      const manifest = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
      if (manifest.name === name && manifest.version !== undefined) return { dir, version: manifest.version };
    } catch {
      // No manifest here: further up.
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`the folder of the npm package ${name} was not found`);
    dir = parent;
  }
}
