// Regenerates gen/ from proto/ with no network: the google/api protos come
// from the google-proto-files package, buf and protoc-gen-es from node_modules.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const googleProtos = dirname(require.resolve("google-proto-files/package.json"));

const deps = join(root, ".proto-deps");
rmSync(deps, { recursive: true, force: true });
mkdirSync(join(deps, "google/api"), { recursive: true });
for (const file of ["annotations.proto", "http.proto", "httpbody.proto"]) {
  copyFileSync(join(googleProtos, "google/api", file), join(deps, "google/api", file));
}

const bin = join(root, "node_modules/.bin");
const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` };
const args = process.argv.slice(2);
const command = args[0] === "lint" ? ["lint"] : ["generate"];
execFileSync(join(bin, "buf"), command, { cwd: root, env, stdio: "inherit" });
