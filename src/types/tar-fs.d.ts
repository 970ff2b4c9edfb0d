/** The part of tar-fs (which ships no types) that src/pdf/chromium.ts uses. */
declare module "tar-fs" {
  import type { Writable } from "node:stream";
  export function extract(cwd: string, options?: Record<string, unknown>): Writable;
}
