/**
 * The Python client (clients/python) with the messages committed in gen/python,
 * run with Debian's python3-grpcio and python3-protobuf against the real
 * server over plaintext gRPC on the same port.
 */
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
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
  it("runs the example flow: key, claimable channel, post, list, claim, ack, then call() a worker", async () => {
    const out = await runPython([join(pythonDir, "examples/flow.py"), "--target", target]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const steps = out.stdout.trim().split("\n").map((line) => JSON.parse(line) as Step);
    expect(steps.map((s) => s.step)).toEqual(["create_key", "create_channel", "post_message", "list_messages", "claim_message", "ack_message", "call"]);
    const [key, channel, posted, , claimed, acked, called] = steps.map((s) => s.result);
    expect(called).toMatchObject({ result: '{"resized":"resize image 43"}', message: { content: "resize image 43", delivery_count: 1 } });
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
    from agentbus.v1 import compat_service_pb2
    task = client.compat.PostTask(compat_service_pb2.PostTaskRequest(channel="py-migrated", content="t"))
    claimed = client.compat.ClaimTask(compat_service_pb2.ClaimTaskRequest(channel="py-migrated"))
    out["compat"] = [task.message.id, claimed.claimed.id, client.compat.ClaimTask(compat_service_pb2.ClaimTaskRequest(channel="py-migrated")).note]
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const result = JSON.parse(out.stdout) as {
      no_key: { code: string; status: string; suggestion: string };
      claim_unknown: { code: string; status: string; message: string };
      same_key: [string, string];
      fresh_keys: [string, string];
      compat: [string, string, string];
    };
    expect(result.no_key).toMatchObject({ code: "unauthorized", status: "UNAUTHENTICATED" });
    expect(result.no_key.suggestion).toContain("POST /v1/keys");
    expect(result.claim_unknown).toMatchObject({ code: "message_not_found", status: "NOT_FOUND" });
    expect(result.same_key[0]).toBe(result.same_key[1]);
    expect(result.fresh_keys[0]).not.toBe(result.fresh_keys[1]);
    // The reference's verbs, for code migrating from Backchannel.
    expect(result.compat[0]).toBe(result.compat[1]);
    expect(result.compat[2]).toBe("no unclaimed messages available");
  });
  it("run_worker acks each message once with the handler's result, retries a failure as delivery 2, and call() gets a result", async () => {
    const script = `
import json, threading, uuid
from agentbus_client import AgentbusClient, CallTimeoutError, call, run_worker
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    mint = lambda: anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    producer, worker_client = mint(), mint()
    channel = producer.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-work-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    producer.messages.BatchCreateMessages(message_service_pb2.BatchCreateMessagesRequest(
        identifier=channel.id, messages=[message_service_pb2.MessageDraft(content=f"task {i}") for i in range(6)] + [message_service_pb2.MessageDraft(content="flaky")]))
    stop = threading.Event()
    lock = threading.Lock()
    seen = []

    def handle(message, context):
        with lock:
            seen.append([message.content, context.delivery_count])
        if message.content == "flaky" and context.delivery_count == 1:
            raise RuntimeError("first try fails")
        if message.content == "ask":
            return {"answer": 42}
        return "done " + message.content

    errors = []
    stats = {}
    thread = threading.Thread(target=lambda: stats.update(run_worker(
        worker_client, channel.id, handle, batch_size=3, lease_seconds=30, wait=1, stop=stop, on_error=lambda err, _m: errors.append(str(err)))))
    thread.start()
    answer = call(producer, channel.id, "ask", timeout=20)
    out["call"] = {"result": answer.result, "acked": len(answer.message.acknowledged_by)}
    try:
        call(producer, channel.id + "-none", "x", timeout=1)
    except Exception as err:
        out["call_unknown_channel"] = getattr(err, "code", type(err).__name__)
    idle = producer.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-idle-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    try:
        call(producer, idle.id, "nobody", timeout=1)
    except CallTimeoutError as err:
        out["timeout"] = {"message_id": bool(err.message_id), "timeout": err.timeout}
    # Every posted message acknowledged: stop the worker.
    import time
    for _ in range(200):
        page = producer.messages.ListMessages(message_service_pb2.ListMessagesRequest(identifier=channel.id, since="0", limit=100))
        if all(len(m.acknowledged_by) > 0 for m in page.data):
            break
        time.sleep(0.05)
    stop.set()
    thread.join()
    out["stats"] = stats
    out["errors"] = errors
    out["seen"] = sorted(seen)
    out["stored"] = sorted([m.content, len(m.acknowledged_by), m.delivery_count, m.result] for m in page.data)
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    const result = JSON.parse(out.stdout) as Record<string, unknown>;
    expect(result.call).toEqual({ result: '{"answer":42}', acked: 1 });
    expect(result.call_unknown_channel).toBe("channel_not_found");
    expect(result.timeout).toEqual({ message_id: true, timeout: 1 });
    expect(result.stats).toEqual({ acked: 8, failed: 1 });
    expect(result.errors).toEqual(["first try fails"]);
    const tasks = Array.from({ length: 6 }, (_, i) => `task ${i}`);
    expect(result.seen).toEqual([["ask", 1], ["flaky", 1], ["flaky", 2], ...tasks.map((t) => [t, 1])]);
    expect(result.stored).toEqual([["ask", 1, 1, '{"answer":42}'], ["flaky", 1, 2, "done flaky"], ...tasks.map((t) => [t, 1, 1, `done ${t}`])]);
  });

  it("manages shared limits (client.limits), creates a channel with group settings, and call() posts with a group, a priority and an expiry", async () => {
    const script = `
import json, threading, uuid
from google.protobuf import field_mask_pb2
from agentbus_client import AgentbusClient, AgentbusError, call, run_worker
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, limit_pb2, limit_service_pb2, message_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    created = client.limits.CreateLimit(limit_service_pb2.CreateLimitRequest(name="model", max_in_flight=5, rate=limit_pb2.LimitRate(count=100, per_seconds=60)))
    out["created"] = [created.name, created.max_in_flight, created.rate.count, created.rate.per_seconds, created.in_flight]
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(
        name="py-groups-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE, group_concurrency=1,
        dispatch=channel_pb2.CHANNEL_DISPATCH_FAIR, priority_aging_seconds=30, limits=["model"]))
    out["channel"] = [channel.group_concurrency, channel_pb2.ChannelDispatch.Name(channel.dispatch), channel.priority_aging_seconds, list(channel.limits)]
    stop = threading.Event()
    handle = lambda message, _context: "%s/%d/%d" % (message.group_key, message.priority, message.expires_at.ToSeconds() - message.created_at.ToSeconds())
    thread = threading.Thread(target=run_worker, args=(client, channel.id, handle), kwargs={"wait": 1, "stop": stop})
    thread.start()
    out["call"] = call(client, channel.id, "summarise", timeout=20, group_key="conversation-7", priority=1, ttl_seconds=600).result
    stop.set()
    thread.join()
    out["used"] = client.limits.GetLimit(limit_service_pb2.GetLimitRequest(name="model")).used_in_window
    updated = client.limits.UpdateLimit(limit_service_pb2.UpdateLimitRequest(
        name="model", update=limit_service_pb2.LimitUpdate(max_in_flight=10), update_mask=field_mask_pb2.FieldMask(paths=["max_in_flight"])))
    out["updated"] = updated.max_in_flight
    out["listed"] = [l.name for l in client.limits.ListLimits(limit_service_pb2.ListLimitsRequest()).data]
    client.limits.DeleteLimit(limit_service_pb2.DeleteLimitRequest(name="model"))
    try:
        client.limits.GetLimit(limit_service_pb2.GetLimitRequest(name="model"))
    except AgentbusError as err:
        out["deleted"] = err.code
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(out.stdout)).toEqual({
      created: ["model", 5, 100, 60, 0],
      channel: [1, "CHANNEL_DISPATCH_FAIR", 30, ["model"]],
      call: "conversation-7/1/600",
      used: 1,
      updated: 10,
      listed: ["model"],
      deleted: "limit_not_found",
    });
  });

  it("shows a message's state and the stats of every state, and cancels a message", async () => {
    const script = `
import json, uuid
from agentbus_client import AgentbusClient
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_pb2, message_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-states-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    posted = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="task")).message
    received = client.messages.ReceiveMessages(message_service_pb2.ReceiveMessagesRequest(identifier=channel.id, max_messages=1)).data[0].message
    out["states"] = [message_pb2.MessageState.Name(posted.state), message_pb2.MessageState.Name(received.state)]
    stats = client.messages.GetChannelStats(message_service_pb2.GetChannelStatsRequest(identifier=channel.id))
    out["stats"] = [stats.ready, stats.delayed, stats.blocked, stats.waiting, stats.in_flight, stats.acknowledged, stats.dead_lettered, stats.cancelled, stats.expired]
    later = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="later")).message
    cancelled = client.messages.CancelMessage(message_service_pb2.CancelMessageRequest(message_id=later.id, reason="not needed")).message
    out["cancelled"] = [message_pb2.MessageState.Name(cancelled.state), cancelled.cancel_requested, cancelled.cancel_reason]
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(out.stdout)).toEqual({
      states: ["MESSAGE_STATE_READY", "MESSAGE_STATE_IN_FLIGHT"],
      stats: [0, 0, 0, 0, 1, 0, 0, 0, 0],
      cancelled: ["MESSAGE_STATE_CANCELLED", true, "not needed"],
    });
  });

  it("reports progress on a held task and posts a task that waits for it, handed out with its result", async () => {
    const script = `
import json, uuid
from agentbus_client import AgentbusClient
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_pb2, message_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-deps-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    parent = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="fetch")).message
    child = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="plot", depends_on=[parent.id])).message
    out["child"] = [message_pb2.MessageState.Name(child.state), list(child.depends_on)== [parent.id]]
    lease = client.messages.ReceiveMessages(message_service_pb2.ReceiveMessagesRequest(identifier=channel.id, max_messages=5)).data
    out["received"] = [l.message.id == parent.id for l in lease]
    reported = client.messages.ReportProgress(message_service_pb2.ReportProgressRequest(message_id=parent.id, lease_token=lease[0].lease_token, text="half")).message
    out["progress"] = reported.progress.text
    client.messages.AckMessage(message_service_pb2.AckMessageRequest(message_id=parent.id, result="data.csv"))
    got = client.messages.ReceiveMessages(message_service_pb2.ReceiveMessagesRequest(identifier=channel.id, max_messages=5)).data
    out["dependent"] = [[g.message.id == child.id, [p.result for p in g.parents]] for g in got]
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(out.stdout)).toEqual({
      child: ["MESSAGE_STATE_BLOCKED", true],
      received: [true],
      progress: "half",
      dependent: [[true, ["data.csv"]]],
    });
  });

  it("creates a waitpoint, parks a task on it, and completes it with the token and no key", async () => {
    const script = `
import json, uuid
from agentbus_client import AgentbusClient, AgentbusError
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_pb2, message_service_pb2, waitpoint_pb2, waitpoint_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-wp-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    posted = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="task")).message
    client.messages.ReceiveMessages(message_service_pb2.ReceiveMessagesRequest(identifier=channel.id, max_messages=1))
    wp = client.waitpoints.CreateWaitpoint(waitpoint_service_pb2.CreateWaitpointRequest(timeout_seconds=600))
    released = client.messages.ReleaseMessage(message_service_pb2.ReleaseMessageRequest(message_id=posted.id, until_waitpoint=wp.id)).message
    out["released"] = message_pb2.MessageState.Name(released.state)
    done = anonymous.waitpoints.CompleteWaitpoint(waitpoint_service_pb2.CompleteWaitpointRequest(token=wp.token))
    out["completed"] = waitpoint_pb2.WaitpointState.Name(done.state)
    back = client.messages.ReceiveMessages(message_service_pb2.ReceiveMessagesRequest(identifier=channel.id, max_messages=1)).data[0].message
    out["back"] = [back.id == posted.id, back.waitpoint.id == wp.id, back.waitpoint.timed_out]
    try:
        anonymous.waitpoints.CompleteWaitpoint(waitpoint_service_pb2.CompleteWaitpointRequest(token=wp.token))
    except AgentbusError as err:
        out["again"] = err.code
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(out.stdout)).toEqual({
      released: "MESSAGE_STATE_WAITING",
      completed: "WAITPOINT_STATE_COMPLETED",
      back: [true, true, false],
      again: "waitpoint_already_completed",
    });
  });

  it("creates a schedule and reads its next tick", async () => {
    const script = `
import json, uuid
from agentbus_client import AgentbusClient, AgentbusError
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, schedule_pb2, schedule_service_pb2

out = {}
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-" + uuid.uuid4().hex[:8])).key)
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-sched-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    s = client.schedules.CreateSchedule(schedule_service_pb2.CreateScheduleRequest(channel=channel.id, cron="0 0 * * *", message=schedule_pb2.ScheduledMessage(content="nightly")))
    out["created"] = [s.timezone, s.paused, s.next_run_at.ToDatetime().hour]
    try:
        client.schedules.CreateSchedule(schedule_service_pb2.CreateScheduleRequest(channel=channel.id, cron="0 0 * * *", timezone="Nowhere/Atlantis", message=schedule_pb2.ScheduledMessage(content="x")))
    except AgentbusError as err:
        out["bad_zone"] = err.code
print(json.dumps(out))
`;
    const out = await runPython(["-c", script]);
    expect(out, out.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(out.stdout)).toEqual({ created: ["UTC", false, 0], bad_zone: "invalid_timezone" });
  });

  it("sends the active OpenTelemetry context with a call, and nothing without the package", async () => {
    // Debian has no python3-opentelemetry and PyPI is not reachable here: the test puts a stand-in for the
    // one function of opentelemetry-api the client calls (opentelemetry.propagate.inject(carrier)) on the path.
    const otel = await mkdtemp(join(tmpdir(), "agentbus-py-otel-"));
    try {
      await mkdir(join(otel, "opentelemetry"), { recursive: true });
      await writeFile(join(otel, "opentelemetry", "__init__.py"), "");
      await writeFile(join(otel, "opentelemetry", "propagate.py"), "def inject(carrier, context=None, setter=None):\n    carrier['traceparent'] = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'\n");
      const script = (withOtel: boolean) => `
import json, sys, uuid
${withOtel ? `sys.path.insert(0, ${JSON.stringify(otel)})` : ""}
from agentbus_client import AgentbusClient
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_service_pb2
with AgentbusClient(${JSON.stringify(target)}) as anonymous:
    client = anonymous.with_api_key(anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="py-trace-" + uuid.uuid4().hex[:8])).key)
    channel = client.channels.CreateChannel(channel_service_pb2.CreateChannelRequest(name="py-trace-" + uuid.uuid4().hex[:8], mode=channel_pb2.CHANNEL_MODE_CLAIMABLE))
    sent = client.messages.CreateMessage(message_service_pb2.CreateMessageRequest(identifier=channel.id, content="traced"))
    print(json.dumps({"traceparent": sent.message.trace.traceparent}))
`;
      const traced = await runPython(["-c", script(true)]);
      expect(traced, traced.stderr).toMatchObject({ code: 0 });
      expect(JSON.parse(traced.stdout)).toEqual({ traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" });
      const plain = await runPython(["-c", script(false)]);
      expect(plain, plain.stderr).toMatchObject({ code: 0 });
      expect((JSON.parse(plain.stdout) as { traceparent: string }).traceparent).not.toContain("4bf92f3577b34da6a3ce929d0e0e4736");
    } finally {
      await rm(otel, { recursive: true, force: true });
    }
  });

  it("installs with pip as a package (the generated code inside, no protoc) and runs from outside the checkout", async () => {
    const dir = await mkdtemp(join(tmpdir(), "agentbus-py-"));
    try {
      const venv = join(dir, "venv");
      // Debian's grpcio and protobuf come in through the system site-packages (PyPI is not reachable).
      await run(python, ["-m", "venv", "--without-pip", "--system-site-packages", venv]);
      const venvPython = join(venv, "bin", "python");
      const clean: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? "", PYTHONDONTWRITEBYTECODE: "1", HOME: dir };
      await run(venvPython, ["-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--quiet", pythonDir], { env: clean, cwd: dir });
      const script = [
        "import json, sys, agentbus_client",
        "from agentbus.v1 import key_service_pb2",
        "client = agentbus_client.AgentbusClient(sys.argv[1])",
        "issued = client.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label='pip'))",
        "me = client.with_api_key(issued.key).keys.GetCurrentKey(key_service_pb2.GetCurrentKeyRequest())",
        "print(json.dumps({'client': agentbus_client.__file__, 'messages': key_service_pb2.__file__, 'label': me.agent_label}))",
      ].join("\n");
      const { stdout } = await run(venvPython, ["-c", script, target], { env: clean, cwd: dir });
      const out = JSON.parse(stdout) as { client: string; messages: string; label: string };
      expect(out.label).toBe("pip");
      expect(out.client.startsWith(venv)).toBe(true);
      expect(out.messages.startsWith(venv)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
