// npm links the bins of dependencies, not the project's own: `npm install`
// (prepare) links bin/agentbus.mjs into node_modules/.bin so that
// `npx agentbus …` runs this checkout's CLI.
import { chmodSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";

const bin = path.join("node_modules", ".bin");
mkdirSync(bin, { recursive: true });
const link = path.join(bin, "agentbus");
rmSync(link, { force: true });
symlinkSync(path.relative(bin, path.join("bin", "agentbus.mjs")), link);
chmodSync(path.join("bin", "agentbus.mjs"), 0o755);
