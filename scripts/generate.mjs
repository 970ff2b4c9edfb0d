// Regenerates gen/ from proto/ with no network: the google/api protos come
// from the google-proto-files package, buf and protoc-gen-es from node_modules.
// The Python client's messages (gen/python) come from protoc 3.21 shipped
// inside the `protoc` npm package: the same major as Debian bookworm's
// python3-protobuf runtime (newer protoc emits code that runtime refuses), and
// no system protoc or gRPC plugin needed (clients/python builds its stubs from
// the service descriptors).
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
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

if (command[0] === "generate") {
  const python = join(root, "gen/python");
  rmSync(python, { recursive: true, force: true });
  mkdirSync(python, { recursive: true });
  const protos = readdirSync(join(root, "proto/agentbus/v1"))
    .filter((f) => f.endsWith(".proto"))
    .sort()
    .map((f) => `agentbus/v1/${f}`);
  // google/protobuf is not generated: the Python protobuf runtime has it.
  const google = ["google/api/annotations.proto", "google/api/http.proto", "google/api/httpbody.proto", "google/rpc/status.proto"];
  execFileSync(
    process.execPath,
    [require.resolve("protoc/protoc.cjs"), "-I", join(root, "proto"), "-I", googleProtos, `--python_out=${python}`, ...protos, ...google],
    { cwd: root, stdio: "inherit" },
  );
}
