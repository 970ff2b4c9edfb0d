// tsc only emits JavaScript; the SQL migrations ship beside the compiled store.
import { cpSync } from "node:fs";
cpSync("src/store/migrations", "dist/src/store/migrations", { recursive: true });
