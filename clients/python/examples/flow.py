"""The README's walk-through over gRPC: mint a key, create a claimable channel,
post a message, list open work, claim it, acknowledge it; then run a worker
(run_worker) and ask it for a result with call().

Prints one JSON object per step ({"step": ..., "result": ...}) and exits 0
when every step did what it should; on a service error it prints
{"step": ..., "error": <code>, ...} and exits 1.

    /usr/bin/python3 clients/python/examples/flow.py [--target 127.0.0.1:8080]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentbus_client import AgentbusClient, AgentbusError, call, run_worker, to_dict  # noqa: E402
from agentbus.v1 import channel_pb2, channel_service_pb2, key_service_pb2, message_service_pb2  # noqa: E402


def emit(step: str, result: dict) -> None:
    print(json.dumps({"step": step, "result": result}), flush=True)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"unexpected result: {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default=os.environ.get("AGENTBUS_TARGET", "127.0.0.1:8080"), help="host:port of the service")
    args = parser.parse_args()
    run_id = uuid.uuid4().hex[:8]
    step = "create_key"

    with AgentbusClient(args.target) as anonymous:
        try:
            issued = anonymous.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label=f"python-flow-{run_id}"))
            # The secret is shown once by the service; keep it out of the output.
            emit(step, {**to_dict(issued), "key": "<redacted>"})
            client = anonymous.with_api_key(issued.key)

            step = "create_channel"
            channel = client.channels.CreateChannel(
                channel_service_pb2.CreateChannelRequest(name=f"python-jobs-{run_id}", mode=channel_pb2.CHANNEL_MODE_CLAIMABLE)
            )
            emit(step, to_dict(channel))

            step = "post_message"
            posted = client.messages.CreateMessage(
                message_service_pb2.CreateMessageRequest(identifier=channel.id, content="resize image 42"),
                idempotency_key=f"task-{run_id}",
            )
            emit(step, to_dict(posted))

            step = "list_messages"
            page = client.messages.ListMessages(
                message_service_pb2.ListMessagesRequest(identifier=channel.id, status=message_service_pb2.MESSAGE_STATUS_UNCLAIMED, limit=10)
            )
            emit(step, to_dict(page))
            check([m.id for m in page.data] == [posted.message.id], "the listed open work is the posted message")

            step = "claim_message"
            claimed = client.messages.ClaimMessage(message_service_pb2.ClaimMessageRequest(message_id=posted.message.id))
            emit(step, to_dict(claimed))
            check(claimed.status == message_service_pb2.CLAIM_STATUS_CLAIMED, "the claim succeeded")

            step = "ack_message"
            acked = client.messages.AckMessage(message_service_pb2.AckMessageRequest(message_id=posted.message.id))
            emit(step, to_dict(acked))
            check(acked.status == message_service_pb2.ACK_STATUS_ACKNOWLEDGED, "the ack succeeded")

            step = "call"
            # A worker on a thread of its own: its handler's return value is the ack's result.
            stop = threading.Event()
            worker = threading.Thread(
                target=run_worker, args=(client, channel.id, lambda message, _context: {"resized": message.content}), kwargs={"wait": 2, "stop": stop}
            )
            worker.start()
            try:
                answer = call(client, channel.id, "resize image 43", timeout=30)
            finally:
                stop.set()
                worker.join()
            emit(step, {"result": answer.result, "message": to_dict(answer.message)})
            check(answer.result == json.dumps({"resized": "resize image 43"}, separators=(",", ":")), "the worker's result came back")
        except AgentbusError as err:
            print(json.dumps({"step": step, "error": err.code, "status": err.status.name, "message": err.message}), flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
