/**
 * scripts/test-prerequisites.mjs (npm test's pretest): what it finds missing
 * and what it then does, decided from probes and the machine's facts; apt-get
 * itself never runs here.
 */
import { describe, expect, it } from "vitest";
import { findMissing, plan, REQUIREMENTS, type Probes } from "../../scripts/test-prerequisites.mjs";

/** Probes that see only the given commands and Python modules. */
function machineWith(commands: string[], pythonModules: string[] = []): Probes {
  return {
    hasCommand: (name) => commands.includes(name),
    pythonHas: (modules) => modules.every((m) => pythonModules.includes(m)),
  };
}

const commands = ["redis-server", "pdfinfo", "pdftotext", "curl", "jq"];
const PYTHON = ["grpc", "google.protobuf", "pip", "setuptools"];
const everything = machineWith(commands, PYTHON);
const bare = machineWith([]);
const root = { isRoot: true, canSudo: false, hasAptGet: true };

describe("test prerequisites", () => {
  it("needs nothing when every command and Python module is there", () => {
    expect(findMissing(REQUIREMENTS, everything)).toEqual([]);
    expect(plan([], root)).toEqual({ kind: "ready" });
  });

  it("on a bare Debian machine as root installs every package the tests use, once each, without sudo", () => {
    expect(plan(findMissing(REQUIREMENTS, bare), root)).toEqual({
      kind: "install",
      sudo: false,
      packages: ["redis-server", "poppler-utils", "curl", "jq", "python3-grpcio", "python3-protobuf", "python3-pip", "python3-setuptools"],
    });
  });

  it("installs only the package of what is missing", () => {
    const noPdftotext = machineWith(commands.filter((c) => c !== "pdftotext"), PYTHON);
    expect(plan(findMissing(REQUIREMENTS, noPdftotext), root)).toMatchObject({ packages: ["poppler-utils"] });
    const noProtobuf = machineWith(commands, ["grpc", "pip", "setuptools"]);
    expect(plan(findMissing(REQUIREMENTS, noProtobuf), root)).toMatchObject({ packages: ["python3-grpcio", "python3-protobuf"] });
  });

  it("asks for no system protoc, gRPC plugin, Chromium or fonts", () => {
    const packages = REQUIREMENTS.flatMap((r) => r.packages);
    expect(packages.filter((p) => /protobuf-compiler|chromium|fonts-/.test(p))).toEqual([]);
  });

  it("goes through sudo -n when not root and sudo needs no password", () => {
    expect(plan(findMissing(REQUIREMENTS, bare), { isRoot: false, canSudo: true, hasAptGet: true })).toMatchObject({ kind: "install", sudo: true });
  });

  it("stops without root or sudo, naming each missing thing and the one command that installs them", () => {
    const missing = findMissing(REQUIREMENTS, machineWith(commands.filter((c) => c !== "redis-server"), PYTHON));
    const decision = plan(missing, { isRoot: false, canSudo: false, hasAptGet: true });
    expect(decision.kind).toBe("stop");
    const message = decision.kind === "stop" ? decision.message : "";
    expect(message).toContain("redis-server (the Redis wake-bus tests start their own server)");
    expect(message).not.toContain("pdfinfo");
    expect(message).toContain("\n  sudo apt-get install -y --no-install-recommends redis-server\n");
    expect(message).toContain("npx vitest run <files>");
  });

  it("stops where there is no apt-get even as root, with the Debian command as a hint", () => {
    const decision = plan(findMissing(REQUIREMENTS, bare), { isRoot: true, canSudo: false, hasAptGet: false });
    expect(decision).toMatchObject({ kind: "stop" });
    const message = decision.kind === "stop" ? decision.message : "";
    expect(message).toContain("your system's package manager");
    expect(message).toContain("apt-get install -y --no-install-recommends redis-server poppler-utils curl jq python3-grpcio python3-protobuf python3-pip python3-setuptools");
  });
});
