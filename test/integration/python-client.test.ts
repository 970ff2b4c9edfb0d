/**
 * The Python client (clients/python) with the messages committed in gen/python,
 * run with Debian's python3-grpcio and python3-protobuf against the real
 * server over plaintext gRPC on the same port.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { mintKey, rest, useTestServer } from "../support/server.js";

const run = promisify(execFile);
const root = join(import.meta.dirname, "../..");
const pythonDir = join(root, "clients/python");
// Debian's python3-grpcio and python3-protobuf belong to /usr/bin/python3, not to whatever python3 is first on PATH.
const python = process.env.AGENTBUS_PYTHON ?? "/usr/bin/python3";

const server = useTestServer();
let target: string;
// The committed gen/python, not a copy: that is what a Python user gets. No .pyc files in the tree.
const env: NodeJS.ProcessEnv = { ...process.env, AGENTBUS_PB_DIR: join(root, "gen/python"), PYTHONDONTWRITEBYTECODE: "1" };

beforeAll(async () => {
  target = new URL(server.url).host;
});

/** Runs a Python program; resolves with its exit code and output whatever the code. */
async function runPython(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    // Async, never execFileSync: the server runs in this process.
    const { stdout, stderr } = await run(python, args, { env, cwd: pythonDir });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : -1, stdout: e.stdout ?? "", stderr: e.stderr ?? String(err) };
  }
}

interface Step {
  step: string;
  result: Record<string, unknown>;
}

describe("clients/python", () => {
  it("runs the example flow: key, claimable channel, post, list, claim, ack", async () => {
    const out = await runPython([join(pythonDir, "examples/flow.py"), "--target", target]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const steps = out.stdout.trim().split("\n").map((line) => JSON.parse(line) as Step);
    expect(steps.map((s) => s.step)).toEqual(["create_key", "create_channel", "post_message", "list_messages", "claim_message", "ack_message"]);
    const [key, channel, posted, , claimed, acked] = steps.map((s) => s.result);
    expect(key).toMatchObject({ key: "<redacted>", key_id: expect.stringMatching(/^ak_/) });
    expect(channel).toMatchObject({ mode: "CHANNEL_MODE_CLAIMABLE" });
    const messageId = (posted?.message as { id: string }).id;
    expect(claimed).toMatchObject({ status: "CLAIM_STATUS_CLAIMED", message: { id: messageId } });
    expect(acked).toMatchObject({ status: "ACK_STATUS_ACKNOWLEDGED", message: { id: messageId } });

    // What the service stored, read back over REST by another agent.
    const reader = await mintKey(server.url);
    const page = await rest<{ data: Array<{ id: string; claimed_by_key_id?: string; acknowledged_by: unknown[] }> }>(
      server.url,
      "GET",
      `/v1/channels/${String(channel?.id)}/messages?since=0`,
      { key: reader },
    );
    expect(page.status).toBe(200);
    const stored = page.body.data.find((m) => m.id === messageId);
    expect(stored?.claimed_by_key_id).toBe(key?.key_id);
    expect(stored?.acknowledged_by).toHaveLength(1);
  });

  it("surfaces the service's error code and reuses the idempotency key it is given", async () => {
    const script = `
import json, uuid
from agentbus_client import AgentbusClient, AgentbusError
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    try:
        anonymous.keys.GetCurrentKey(key_service_pb2.GetCurrentKeyRequest())
    except AgentbusError as err:
        out["no_key"] = {"code": err.code, "status": err.status.name, "suggestion": err.suggestion}
    issued = anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8]))
    client = anonymous.with_api_key(issued.key)
    try:
        client.messages.ClaimMessage(message_service_pb2.ClaimMessageRequest(message_id=str(uuid.uuid4())))
    except AgentbusError as err:
        out["claim_unknown"] = {"code": err.code, "status": err.status.name, "message": err.message}
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    post = lambda **kw: client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="x"), **kw).message.id
    out["same_key"] = [post(idempotency_key="k1"), post(idempotency_key="k1")]
    out["fresh_keys"] = [post(), post()]
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const result = JSON.parse(out.stdout) as {
      no_key: { code: string; status: string; suggestion: string };
      claim_unknown: { code: string; status: string; message: string };
      same_key: [string, string];
      fresh_keys: [string, string];
    };
    expect(result.no_key).toMatchObject({ code: "unauthorized", status: "UNAUTHENTICATED" });
    expect(result.no_key.suggestion).toContain("POST /v1/keys");
    expect(result.claim_unknown).toMatchObject({ code: "message_not_found", status: "NOT_FOUND" });
    expect(result.same_key[0]).toBe(result.same_key[1]);
    expect(result.fresh_keys[0]).not.toBe(result.fresh_keys[1]);
  });
});
