// tsc only emits JavaScript; the SQL (numbered migrations, and the function
// and trigger files the migrator applies after them) ships beside the
// compiled store, where migrate.ts looks for it.
import { cpSync, rmSync } from "node:fs";
for (const dir of ["src/store/migrations", "src/store/sql"]) {
  // Replaced, not merged: a file deleted from the source must not linger in
  // dist, where the migrator would still apply it (or, for sql/, keep an
  // object it should drop).
  rmSync(`dist/${dir}`, { recursive: true, force: true });
  cpSync(dir, `dist/${dir}`, { recursive: true });
}
