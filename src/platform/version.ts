/**
 * The service's version, from package.json: the one place it is written.
 * This file runs from src/platform/ (tsx, tests) and from dist/src/platform/
 * (npm start), so package.json is two or three folders up.
 */
import { readFileSync } from "node:fs";

function readVersion(): string {
  for (const relative of ["../../package.json", "../../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), "utf8")) as { name?: unknown; version?: unknown };
      if (pkg.name === "agentbus" && typeof pkg.version === "string") return pkg.version;
    } catch {
      // Not there (or not ours): try the next place.
    }
  }
  return "unknown";
}

export const SERVICE_VERSION = readVersion();
