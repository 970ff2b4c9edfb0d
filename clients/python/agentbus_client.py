"""A small gRPC client for agentbus over the generated messages (gen/python).

- Sends the API key as ``x-api-key`` metadata on every call.
- Sends an ``idempotency-key`` on every call that may change state (the
  method's ``idempotency_level`` is not NO_SIDE_EFFECTS, read from the
  generated descriptors), a fresh one unless the caller passes its own, so a
  retry with the same key cannot apply twice.
- Raises :class:`AgentbusError` carrying the service's error code (e.g.
  ``message_not_found``), decoded from the ``agentbus.v1.ErrorDetail`` the
  server puts in the ``grpc-status-details-bin`` trailer.

- ``run_worker`` consumes a claimable channel (receive leased batches,
  heartbeat, ack with the handler's result, release on an exception) and
  ``call`` posts a task and waits for its result, as the TypeScript client's
  ``runWorker`` and ``call()`` do.

The generated messages are committed in the repository's ``gen/python``
(``npm run generate`` rebuilds them); ``$AGENTBUS_PB_DIR`` points elsewhere.
The gRPC stubs are built here from the services' descriptors, so no gRPC code
generator is needed.

    client = AgentbusClient("127.0.0.1:8080")
    issued = client.keys.CreateKey(key_service_pb2.CreateKeyRequest(agent_label="planner"))
    authed = client.with_api_key(issued.key)
    authed.messages.AckMessage(message_service_pb2.AckMessageRequest(message_id=...))
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

import grpc


def _find_generated_code() -> None:
    """Puts the generated messages on sys.path unless they are installed.

    ``pip install ./clients/python`` installs them beside this module; run
    from a checkout, they are the repository's ``gen/python`` (or
    ``$AGENTBUS_PB_DIR``). The generated modules import each other as
    top-level packages (``agentbus.v1``, ``google.api``).
    """
    override = os.environ.get("AGENTBUS_PB_DIR")
    if not override:
        try:
            import agentbus.v1.message_service_pb2  # noqa: F401
            return
        except ImportError:
            pass
    pb_dir = Path(override or Path(__file__).resolve().parent.parent.parent / "gen" / "python")
    if not (pb_dir / "agentbus" / "v1").is_dir():
        raise ImportError(f"generated code not found in {pb_dir}: pip install ./clients/python, or run npm run generate")
    if str(pb_dir) not in sys.path:
        sys.path.insert(0, str(pb_dir))


_find_generated_code()

from google.protobuf import descriptor_pb2, message_factory, symbol_database  # noqa: E402
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from google.protobuf.message import DecodeError, Message  # noqa: E402
from google.rpc import status_pb2  # noqa: E402

from agentbus.v1 import (  # noqa: E402
    actor_service_pb2,
    admin_service_pb2,
    channel_service_pb2,
    compat_service_pb2,
    errors_pb2,
    job_service_pb2,
    key_service_pb2,
    limit_service_pb2,
    message_service_pb2,
    security_service_pb2,
    session_service_pb2,
    waitpoint_service_pb2,
    schedule_service_pb2,
)

Metadata = Sequence[Tuple[str, str]]

_NO_SIDE_EFFECTS = descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS


class AgentbusError(Exception):
    """A failed call: the gRPC status plus the service's own error code."""

    def __init__(self, status: grpc.StatusCode, message: str, code: str, suggestion: str = "", details: Optional[dict] = None):
        super().__init__(f"{code}: {message}" if code else message)
        self.status = status
        self.message = message
        # Stable, documented code to match on (GET /docs/errors); "" if the
        # failure did not come from the service (e.g. connection refused).
        self.code = code
        self.suggestion = suggestion
        self.details = details or {}

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> "AgentbusError":
        status: grpc.StatusCode = err.code()  # type: ignore[attr-defined]
        message: str = err.details() or ""  # type: ignore[attr-defined]
        for key, value in err.trailing_metadata() or ():  # type: ignore[attr-defined]
            if key != "grpc-status-details-bin":
                continue
            try:
                rpc_status = status_pb2.Status.FromString(value)
            except DecodeError:
                break
            for any_detail in rpc_status.details:
                if any_detail.Is(errors_pb2.ErrorDetail.DESCRIPTOR):
                    detail = errors_pb2.ErrorDetail()
                    any_detail.Unpack(detail)
                    details = MessageToDict(detail.details) if detail.HasField("details") else {}
                    return cls(status, message, detail.error, detail.suggestion, details)
        return cls(status, message, "")


def _message_class(descriptor: Any) -> Any:
    """The generated class of a message descriptor, on every protobuf the package admits.

    ``message_factory.GetMessageClass`` came after 4.21 (Debian bookworm's
    runtime has none); ``SymbolDatabase.GetPrototype`` was deprecated beside it
    and removed in 6.30. Either returns the class the generated module built.
    """
    get_message_class = getattr(message_factory, "GetMessageClass", None)
    if get_message_class is not None:
        return get_message_class(descriptor)
    return symbol_database.Default().GetPrototype(descriptor)


def _stub_method(channel: grpc.Channel, method: MethodDescriptor) -> Callable[..., Any]:
    """What grpc_python_plugin would generate for the method, built from its descriptor."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    serialize = _message_class(method.input_type).SerializeToString
    deserialize = _message_class(method.output_type).FromString
    if method.client_streaming:
        raise NotImplementedError(f"{path}: client streaming is not used by the API")
    make = channel.unary_stream if method.server_streaming else channel.unary_unary
    return make(path, request_serializer=serialize, response_deserializer=deserialize)


class _Service:
    """Calls a service's methods by name, with the client's metadata and error mapping."""

    def __init__(self, client: "AgentbusClient", channel: grpc.Channel, descriptor: ServiceDescriptor):
        self._client = client
        self._channel = channel
        self._descriptor = descriptor
        self._callables: dict = {}

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method: Optional[MethodDescriptor] = self._descriptor.methods_by_name.get(name)
        if method is None:
            raise AttributeError(f"{self._descriptor.full_name} has no method {name}")
        if name not in self._callables:
            self._callables[name] = _stub_method(self._channel, method)
        callable_ = self._callables[name]
        return lambda request, **kwargs: self._client._invoke(method, callable_, request, **kwargs)


class AgentbusClient:
    """One gRPC channel (plaintext h2c unless a channel is passed) and the twelve services."""

    def __init__(
        self,
        target: str = "127.0.0.1:8080",
        api_key: Optional[str] = None,
        *,
        channel: Optional[grpc.Channel] = None,
        timeout: float = 30.0,
    ):
        self.target = target
        self.api_key = api_key
        self.timeout = timeout
        self._channel = channel or grpc.insecure_channel(target)
        ch = self._channel
        self.keys = _Service(self, ch, key_service_pb2.DESCRIPTOR.services_by_name["KeyService"])
        self.channels = _Service(self, ch, channel_service_pb2.DESCRIPTOR.services_by_name["ChannelService"])
        self.messages = _Service(self, ch, message_service_pb2.DESCRIPTOR.services_by_name["MessageService"])
        # Shared limits (a model provider's quota) that channels and messages name (docs/decisions.md#shared-limits).
        self.limits = _Service(self, ch, limit_service_pb2.DESCRIPTOR.services_by_name["LimitService"])
        # Waitpoints a task waits at until a person or another system completes one (docs/decisions.md#waitpoints);
        # CompleteWaitpoint needs no API key: its token is the capability.
        self.waitpoints = _Service(self, ch, waitpoint_service_pb2.DESCRIPTOR.services_by_name["WaitpointService"])
        # Messages posted on a cron schedule, once per tick (docs/decisions.md#schedules).
        self.schedules = _Service(self, ch, schedule_service_pb2.DESCRIPTOR.services_by_name["ScheduleService"])
        self.actors = _Service(self, ch, actor_service_pb2.DESCRIPTOR.services_by_name["ActorService"])
        self.jobs = _Service(self, ch, job_service_pb2.DESCRIPTOR.services_by_name["JobService"])
        self.admin = _Service(self, ch, admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"])
        self.sessions = _Service(self, ch, session_service_pb2.DESCRIPTOR.services_by_name["SessionService"])
        self.security = _Service(self, ch, security_service_pb2.DESCRIPTOR.services_by_name["SecurityService"])
        # The reference's convenience verbs, for code migrating from Backchannel (docs/decisions.md#compat-verbs).
        self.compat = _Service(self, ch, compat_service_pb2.DESCRIPTOR.services_by_name["CompatService"])

    def with_api_key(self, api_key: str) -> "AgentbusClient":
        """The same connection, calling as another key."""
        return AgentbusClient(self.target, api_key, channel=self._channel, timeout=self.timeout)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "AgentbusClient":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _invoke(
        self,
        method: MethodDescriptor,
        callable_: Callable[..., Any],
        request: Message,
        *,
        idempotency_key: Optional[str] = None,
        metadata: Metadata = (),
        timeout: Optional[float] = None,
    ) -> Any:
        md = list(metadata)
        if self.api_key:
            md.append(("x-api-key", self.api_key))
        # The application's active trace context, when it uses OpenTelemetry (docs/decisions.md#trace-context).
        if not any(k == "traceparent" for k, _ in md):
            md.extend(_trace_metadata())
        # No automatic key on a long-poll: the service refuses a keyed request that waits (idempotent_wait).
        if _mutates(method) and (idempotency_key is not None or _waits(request) <= 0):
            md.append(("idempotency-key", idempotency_key or str(uuid.uuid4())))
        if method.server_streaming:
            # Streams run until the caller stops reading: no deadline by default.
            return _map_stream_errors(callable_(request, metadata=md, timeout=timeout))
        try:
            return callable_(request, metadata=md, timeout=timeout if timeout is not None else self.timeout)
        except grpc.RpcError as err:
            raise AgentbusError.from_rpc_error(err) from None


def _trace_metadata() -> List[Tuple[str, str]]:
    """The active OpenTelemetry context as W3C headers; none without the ``opentelemetry-api`` package."""
    try:
        from opentelemetry.propagate import inject  # type: ignore[import-not-found]
    except ImportError:
        return []
    carrier: Dict[str, str] = {}
    inject(carrier)
    return [(k.lower(), v) for k, v in carrier.items() if k.lower() in ("traceparent", "tracestate")]


def _mutates(method: MethodDescriptor) -> bool:
    # The server applies Idempotency-Key to unary methods that may change state; the same rule.
    return not method.client_streaming and not method.server_streaming and method.GetOptions().idempotency_level != _NO_SIDE_EFFECTS


def _waits(request: Message) -> float:
    """The request's ``wait`` seconds, 0 when it has none; the service's own rule."""
    if "wait" not in request.DESCRIPTOR.fields_by_name:
        return 0.0
    return float(getattr(request, "wait"))


def _map_stream_errors(stream: Iterator[Message]) -> Iterator[Message]:
    try:
        yield from stream
    except grpc.RpcError as err:
        raise AgentbusError.from_rpc_error(err) from None


def to_dict(message: Message) -> dict:
    """JSON-ready dict with the proto field names (the REST API's spelling)."""
    return MessageToDict(message, preserving_proto_field_name=True)


# --- The worker loop and call() ---------------------------------------------

_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.CANCELLED,
}
# Ack and release are retried this often on transient errors before the lease is left to run out.
_SETTLE_ATTEMPTS = 4


def is_transient(err: BaseException) -> bool:
    """A failure that may pass on its own (service or network unavailable, overloaded, cut)."""
    return isinstance(err, AgentbusError) and err.status in _TRANSIENT


def _backoff(attempt: int, low: float = 0.2, high: float = 10.0) -> float:
    # Full jitter, so that workers cut off together do not come back together.
    ceiling = min(high, low * 2 ** max(0, attempt - 1))
    return low + random.random() * max(0.0, ceiling - low)


class LeaseLostError(Exception):
    """A heartbeat found the lease gone: another worker may be processing the message."""

    def __init__(self, message_id: str, cause: AgentbusError):
        super().__init__(f"the lease on message {message_id} was lost; another worker may process it")
        self.message_id = message_id
        self.cause = cause


class WorkContext:
    """What a handler gets besides the message."""

    def __init__(self, lease_token: str, delivery_count: int, stop: threading.Event):
        self.lease_token = lease_token
        # How many times the service handed this message out, this time included: above 1 it is a retry.
        self.delivery_count = delivery_count
        self._stop = stop
        self._lost = threading.Event()

    @property
    def cancelled(self) -> bool:
        """True once the worker is stopping or the lease was lost; a handler may check it to finish early."""
        return self._stop.is_set() or self._lost.is_set()


class _Heartbeat:
    """Extends one lease every ``interval`` seconds on a thread of its own until stopped."""

    def __init__(self, client: AgentbusClient, lease_token: str, lease_seconds: int, interval: float, message_id: str, context: WorkContext, report: Callable[[BaseException, Any], None], message: Any):
        self.lost: Optional[LeaseLostError] = None
        self._done = threading.Event()
        self._args = (client, lease_token, lease_seconds, interval, message_id, context, report, message)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        client, lease_token, lease_seconds, interval, message_id, context, report, message = self._args
        while not self._done.wait(interval):
            try:
                client.messages.HeartbeatLease(
                    message_service_pb2.HeartbeatLeaseRequest(lease_token=lease_token, lease_seconds=lease_seconds), timeout=max(interval, 5.0)
                )
            except AgentbusError as err:
                if self._done.is_set():
                    return
                if err.code in ("lease_expired", "forbidden"):
                    self.lost = LeaseLostError(message_id, err)
                    context._lost.set()
                    return
                # A missed beat is survivable: the lease outlasts several intervals.
                report(err, message)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _encode_result(value: Any) -> Optional[str]:
    """The handler's return value as the ack's result: a str as is, None for none, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _settle(call: Callable[[str], Any], report: Callable[[BaseException, Any], None], message: Any) -> Optional[AgentbusError]:
    """Retries transient failures under one idempotency key; returns the final error (already reported)."""
    key = str(uuid.uuid4())
    for attempt in range(1, _SETTLE_ATTEMPTS + 1):
        try:
            call(key)
            return None
        except AgentbusError as err:
            if not is_transient(err) or attempt == _SETTLE_ATTEMPTS:
                report(err, message)
                return err
            time.sleep(_backoff(attempt))
    return None


def run_worker(
    client: AgentbusClient,
    channel: str,
    handler: Callable[[Any, WorkContext], Any],
    *,
    batch_size: int = 1,
    concurrency: Optional[int] = None,
    lease_seconds: int = 300,
    wait: float = 20.0,
    heartbeat_interval: Optional[float] = None,
    actor: Optional[str] = None,
    stop: Optional[threading.Event] = None,
    on_error: Optional[Callable[[BaseException, Any], None]] = None,
) -> Dict[str, int]:
    """Consumes a claimable channel until ``stop`` is set; returns ``{"acked": n, "failed": n}``.

    Receives up to ``batch_size`` messages per call (long-polling ``wait``
    seconds when there are none), runs ``handler(message, context)`` on up to
    ``concurrency`` (default ``batch_size``) threads, heartbeats each held
    lease meanwhile, acks with the handler's return value as the result and
    releases the message at once when it raises. The worker keeps no retry
    state: the service counts deliveries (``context.delivery_count``) and a
    channel with a delivery limit dead-letters a message that keeps failing.
    Stopping takes effect after the receive in flight returns (at most
    ``wait`` seconds); messages in hand are settled first. A non-transient
    receive error (e.g. ``channel_not_found``) is raised.
    """
    stop = stop or threading.Event()
    report = on_error or (lambda _err, _message: None)
    interval = heartbeat_interval if heartbeat_interval is not None else lease_seconds / 3
    stats = {"acked": 0, "failed": 0}
    lock = threading.Lock()
    # Worker-wide, not per message: after a run of failures, pause before receiving again.
    failures_in_a_row = [0]

    def release(message: Any) -> None:
        _settle(
            lambda key: client.messages.ReleaseMessage(message_service_pb2.ReleaseMessageRequest(message_id=message.id, actor=actor), idempotency_key=key),
            report,
            message,
        )

    def process(message: Any, context: WorkContext, heartbeat: _Heartbeat) -> str:
        outcome: Tuple[str, Any]
        try:
            if context.cancelled:
                outcome = ("skipped", None)
            else:
                outcome = ("ok", _encode_result(handler(message, context)))
        except Exception as err:  # noqa: BLE001 - any handler failure releases the message
            outcome = ("error", err)
        finally:
            heartbeat.stop()
        if heartbeat.lost is not None:
            # Perhaps in another worker's hands already: neither ack nor release.
            report(heartbeat.lost, message)
            return "failed"
        if outcome[0] != "ok":
            if outcome[0] == "error":
                report(outcome[1], message)
            release(message)
            return "failed"
        result = outcome[1]
        error = _settle(
            lambda key: client.messages.AckMessage(
                message_service_pb2.AckMessageRequest(message_id=message.id, actor=actor, result=result), idempotency_key=key
            ),
            report,
            message,
        )
        if error is not None and not is_transient(error):
            # Refused for good (e.g. result_too_large): give it back for another delivery.
            release(message)
            return "failed"
        return "acked"

    def done(future: "Future[str]") -> None:
        outcome = future.result() if future.exception() is None else "failed"
        with lock:
            stats[outcome] += 1
            failures_in_a_row[0] = failures_in_a_row[0] + 1 if outcome == "failed" else 0

    held: Set["Future[str]"] = set()
    errors = 0
    fatal: Optional[BaseException] = None
    with ThreadPoolExecutor(max_workers=max(1, concurrency or batch_size)) as pool:
        while not stop.is_set():
            held = {f for f in held if not f.done()}
            if len(held) >= batch_size:
                wait_for_futures(held, return_when=FIRST_COMPLETED)
                continue
            if failures_in_a_row[0] > 0 and stop.wait(_backoff(failures_in_a_row[0])):
                break
            try:
                # No idempotency key: a waiting receive may not carry one.
                response = client.messages.ReceiveMessages(
                    message_service_pb2.ReceiveMessagesRequest(
                        identifier=channel, max_messages=batch_size - len(held), lease_seconds=lease_seconds, wait=wait, actor=actor
                    ),
                    timeout=wait + 30,
                )
                errors = 0
            except AgentbusError as err:
                if not is_transient(err):
                    fatal = err
                    break
                report(err, None)
                errors += 1
                stop.wait(_backoff(errors))
                continue
            for leased in response.data:
                message = leased.message
                context = WorkContext(leased.lease_token, message.delivery_count, stop)
                # From receipt on: a message waiting for a free thread holds a lease too.
                heartbeat = _Heartbeat(client, leased.lease_token, lease_seconds, interval, message.id, context, report, message)
                future = pool.submit(process, message, context, heartbeat)
                future.add_done_callback(done)
                held.add(future)
        wait_for_futures(held)
    if fatal is not None:
        raise fatal
    return stats


class CallTimeoutError(Exception):
    """No acknowledgement within the timeout; the task stays posted and may still be done."""

    def __init__(self, message_id: str, timeout: float):
        super().__init__(f"no acknowledgement of message {message_id} within {timeout} s")
        self.message_id = message_id
        self.timeout = timeout


class CallAbandonedError(Exception):
    """The task stopped being live (expired, retracted, dead-lettered) unacknowledged: no result will come."""

    def __init__(self, task: Any):
        super().__init__(f"message {task.id} is no longer live and was not acknowledged")
        self.task = task


class CallResult(NamedTuple):
    result: Optional[str]
    message: Any


# The service caps a long-poll (25 s by default) and answers at its cap; we ask again.
_MAX_WAIT_PER_POLL = 30.0


def call(
    client: AgentbusClient,
    channel: str,
    task: str,
    *,
    timeout: float = 60.0,
    actor: Optional[str] = None,
    group_key: Optional[str] = None,
    priority: Optional[int] = None,
    ttl_seconds: Optional[int] = None,
    limits: Sequence[str] = (),
) -> CallResult:
    """Posts ``task`` to a claimable channel and waits for a worker's acknowledgement: ``(result, message)``.

    ``group_key`` (1..128 characters) puts the task in a group, which the
    channel's ``group_concurrency`` and fair dispatch work by; ``priority`` is
    1 (most urgent) to 5 (default 3); ``ttl_seconds`` expires the task sooner
    than the channel's TTL; ``limits`` names shared limits of the channel's
    owner it holds while in flight. ``result`` is None when the worker acked
    without one. Raises :class:`CallTimeoutError` after ``timeout`` seconds
    without an acknowledgement and :class:`CallAbandonedError` if the task
    stops being live.
    """
    deadline = time.monotonic() + timeout
    posted = client.messages.CreateMessage(
        message_service_pb2.CreateMessageRequest(
            identifier=channel, content=task, actor=actor, group_key=group_key, priority=priority, ttl_seconds=ttl_seconds, limits=list(limits)
        )
    )
    message_id = posted.message.id
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CallTimeoutError(message_id, timeout)
        poll = min(remaining, _MAX_WAIT_PER_POLL)
        message = client.messages.GetMessage(message_service_pb2.GetMessageRequest(message_id=message_id, wait=poll), timeout=poll + 30)
        if len(message.acknowledged_by) > 0:
            return CallResult(message.result if message.HasField("result") else None, message)
        # GetMessage answers at once for a message that is no longer live: waiting again would spin.
        if not message.active:
            raise CallAbandonedError(message)
