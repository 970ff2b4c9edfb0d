// Runs before `npm test` (the pretest script): makes sure the system programs
// the tests use are there, and installs the missing ones with apt-get when it
// can (as root, or through `sudo -n`), so the README's one test command works
// on a fresh Debian machine. Silent and spawn-free when everything is present
// (on Debian); `npx vitest run` skips it.
import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";

/** What the tests need from the system, and the Debian packages that bring it. */
export const REQUIREMENTS = [
  {
    need: "redis-server",
    why: "the Redis wake-bus tests start their own server",
    probe: { commands: ["redis-server"] },
    packages: ["redis-server"],
  },
  {
    need: "pdfinfo and pdftotext",
    why: "the PDF tests read the rendered files back",
    probe: { commands: ["pdfinfo", "pdftotext"] },
    packages: ["poppler-utils"],
  },
  {
    need: "curl and jq",
    why: "the README walk-through test runs the walk-through as written",
    probe: { commands: ["curl", "jq"] },
    packages: ["curl", "jq"],
  },
  {
    need: "Python 3 with grpcio and protobuf",
    why: "the Python client test runs clients/python",
    probe: { python: ["grpc", "google.protobuf"] },
    packages: ["python3-grpcio", "python3-protobuf"],
  },
  {
    need: "pip and setuptools for Python 3",
    why: "the Python client test installs clients/python with pip, as its users do",
    probe: { python: ["pip", "setuptools"] },
    packages: ["python3-pip", "python3-setuptools"],
  },
];

/** The requirements the probes find missing. */
export function findMissing(requirements, probes) {
  return requirements.filter(({ probe }) => {
    if (probe.commands && !probe.commands.every((c) => probes.hasCommand(c))) return true;
    if (probe.python && !probes.pythonHas(probe.python)) return true;
    return false;
  });
}

/**
 * What to do about the missing requirements: nothing, install them with
 * apt-get (directly as root, else through `sudo -n`), or stop with a message
 * that names each one and the command that installs them all.
 */
export function plan(missing, { isRoot, canSudo, hasAptGet }) {
  if (missing.length === 0) return { kind: "ready" };
  const packages = [...new Set(missing.flatMap((r) => r.packages))];
  if (hasAptGet && (isRoot || canSudo)) return { kind: "install", sudo: !isRoot, packages };
  const install = `apt-get install -y --no-install-recommends ${packages.join(" ")}`;
  const lines = [
    "npm test needs programs this machine does not have:",
    ...missing.map((r) => `  - ${r.need} (${r.why}): Debian package ${r.packages.join(", ")}`),
    hasAptGet
      ? `Install them (needs root), then run npm test again:\n  sudo ${install}`
      : `Install them with your system's package manager, then run npm test again (on Debian or Ubuntu:\n  sudo ${install})`,
    "To run single test files without this check: npx vitest run <files>",
  ];
  return { kind: "stop", message: lines.join("\n") };
}

function hasCommand(name) {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (!dir) continue;
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {
      // not in this directory
    }
  }
  return false;
}

// The interpreter the Python client test runs (Debian's packages belong to /usr/bin/python3).
const python = process.env.AGENTBUS_PYTHON ?? "/usr/bin/python3";

function pythonHas(modules) {
  try {
    accessSync(python, constants.X_OK);
  } catch {
    return false;
  }
  // Where Debian's python3-* packages put them: found without starting Python.
  const debian = "/usr/lib/python3/dist-packages";
  if (python === "/usr/bin/python3" && modules.every((m) => exists(join(debian, ...m.split("."), "__init__.py")))) return true;
  // find_spec, not import: importing grpc alone costs half a second.
  const code = `import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ${JSON.stringify(modules)}) else 1)`;
  return spawnSync(python, ["-c", code], { stdio: "ignore" }).status === 0;
}

function exists(path) {
  try {
    accessSync(path);
    return true;
  } catch {
    return false;
  }
}

const say = (line) => console.log(`[npm test] ${line}`);

function run(argv) {
  say(argv.join(" "));
  const r = spawnSync(argv[0], argv.slice(1), { stdio: "inherit", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (r.status !== 0) throw new Error(`${argv.join(" ")} failed (${r.error?.message ?? `exit ${r.status}`})`);
}

function main() {
  const probes = { hasCommand, pythonHas };
  const missing = findMissing(REQUIREMENTS, probes);
  if (missing.length === 0) return 0;
  const isRoot = process.getuid?.() === 0;
  const hasAptGet = hasCommand("apt-get");
  const canSudo = !isRoot && hasAptGet && hasCommand("sudo") && spawnSync("sudo", ["-n", "true"], { stdio: "ignore" }).status === 0;
  const decision = plan(missing, { isRoot, canSudo, hasAptGet });
  if (decision.kind === "stop") {
    console.error(decision.message);
    return 1;
  }
  const prefix = decision.sudo ? ["sudo", "-n"] : [];
  say(`installing what the tests need: ${missing.map((r) => r.need).join("; ")} (Debian packages ${decision.packages.join(" ")}${decision.sudo ? ", through sudo" : ""})`);
  try {
    run([...prefix, "apt-get", "update", "-qq"]);
    run([...prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", ...decision.packages]);
  } catch (err) {
    console.error(`${err.message}\n${plan(missing, { isRoot: false, canSudo: false, hasAptGet }).message}`);
    return 1;
  }
  const still = findMissing(REQUIREMENTS, probes);
  if (still.length > 0) {
    console.error(`still missing after apt-get install: ${still.map((r) => r.need).join("; ")}`);
    return 1;
  }
  say("test prerequisites installed");
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main();
