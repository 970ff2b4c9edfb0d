"""A small gRPC client for agentbus over the generated messages (gen/python).

- Sends the API key as ``x-api-key`` metadata on every call.
- Sends an ``idempotency-key`` on every call that may change state (the
  method's ``idempotency_level`` is not NO_SIDE_EFFECTS, read from the
  generated descriptors), a fresh one unless the caller passes its own, so a
  retry with the same key cannot apply twice.
- Raises :class:`AgentbusError` carrying the service's error code (e.g.
  ``message_not_found``), decoded from the ``agentbus.v1.ErrorDetail`` the
  server puts in the ``grpc-status-details-bin`` trailer.

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

import os
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple

import grpc

_PB_DIR = Path(os.environ.get("AGENTBUS_PB_DIR") or Path(__file__).resolve().parent.parent.parent / "gen" / "python")
if not (_PB_DIR / "agentbus" / "v1").is_dir():
    raise ImportError(f"generated code not found in {_PB_DIR}: run npm run generate")
# The generated modules import each other as top-level packages (agentbus.v1, google.api).
if str(_PB_DIR) not in sys.path:
    sys.path.insert(0, str(_PB_DIR))

from google.protobuf import descriptor_pb2, symbol_database  # noqa: E402
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from google.protobuf.message import DecodeError, Message  # noqa: E402
from google.rpc import status_pb2  # noqa: E402

from agentbus.v1 import (  # noqa: E402
    actor_service_pb2,
    admin_service_pb2,
    channel_service_pb2,
    errors_pb2,
    job_service_pb2,
    key_service_pb2,
    message_service_pb2,
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
    # The generated modules registered their classes in the default database when imported.
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
    """One gRPC channel (plaintext h2c unless a channel is passed) and the six services."""

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
        self.actors = _Service(self, ch, actor_service_pb2.DESCRIPTOR.services_by_name["ActorService"])
        self.jobs = _Service(self, ch, job_service_pb2.DESCRIPTOR.services_by_name["JobService"])
        self.admin = _Service(self, ch, admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"])

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
        if _mutates(method):
            md.append(("idempotency-key", idempotency_key or str(uuid.uuid4())))
        if method.server_streaming:
            # Streams run until the caller stops reading: no deadline by default.
            return _map_stream_errors(callable_(request, metadata=md, timeout=timeout))
        try:
            return callable_(request, metadata=md, timeout=timeout if timeout is not None else self.timeout)
        except grpc.RpcError as err:
            raise AgentbusError.from_rpc_error(err) from None


def _mutates(method: MethodDescriptor) -> bool:
    # The server applies Idempotency-Key to unary methods that may change state; the same rule.
    return not method.client_streaming and not method.server_streaming and method.GetOptions().idempotency_level != _NO_SIDE_EFFECTS


def _map_stream_errors(stream: Iterator[Message]) -> Iterator[Message]:
    try:
        yield from stream
    except grpc.RpcError as err:
        raise AgentbusError.from_rpc_error(err) from None


def to_dict(message: Message) -> dict:
    """JSON-ready dict with the proto field names (the REST API's spelling)."""
    return MessageToDict(message, preserving_proto_field_name=True)
