/**
 * The Python client on each end of the protobuf range clients/python/pyproject.toml
 * declares (>=4.21,<8), against the real server.
 *
 * The old end is Debian bookworm's python3-protobuf (4.21.12), which has no
 * message_factory.GetMessageClass. The new end is protobuf 6.x and 7.x, which have
 * no GetPrototype: real wheels, installed by `pip install ./clients/python` in a
 * virtualenv of its own, from a directory of wheels standing in for PyPI
 * ($AGENTBUS_WHEEL_DIR, default /opt/pypi/files; PyPI itself is out of reach here).
 * Where that directory lacks a protobuf 6 or 7 wheel (or grpcio, setuptools), those
 * tests are skipped and say so; the test that strips GetPrototype from Debian's
 * runtime, as protobuf 6.30 removed it, runs everywhere.
 */
import { execFile } from "node:child_process";
import { cpSync, readdirSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useTestServer } from "../support/server.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const pythonDir = join(root, "clients/python");
// Debian's python3-grpcio, python3-protobuf and python3-pip belong to /usr/bin/python3.
const python = process.env.AGENTBUS_PYTHON ?? "/usr/bin/python3";
const wheelDir = process.env.AGENTBUS_WHEEL_DIR ?? "/opt/pypi/files";

const server = useTestServer();
let target: string;

beforeAll(() => {
  target = new URL(server.url).host;
});

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program; resolves with its exit code and output whatever the code. */
async function runProgram(file: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Ran> {
  try {
    // Async, never execFileSync: the server runs in this process.
    const { stdout, stderr } = await run(file, args, { env, cwd, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? String(err) };
  }
}

/** The wheels in the stand-in for PyPI, by file name. */
function wheels(): string[] {
  try {
    return readdirSync(wheelDir).filter((f) => f.endsWith(".whl"));
  } catch {
    return [];
  }
}

/** Why `pip install ./clients/python` cannot get protobuf `major` here, or "" when it can. */
function missingFor(major: number): string {
  const have = wheels();
  const lacks = [
    [`protobuf-${major}.`, `a protobuf ${major}.x wheel`],
    ["grpcio-", "a grpcio wheel"],
    ["setuptools-", "a setuptools wheel (the build backend)"],
  ].filter(([prefix]) => !have.some((f) => f.startsWith(prefix!)));
  if (lacks.length === 0) return "";
  return `${wheelDir} lacks ${lacks.map(([, what]) => what).join(", ")}`;
}

// The error mapping, the same calls test/integration/python-client.test.ts makes on Debian's runtime.
const errorScript = `
import json, sys, uuid
from agentbus_client import AgentbusClient, AgentbusError
from agentbus.v1 import key_service_pb2, message_service_pb2

out = {}
with AgentbusClient(sys.argv[1]) as anonymous:
    try:
        anonymous.keys.GetCurrentKey(key_service_pb2.GetCurrentKeyRequest())
    except AgentbusError as err:
        out["no_key"] = {"code": err.code, "status": err.status.name, "suggestion": err.suggestion}
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    try:
        client.messages.ClaimMessage(message_service_pb2.ClaimMessageRequest(message_id=str(uuid.uuid4())))
    except AgentbusError as err:
        out["claim_unknown"] = {"code": err.code, "status": err.status.name}
print(json.dumps(out))
`;

describe("clients/python on protobuf 4.21, the oldest its range admits (Debian's python3-protobuf)", () => {
  const env: NodeJS.ProcessEnv = { ...process.env, AGENTBUS_PB_DIR: join(root, "gen/python"), PYTHONDONTWRITEBYTECODE: "1" };

  it("builds its stubs through SymbolDatabase.GetPrototype, the runtime having no GetMessageClass, and a call round-trips", async () => {
    const script = `
import json, sys
import google.protobuf
from google.protobuf import message_factory
from agentbus_client import AgentbusClient
from agentbus.v1 import key_service_pb2
with AgentbusClient(sys.argv[1]) as client:
    issued = client.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-4.21"))
    me = client.with_api_key(issued.key).keys.GetCurrentKey(key_service_pb2.GetCurrentKeyRequest())
print(json.dumps({"protobuf": google.protobuf.__version__, "get_message_class": hasattr(message_factory, "GetMessageClass"), "label": me.agent_label}))
`;
    const out = await runProgram(python, ["-W", "error", "-c", script, target], env, pythonDir);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const result = JSON.parse(out.stdout) as { protobuf: string; get_message_class: boolean; label: string };
    expect(result.protobuf).toMatch(/^4\.21\./);
    expect(result.get_message_class).toBe(false);
    expect(result.label).toBe("py-4.21");
  });

  it("with GetPrototype removed from the runtime, as protobuf 6.30 removed it, takes its message classes from message_factory.GetMessageClass", async () => {
    // A stand-in for protobuf 6 and 7 that runs wherever Debian's runtime does: their
    // GetMessageClass (here the old lookup under the new name) and no GetPrototype anywhere.
    const script = `
import json, sys
from google.protobuf import message_factory, symbol_database
lookup = symbol_database.Default().GetPrototype
asked = []
def GetMessageClass(descriptor):
    asked.append(descriptor.full_name)
    return lookup(descriptor)
message_factory.GetMessageClass = GetMessageClass
for cls in (message_factory.MessageFactory, symbol_database.SymbolDatabase):
    if "GetPrototype" in vars(cls):
        delattr(cls, "GetPrototype")
assert not hasattr(symbol_database.Default(), "GetPrototype")

from agentbus_client import AgentbusClient
from agentbus.v1 import key_service_pb2
with AgentbusClient(sys.argv[1]) as client:
    issued = client.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-no-getprototype"))
print(json.dumps({"asked": sorted(set(asked)), "key_id": issued.key_id}))
`;
    const out = await runProgram(python, ["-c", script, target], env, pythonDir);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const result = JSON.parse(out.stdout) as { asked: string[]; key_id: string };
    expect(result.asked).toEqual(["agentbus.v1.CreateKeyRequest", "agentbus.v1.IssuedKey"]);
    expect(result.key_id).toMatch(/^ak_/);
  });
});

// 7.x: what `pip install ./clients/python` picks with nothing pinned (the newest the range admits);
// 6.x: the same install with protobuf pinned below 7.
const newEnd = [
  { major: 7, pins: [] as string[] },
  { major: 6, pins: ["protobuf<7"] },
];

for (const { major, pins } of newEnd) {
  const missing = missingFor(major);
  if (missing) console.warn(`python-protobuf-range: protobuf ${major}.x tests skipped: ${missing}`);

  describe.skipIf(missing !== "")(`clients/python installed with pip on protobuf ${major}.x`, () => {
    let dir: string;
    let venvPython: string;
    let clean: NodeJS.ProcessEnv;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), `agentbus-pb${major}-`));
      // A copy of the checkout's two directories the package is built from (its pyproject
      // reaches ../../gen/python): pip builds in place, so the checkout stays as it is.
      const src = join(dir, "src");
      cpSync(pythonDir, join(src, "clients/python"), {
        recursive: true,
        filter: (from) => !/(^|\/)(build|__pycache__|[^/]*\.egg-info)$/.test(from),
      });
      cpSync(join(root, "gen/python"), join(src, "gen/python"), { recursive: true });
      // The example alone, outside the package: it puts its parent's parent (dir) on sys.path,
      // where there is no agentbus_client, so it runs the installed one.
      cpSync(join(pythonDir, "examples/flow.py"), join(dir, "examples/flow.py"));
      const venv = join(dir, "venv");
      // Nothing from Debian's site-packages: protobuf and grpcio come from the wheels only.
      clean = { PATH: process.env.PATH ?? "", HOME: dir, PYTHONDONTWRITEBYTECODE: "1", PIP_CONFIG_FILE: "/dev/null", PIP_DISABLE_PIP_VERSION_CHECK: "1" };
      const made = await runProgram(python, ["-m", "venv", "--without-pip", venv], clean, dir);
      expect(made, made.stderr).toMatchObject({ code: 0 });
      venvPython = join(venv, "bin", "python");
      const pip = ["-m", "pip", "--python", venvPython, "install", "--no-index", "--find-links", wheelDir, "--quiet", join(src, "clients/python"), ...pins];
      const installed = await runProgram(python, pip, clean, dir);
      expect(installed, installed.stderr).toMatchObject({ code: 0 });
    }, 180_000);

    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it(`pip resolves protobuf ${major}.x, which has no GetPrototype, and the client and its generated modules import without a warning`, async () => {
      const script = `
import json
import google.protobuf, agentbus_client
from google.protobuf import message_factory, symbol_database
from agentbus.v1 import key_service_pb2
print(json.dumps({
    "protobuf": google.protobuf.__version__,
    "get_prototype": hasattr(symbol_database.SymbolDatabase, "GetPrototype"),
    "get_message_class": hasattr(message_factory, "GetMessageClass"),
    "installed": [agentbus_client.__file__, key_service_pb2.__file__, google.protobuf.__file__],
}))
`;
      const out = await runProgram(venvPython, ["-W", "error", "-c", script], clean, dir);
      expect(out, out.stderr).toMatchObject({ code: 0 });
      const result = JSON.parse(out.stdout) as { protobuf: string; get_prototype: boolean; get_message_class: boolean; installed: string[] };
      expect(result.protobuf.startsWith(`${major}.`)).toBe(true);
      expect(result.get_prototype).toBe(false);
      expect(result.get_message_class).toBe(true);
      for (const file of result.installed) expect(file.startsWith(join(dir, "venv"))).toBe(true);
    });

    it("runs the example flow against the server: key, claimable channel, post, list, claim, ack, then call() a worker", async () => {
      const out = await runProgram(venvPython, [join(dir, "examples/flow.py"), "--target", target], clean, dir);
      expect(out, out.stderr).toMatchObject({ code: 0 });
      const steps = out.stdout.trim().split("\n").map((line) => (JSON.parse(line) as { step: string }).step);
      expect(steps).toEqual(["create_key", "create_channel", "post_message", "list_messages", "claim_message", "ack_message", "call"]);
    }, 60_000);

    it("raises AgentbusError with the service's error code, decoded from the status details", async () => {
      const out = await runProgram(venvPython, ["-c", errorScript, target], clean, dir);
      expect(out, out.stderr).toMatchObject({ code: 0 });
      const result = JSON.parse(out.stdout) as { no_key: { code: string; status: string; suggestion: string }; claim_unknown: { code: string; status: string } };
      expect(result.no_key).toMatchObject({ code: "unauthorized", status: "UNAUTHENTICATED" });
      expect(result.no_key.suggestion).toContain("POST /v1/keys");
      expect(result.claim_unknown).toEqual({ code: "message_not_found", status: "NOT_FOUND" });
    });
  });
}
