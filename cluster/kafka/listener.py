"""The Kafka wire protocol: a TCP listener that real Kafka clients talk to.

The one module that imports the wire codec library (kio, generated from Kafka's message
schemas). It speaks the protocol; what to answer is decided by a ``KafkaApiHandler`` (the
broker), which gets each request decoded and returns the response object for that API and
version. ``request_data`` and ``build_response`` translate between the codec's objects and
kemu's plain values (``protocol.kafka_api``), so the handler never touches codec types.

The listener, per connection (as Kafka's ``SocketServer`` and ``KafkaApis`` do):

* reads frames (4-byte big-endian size, then the request); a size over ``max_frame_bytes``
  closes the connection;
* parses the request header (v1, or v2 for flexible versions, as the API's schema says);
* answers ApiVersions itself (``advertised_api_versions``): a Kafka 2.7 broker's table, with
  the handler's own ranges for the APIs it implements, everything clamped to what the codec
  can decode. An ApiVersions request of a version above ours
  gets what Kafka sends: only its header is parsed, and the reply is a v0 body with
  UNSUPPORTED_VERSION and the table, so that the client retries with a lower version.
  ApiVersions responses always carry response header v0;
* closes the connection on an unknown API key or an unadvertised version, as Kafka does;
* closes the connection on a request the codec cannot decode (a malformed frame, an unknown
  tagged field) or whose length prefixes claim more than the frame holds (checked before
  the codec runs, which would otherwise allocate from them: ``cluster.kafka.bounds``),
  traced as an ``error`` of type ``bad_frame``; other connections and the listener carry
  on;
* hands every other request to the handler in its own task, several at a time (librdkafka
  pipelines), and writes the responses in request order whatever order they complete in.
  A handler that returns ``None`` (an advertised API it does not implement) or raises gets
  the error response Kafka would send where the API's schema can carry one
  (``error_response``); otherwise the connection is closed. A handler may answer with plain
  values; the listener then builds the response, and reuses the encoding of a Metadata
  answer it has already sent (encoding is pure Python, and clients poll Metadata).

An ``accept()`` that fails (EMFILE: the process is out of file descriptors) is logged once
per run of failures and retried after ``ACCEPT_BACKOFF``, as Kafka's
``SocketServer.Acceptor`` carries on; a connection's socket errors (ECONNRESET) close that
connection only.

Every task belongs to the listener's task group: stopping it (cancelling ``serve``) closes
the listener and every connection. Socket errors become ``NetworkError`` here.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import struct
import types
import typing
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio
import structlog
from anyio.abc import (
    ObjectReceiveStream,
    ObjectSendStream,
    SocketAttribute,
    SocketListener,
    SocketStream,
    TaskGroup,
    TaskStatus,
)
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as _KioErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from cluster.kafka.bounds import check_lengths
from protocol.codec import FrameReader
from protocol.errors import ErrorCode, FrameError, NetworkError, NodeStoppedError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    NO_AUTHORIZED_OPERATIONS,
    BrokerEndpoint,
    ClientApiKey,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    ConfigValueType,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeClusterRequestData,
    DescribeClusterResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    KafkaApiRequestData,
    KafkaApiResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionAssignment,
    PartitionMetadata,
    TopicConfig,
    TopicErrorResult,
    TopicMetadata,
    TopicRef,
)
from protocol.trace import TraceKind

__all__ = [
    "ACCEPT_BACKOFF",
    "API_VERSIONS_RANGE",
    "DEFAULT_HOST",
    "DEFAULT_MAX_FRAME_BYTES",
    "KAFKA_2_7_API_VERSIONS",
    "MAX_IN_FLIGHT",
    "METADATA_CACHE_SIZE",
    "ApiVersionsAnswer",
    "KafkaApiHandler",
    "KafkaRequest",
    "KafkaWireServer",
    "UnsupportedApiError",
    "advertised_api_versions",
    "api_key_of",
    "build_response",
    "codec_api_versions",
    "decode_api_versions_response",
    "decode_request",
    "decode_response",
    "encode_api_versions_request",
    "encode_request",
    "encode_response",
    "error_response",
    "request_data",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
MAX_IN_FLIGHT: Final = 64  # requests read ahead on one connection before reading pauses
METADATA_CACHE_SIZE: Final = 16  # encoded Metadata bodies kept per listener (LRU)
ACCEPT_BACKOFF: Final = 0.1  # seconds between accept() tries while they fail (EMFILE)
API_VERSIONS_RANGE: Final = (0, 3)  # what a 2.7 broker answers; newer clients retry lower

KAFKA_2_7_API_VERSIONS: Final[Mapping[int, tuple[int, int]]] = types.MappingProxyType({
    0: (0, 8), 1: (0, 12), 2: (0, 5), 3: (0, 9), 4: (0, 4), 5: (0, 3), 6: (0, 6), 7: (0, 3),
    8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4), 13: (0, 4), 14: (0, 5),
    15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 6), 20: (0, 5), 21: (0, 2),
    22: (0, 4), 23: (0, 3), 24: (0, 2), 25: (0, 2), 26: (0, 2), 27: (0, 0), 28: (0, 3),
    29: (0, 2), 30: (0, 2), 31: (0, 2), 32: (0, 3), 33: (0, 1), 34: (0, 1), 35: (0, 2),
    36: (0, 2), 37: (0, 3), 38: (0, 2), 39: (0, 2), 40: (0, 2), 41: (0, 2), 42: (0, 2),
    43: (0, 2), 44: (0, 1), 45: (0, 0), 46: (0, 0), 47: (0, 0), 48: (0, 0), 49: (0, 0),
    50: (0, 0), 51: (0, 0), 56: (0, 0), 57: (0, 0),
})  # fmt: skip
"""The ApiVersions table of a Kafka 2.7 broker. kafka-python infers the broker's version
from it (Fetch v12 means 2.7), so the advertised table starts from this one."""

_API_VERSIONS = int(ClientApiKey.API_VERSIONS)
log = structlog.get_logger("kemu.kafka_listener")
_FIXED_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE = struct.Struct(">i")
_NO_THROTTLE = datetime.timedelta(0)


class UnsupportedApiError(NetworkError):
    """A request for an API key or version the listener does not advertise: Kafka closes
    the connection."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"API {api_key} v{api_version} is not advertised")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


# ---------------------------------------------------------------------- the handler side


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRequest:
    """A decoded client request. ``body`` is the codec's request object for this API and
    version; ``request_data`` turns it into kemu's plain values."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


class KafkaApiHandler(Protocol):
    """What a listener asks of the broker behind it."""

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        """API key -> (min, max) version the handler implements, read once when the
        listener is made. Advertised as is (it must lie within what the codec can decode);
        ApiVersions is the listener's own."""
        ...

    async def handle(self, request: KafkaRequest) -> Any:
        """The answer: the codec's response object for the request's API and version
        (``build_response`` or ``error_response`` make one), or the plain response values
        (``KafkaApiResponseData``; the listener builds the response, and keeps the encoded
        Metadata answers for reuse), or ``None`` for an API it does not implement."""
        ...


# ---------------------------------------------------------------------- codec boundary


def _codec_versions(api_key: int) -> tuple[int, int] | None:
    name = api_key_map.get(api_key)
    if name is None:
        return None
    versions = sorted(schema_name_map[name])
    return (versions[0], versions[-1]) if versions else None


@functools.cache
def _request_schema(api_key: int, api_version: int) -> Any:
    return load_request_schema(api_key, api_version)


@functools.cache
def _response_schema(api_key: int, api_version: int) -> Any:
    return load_response_schema(api_key, api_version)


def advertised_api_versions(
    supported: Mapping[int, tuple[int, int]],
) -> dict[int, tuple[int, int]]:
    """The ApiVersions table a listener answers: a Kafka 2.7 broker's keys, the handler's
    ranges for the keys it implements (those may go past 2.7, e.g. Metadata v12 with topic
    ids), and every range clamped to what the codec can decode."""
    if _API_VERSIONS in supported:
        raise ValueError("ApiVersions is answered by the listener, not the handler")
    table: dict[int, tuple[int, int]] = {}
    for key in sorted(set(KAFKA_2_7_API_VERSIONS) | set(supported)):
        codec = _codec_versions(key)
        if key in supported:
            low, high = supported[key]
            if codec is None or low > high or low < codec[0] or high > codec[1]:
                raise ValueError(f"API {key} v{low}-{high}: the codec decodes only {codec}")
        elif codec is None:  # inter-broker APIs 4-7: clients never send them
            continue
        else:
            low, high = API_VERSIONS_RANGE if key == _API_VERSIONS else KAFKA_2_7_API_VERSIONS[key]
            low, high = max(low, codec[0]), min(high, codec[1])
            if low > high:
                continue
        table[key] = (low, high)
    return table


def _kio_error(code: int) -> Any:
    return _KioErrorCode(int(code))


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _nested_entity(field_type: Any) -> Any:
    """The entity class of a field holding one entity or a tuple of them (maybe null)."""
    candidates = [field_type]
    if isinstance(field_type, types.UnionType) or typing.get_origin(field_type) is typing.Union:
        candidates = [a for a in typing.get_args(field_type) if a is not type(None)]
    for candidate in candidates:
        if typing.get_origin(candidate) is tuple:
            candidate = typing.get_args(candidate)[0]
        if dataclasses.is_dataclass(candidate):
            return candidate
    return None


@functools.cache
def _fields(cls: Any) -> tuple[tuple[str, str | None, Any, bool], ...]:
    """(name, kafka type, nested entity class, required) for each field of an entity."""
    return tuple(
        (
            f.name,
            f.metadata.get("kafka_type"),
            _nested_entity(f.type),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def _convert(kafka_type: str | None, nested: Any, value: Any) -> Any:
    if value is None:
        return None
    if nested is not None:
        if isinstance(value, Mapping):
            return _build(nested, value)
        return tuple(_build(nested, item) for item in value)
    if kafka_type == "error_code":
        return _kio_error(value)
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if isinstance(value, list):
        return tuple(value)
    return value


def _build(cls: Any, values: Mapping[str, Any]) -> Any:
    """An entity of ``cls`` from plain values keyed by the schema's field names. Values for
    fields this version lacks are dropped, which is how one description of a response
    serves every version; a missing required field raises ``TypeError``."""
    kwargs = {
        name: _convert(kafka_type, nested, values[name])
        for name, kafka_type, nested, _required in _fields(cls)
        if name in values
    }
    return cls(**kwargs)


def _has_field(cls: Any, name: str) -> bool:
    return any(f[0] == name for f in _fields(cls))


def decode_request(frame: bytes, advertised: Mapping[int, tuple[int, int]]) -> KafkaRequest:
    """The request in one frame (without its size prefix). Raises ``UnsupportedApiError``
    for an API or version not in ``advertised`` and ``FrameError`` for anything the codec
    cannot decode (a malformed frame, an unknown tagged field)."""
    if len(frame) < _FIXED_HEADER.size:
        raise FrameError(f"a {len(frame)}-byte request has no room for a request header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame)
    versions = advertised.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedApiError(api_key, api_version, correlation_id)
    schema = _request_schema(api_key, api_version)
    try:
        check_lengths(schema, frame, check_lengths(schema.__header_schema__, frame))
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except FrameError as exc:
        raise FrameError(f"cannot decode API {api_key} v{api_version}: {exc}") from exc
    except Exception as exc:  # the codec's errors, and KeyError on unknown tagged fields
        raise FrameError(f"cannot decode API {api_key} v{api_version}: {exc!r}") from exc
    return KafkaRequest(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=header.client_id,
        body=body,
    )


def _header_only(frame: bytes) -> KafkaRequest:
    """A request whose body we cannot read (ApiVersions newer than ours): its v1 header,
    which the v2 header starts with."""
    schema = _request_schema(_API_VERSIONS, 0)
    try:
        check_lengths(schema.__header_schema__, frame)
        header, _ = entity_reader(schema.__header_schema__)(frame, 0)
    except Exception as exc:
        raise FrameError(f"cannot decode a request header: {exc!r}") from exc
    return KafkaRequest(
        api_key=header.request_api_key,
        api_version=header.request_api_version,
        correlation_id=header.correlation_id,
        client_id=header.client_id,
        body=None,
    )


def encode_response(request: KafkaRequest, response: Any) -> bytes:
    """The whole response frame (size, header of the schema's version, body). Raises
    ``TypeError`` when ``response`` is not the response to ``request``'s API and version."""
    cls = type(response)
    if cls is not _response_schema(request.api_key, request.api_version):
        raise TypeError(
            f"{cls.__name__} does not answer API {request.api_key} v{request.api_version}"
        )
    return _frame(request, _encode_body(response))


def _encode_body(response: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    return buffer.getvalue()


def _frame(request: KafkaRequest, body: bytes) -> bytes:
    """Size prefix, the response header of the version the API's schema says, ``body``."""
    header_cls = _response_schema(request.api_key, request.api_version).__header_schema__
    buffer = io.BytesIO()
    buffer.write(bytes(_SIZE.size))
    entity_writer(header_cls)(buffer, header_cls(correlation_id=request.correlation_id))
    buffer.write(body)
    data = bytearray(buffer.getvalue())
    _SIZE.pack_into(data, 0, len(data) - _SIZE.size)
    return bytes(data)


# ---------------------------------------------------------------------- error responses


def _default(kafka_type: str | None, nested: Any, field_type: Any) -> Any:
    """A neutral value for a required field, or raises ``LookupError``."""
    if typing.get_origin(field_type) is tuple:
        return ()
    if isinstance(field_type, types.UnionType) and type(None) in typing.get_args(field_type):
        return None
    if nested is not None:
        raise LookupError("a required nested entity has no neutral value")
    neutral: dict[str | None, Any] = {
        "bool": False,
        "string": "",
        "uuid": None,
        "timedelta_i32": _NO_THROTTLE,
        "timedelta_i64": _NO_THROTTLE,
    }
    if kafka_type in neutral:
        return neutral[kafka_type]
    if kafka_type is not None and kafka_type.startswith(("int", "uint", "float")):
        return 0
    raise LookupError(f"no neutral value for a {kafka_type} field")


def _generic_error_response(request: KafkaRequest, code: ErrorCode, message: str | None) -> Any:
    """For a response schema with a top-level ``error_code`` and nothing else that needs a
    value: the error, and neutral values elsewhere. ``None`` where the schema cannot."""
    cls = _response_schema(request.api_key, request.api_version)
    if not _has_field(cls, "error_code"):
        return None
    types_by_name = {f.name: f.type for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {"error_code": code, "error_message": message}
    try:
        for name, kafka_type, nested, required in _fields(cls):
            if required and name not in values:
                values[name] = _default(kafka_type, nested, types_by_name[name])
    except LookupError:
        return None
    return _build(cls, values)


def error_response(
    request: KafkaRequest, code: ErrorCode, message: str | None = None
) -> Any | None:
    """The response Kafka's ``getErrorResponse`` gives: for the admin APIs every topic or
    resource of the request gets ``code``; for other APIs, where the response schema has a
    top-level error code, that. ``None`` when the schema cannot carry an error."""
    try:
        data = request_data(request)
    except ValueError:
        return _generic_error_response(request, code, message)
    answer: KafkaApiResponseData
    match data:
        case MetadataRequestData():
            topics = tuple(
                TopicMetadata(name=t.name or TopicName(""), topic_id=t.topic_id, error_code=code)
                for t in data.topics or ()
            )
            answer = MetadataResponseData(
                brokers=(), cluster_id="", controller_id=BrokerId(-1), topics=topics
            )
        case CreateTopicsRequestData():
            answer = CreateTopicsResponseData(
                topics=tuple(
                    CreateTopicResult(name=t.name, error_code=code, error_message=message)
                    for t in data.topics
                )
            )
        case DeleteTopicsRequestData():
            answer = DeleteTopicsResponseData(
                topics=tuple(
                    DeleteTopicResult(
                        name=t.name, topic_id=t.topic_id, error_code=code, error_message=message
                    )
                    for t in data.topics
                )
            )
        case DescribeConfigsRequestData():
            answer = DescribeConfigsResponseData(
                results=tuple(
                    DescribeConfigsResult(
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_code=code,
                        error_message=message,
                    )
                    for r in data.resources
                )
            )
        case CreatePartitionsRequestData():
            answer = CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(name=t.name, error_code=code, error_message=message)
                    for t in data.topics
                )
            )
        case DescribeClusterRequestData():
            answer = DescribeClusterResponseData(
                cluster_id="",
                controller_id=BrokerId(-1),
                brokers=(),
                error_code=code,
                error_message=message,
                endpoint_type=data.endpoint_type,
            )
        case _:
            typing.assert_never(data)
    return build_response(request, answer)


# ---------------------------------------------------------------------- requests -> plain


def request_data(request: KafkaRequest) -> KafkaApiRequestData:
    """kemu's plain value for a client admin request. Raises ``ValueError`` for an API
    this module has no plain values for."""
    body, version = request.body, request.api_version
    match request.api_key:
        case ClientApiKey.METADATA:
            return _metadata_request(body, version)
        case ClientApiKey.CREATE_TOPICS:
            return CreateTopicsRequestData(
                topics=tuple(_creatable_topic(t) for t in body.topics),
                timeout_ms=_millis(body.timeout),
                validate_only=bool(getattr(body, "validate_only", False)),
            )
        case ClientApiKey.DELETE_TOPICS:
            if hasattr(body, "topics"):  # v6+: by name or by id
                refs = tuple(
                    TopicRef(
                        name=None if t.name is None else TopicName(t.name),
                        topic_id=_topic_id(t.topic_id),
                    )
                    for t in body.topics
                )
            else:
                refs = tuple(TopicRef(name=TopicName(n)) for n in body.topic_names)
            return DeleteTopicsRequestData(topics=refs, timeout_ms=_millis(body.timeout))
        case ClientApiKey.DESCRIBE_CONFIGS:
            return DescribeConfigsRequestData(
                resources=tuple(
                    ConfigResource(
                        resource_type=int(r.resource_type),
                        resource_name=r.resource_name,
                        configuration_keys=(
                            None if r.configuration_keys is None else tuple(r.configuration_keys)
                        ),
                    )
                    for r in body.resources
                ),
                include_synonyms=bool(getattr(body, "include_synonyms", False)),
                include_documentation=bool(getattr(body, "include_documentation", False)),
            )
        case ClientApiKey.CREATE_PARTITIONS:
            return CreatePartitionsRequestData(
                topics=tuple(
                    CreatePartitionsTopic(
                        name=TopicName(t.name),
                        count=int(t.count),
                        assignments=(
                            None
                            if t.assignments is None
                            else tuple(_broker_ids(a.broker_ids) for a in t.assignments)
                        ),
                    )
                    for t in body.topics
                ),
                timeout_ms=_millis(body.timeout),
                validate_only=bool(body.validate_only),
            )
        case ClientApiKey.DESCRIBE_CLUSTER:
            return DescribeClusterRequestData(
                include_cluster_authorized_operations=bool(
                    body.include_cluster_authorized_operations
                ),
                endpoint_type=int(getattr(body, "endpoint_type", 1)),
            )
    raise ValueError(f"API {request.api_key} has no plain request values")


def _topic_id(value: Any) -> uuid.UUID | None:
    return None if value is None or value.int == 0 else uuid.UUID(int=value.int)


def _broker_ids(ids: Iterable[int]) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(int(b)) for b in ids)


def _metadata_request(body: Any, version: int) -> MetadataRequestData:
    topics: tuple[TopicRef, ...] | None
    if body.topics is None or (version == 0 and not body.topics):
        topics = None  # every topic
    else:
        topics = tuple(
            TopicRef(
                name=None if t.name is None else TopicName(t.name),
                topic_id=_topic_id(getattr(t, "topic_id", None)),
            )
            for t in body.topics
        )
    return MetadataRequestData(
        topics=topics,
        allow_auto_topic_creation=bool(getattr(body, "allow_auto_topic_creation", True)),
        include_cluster_authorized_operations=bool(
            getattr(body, "include_cluster_authorized_operations", False)
        ),
        include_topic_authorized_operations=bool(
            getattr(body, "include_topic_authorized_operations", False)
        ),
    )


def _creatable_topic(topic: Any) -> CreatableTopic:
    return CreatableTopic(
        name=TopicName(topic.name),
        num_partitions=int(topic.num_partitions),
        replication_factor=int(topic.replication_factor),
        assignments=tuple(
            PartitionAssignment(
                partition=int(a.partition_index), broker_ids=_broker_ids(a.broker_ids)
            )
            for a in topic.assignments
        ),
        configs=tuple(TopicConfig(name=c.name, value=c.value) for c in topic.configs),
    )


# ---------------------------------------------------------------------- plain -> responses


def build_response(request: KafkaRequest, data: KafkaApiResponseData) -> Any:
    """The response object answering ``request`` (of its API and version) with ``data``.
    What the version cannot carry is dropped. Raises ``TypeError`` when ``data`` answers
    another API."""
    key, version = request.api_key, request.api_version
    expected = _RESPONSE_TYPES.get(key)
    if expected is None or not isinstance(data, expected):
        raise TypeError(f"{type(data).__name__} does not answer API {key}")
    cls = _response_schema(key, version)
    values: dict[str, Any]
    match data:
        case MetadataResponseData():
            values = _metadata_values(data)
        case CreateTopicsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "topics": [_create_topic_values(t) for t in data.topics],
            }
        case DeleteTopicsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "responses": [
                    {
                        "name": t.name,
                        "topic_id": t.topic_id,
                        "error_code": _deletion_error(t.error_code, version),
                        "error_message": t.error_message,
                    }
                    for t in data.topics
                ],
            }
        case DescribeConfigsResponseData():
            asked = request_data(request)
            assert isinstance(asked, DescribeConfigsRequestData)
            values = {
                "throttle_time": data.throttle_time_ms,
                "results": [
                    {
                        "error_code": r.error_code,
                        "error_message": r.error_message,
                        "resource_type": r.resource_type,
                        "resource_name": r.resource_name,
                        "configs": [_config_values(c, asked) for c in r.configs],
                    }
                    for r in data.results
                ],
            }
        case CreatePartitionsResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "results": [
                    {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
                    for r in data.results
                ],
            }
        case DescribeClusterResponseData():
            values = {
                "throttle_time": data.throttle_time_ms,
                "error_code": data.error_code,
                "error_message": data.error_message,
                "endpoint_type": data.endpoint_type,
                "cluster_id": data.cluster_id,
                "controller_id": data.controller_id,
                "brokers": [
                    {
                        "broker_id": b.broker_id,
                        "host": b.host,
                        "port": b.port,
                        "rack": b.rack,
                        "is_fenced": False,
                    }
                    for b in data.brokers
                ],
                "cluster_authorized_operations": data.cluster_authorized_operations,
            }
        case _:
            typing.assert_never(data)
    return _build(cls, values)


def _deletion_error(code: ErrorCode, version: int) -> ErrorCode:
    """TOPIC_DELETION_DISABLED came with DeleteTopics v3: Kafka tells older clients
    INVALID_REQUEST instead (``handleDeleteTopicsRequest``)."""
    if code is ErrorCode.TOPIC_DELETION_DISABLED and version < 3:
        return ErrorCode.INVALID_REQUEST
    return code


_RESPONSE_TYPES: Final[Mapping[int, type]] = {
    ClientApiKey.METADATA: MetadataResponseData,
    ClientApiKey.CREATE_TOPICS: CreateTopicsResponseData,
    ClientApiKey.DELETE_TOPICS: DeleteTopicsResponseData,
    ClientApiKey.DESCRIBE_CONFIGS: DescribeConfigsResponseData,
    ClientApiKey.CREATE_PARTITIONS: CreatePartitionsResponseData,
    ClientApiKey.DESCRIBE_CLUSTER: DescribeClusterResponseData,
}


def _broker_values(broker: BrokerEndpoint) -> dict[str, Any]:
    return {
        "node_id": broker.broker_id,
        "host": broker.host,
        "port": broker.port,
        "rack": broker.rack,
    }


def _metadata_values(data: MetadataResponseData) -> dict[str, Any]:
    return {
        "throttle_time": data.throttle_time_ms,
        "brokers": [_broker_values(b) for b in data.brokers],
        "cluster_id": data.cluster_id,
        "controller_id": data.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "topic_id": t.topic_id,
                "is_internal": t.is_internal,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
                "topic_authorized_operations": t.authorized_operations,
            }
            for t in data.topics
        ],
        "cluster_authorized_operations": data.cluster_authorized_operations,
    }


def _create_topic_values(result: CreateTopicResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "topic_id": result.topic_id,
        "error_code": result.error_code,
        "error_message": result.error_message,
        "num_partitions": result.num_partitions,
        "replication_factor": result.replication_factor,
        "configs": (
            None
            if result.configs is None
            else [
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": c.source,
                    "is_sensitive": c.is_sensitive,
                }
                for c in result.configs
            ]
        ),
    }


def _config_values(entry: ConfigEntry, asked: DescribeConfigsRequestData) -> dict[str, Any]:
    synonyms: tuple[ConfigSynonym, ...] = entry.synonyms if asked.include_synonyms else ()
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "config_source": entry.source,
        "is_sensitive": entry.is_sensitive,
        "synonyms": [{"name": s.name, "value": s.value, "source": s.source} for s in synonyms],
        "config_type": entry.value_type,
        "documentation": entry.documentation if asked.include_documentation else None,
    }


# ---------------------------------------------------------------------- the client side
#
# ``cluster.kafka.client`` talks to brokers as a Kafka admin client does. It builds kemu's
# plain request values; these turn them into frames and the response frames back into
# plain values, so the client never touches codec types either.


@dataclass(frozen=True, slots=True)
class ApiVersionsAnswer:
    """A decoded ApiVersions response: its error and the broker's version table."""

    correlation_id: int
    error_code: ErrorCode
    api_versions: Mapping[int, tuple[int, int]]


def codec_api_versions(api_key: int) -> tuple[int, int] | None:
    """The versions of an API the codec can encode and decode (None: an unknown key)."""
    return _codec_versions(api_key)


def api_key_of(data: KafkaApiRequestData) -> ClientApiKey:
    """The API a plain request value belongs to."""
    match data:
        case MetadataRequestData():
            return ClientApiKey.METADATA
        case CreateTopicsRequestData():
            return ClientApiKey.CREATE_TOPICS
        case DeleteTopicsRequestData():
            return ClientApiKey.DELETE_TOPICS
        case DescribeConfigsRequestData():
            return ClientApiKey.DESCRIBE_CONFIGS
        case CreatePartitionsRequestData():
            return ClientApiKey.CREATE_PARTITIONS
        case DescribeClusterRequestData():
            return ClientApiKey.DESCRIBE_CLUSTER
        case _:
            typing.assert_never(data)


def _request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, values: Any
) -> bytes:
    """Size prefix, the request header of the version the API's schema says, the body."""
    cls = _request_schema(api_key, api_version)
    header_cls = cls.__header_schema__
    header_values = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    buffer = io.BytesIO()
    buffer.write(bytes(_SIZE.size))
    entity_writer(header_cls)(buffer, _build(header_cls, header_values))
    entity_writer(cls)(buffer, _build(cls, values))
    data = bytearray(buffer.getvalue())
    _SIZE.pack_into(data, 0, len(data) - _SIZE.size)
    return bytes(data)


def encode_api_versions_request(
    *,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    software_name: str = "kemu",
    software_version: str = "0",
) -> bytes:
    """A whole ApiVersions request frame (size prefix included)."""
    return _request_frame(
        _API_VERSIONS,
        api_version,
        correlation_id,
        client_id,
        {"client_software_name": software_name, "client_software_version": software_version},
    )


def encode_request(
    data: KafkaApiRequestData, *, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A whole request frame (size prefix included) carrying ``data`` as ``api_version``
    of its API. What the version cannot carry is dropped; raises ``TypeError`` when the
    version lacks something the request needs (e.g. topic ids before DeleteTopics v6)."""
    return _request_frame(
        int(api_key_of(data)), api_version, correlation_id, client_id, _request_values(data)
    )


def _request_values(data: KafkaApiRequestData) -> dict[str, Any]:
    """The inverse of ``request_data``: field values by the schema's names."""
    match data:
        case MetadataRequestData():
            return {
                "topics": (
                    None
                    if data.topics is None
                    else [{"name": t.name, "topic_id": t.topic_id} for t in data.topics]
                ),
                "allow_auto_topic_creation": data.allow_auto_topic_creation,
                "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
                "include_topic_authorized_operations": data.include_topic_authorized_operations,
            }
        case CreateTopicsRequestData():
            return {
                "topics": [
                    {
                        "name": t.name,
                        "num_partitions": t.num_partitions,
                        "replication_factor": t.replication_factor,
                        "assignments": [
                            {"partition_index": a.partition, "broker_ids": a.broker_ids}
                            for a in t.assignments
                        ],
                        "configs": [{"name": c.name, "value": c.value} for c in t.configs],
                    }
                    for t in data.topics
                ],
                "timeout": data.timeout_ms,
                "validate_only": data.validate_only,
            }
        case DeleteTopicsRequestData():
            return {
                "topic_names": data.names,
                "topics": [{"name": t.name, "topic_id": t.topic_id} for t in data.topics],
                "timeout": data.timeout_ms,
            }
        case DescribeConfigsRequestData():
            return {
                "resources": [
                    {
                        "resource_type": r.resource_type,
                        "resource_name": r.resource_name,
                        "configuration_keys": r.configuration_keys,
                    }
                    for r in data.resources
                ],
                "include_synonyms": data.include_synonyms,
                "include_documentation": data.include_documentation,
            }
        case CreatePartitionsRequestData():
            return {
                "topics": [
                    {
                        "name": t.name,
                        "count": t.count,
                        "assignments": (
                            None
                            if t.assignments is None
                            else [{"broker_ids": a} for a in t.assignments]
                        ),
                    }
                    for t in data.topics
                ],
                "timeout": data.timeout_ms,
                "validate_only": data.validate_only,
            }
        case DescribeClusterRequestData():
            return {
                "include_cluster_authorized_operations": data.include_cluster_authorized_operations,
                "endpoint_type": data.endpoint_type,
            }
        case _:
            typing.assert_never(data)


def _read_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """The correlation id and the codec's body of a response frame (no size prefix)."""
    cls = _response_schema(api_key, api_version)
    try:
        check_lengths(cls, frame, check_lengths(cls.__header_schema__, frame))
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, used)
    except Exception as exc:  # the codec's errors
        raise FrameError(
            f"cannot decode a response of API {api_key} v{api_version}: {exc!r}"
        ) from exc
    return int(header.correlation_id), body


def decode_api_versions_response(api_version: int, frame: bytes) -> ApiVersionsAnswer:
    """An ApiVersions response frame (no size prefix). A broker that does not know
    ``api_version`` answers UNSUPPORTED_VERSION in a v0 body, read as such."""
    if len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION:
        api_version = 0
    correlation_id, body = _read_response(_API_VERSIONS, api_version, frame)
    return ApiVersionsAnswer(
        correlation_id=correlation_id,
        error_code=_error_code(body.error_code),
        api_versions=types.MappingProxyType(
            {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
        ),
    )


def decode_response(
    api_key: int, api_version: int, frame: bytes
) -> tuple[int, KafkaApiResponseData]:
    """The correlation id and plain values of a response frame (no size prefix) to a
    request of ``api_key`` and ``api_version``; raises ``FrameError`` if it cannot be read."""
    correlation_id, body = _read_response(api_key, api_version, frame)
    try:
        return correlation_id, _response_data(api_key, body)
    except (TypeError, ValueError) as exc:
        raise FrameError(f"unexpected response of API {api_key} v{api_version}: {exc!r}") from exc


def _error_code(value: Any) -> ErrorCode:
    try:
        return ErrorCode(int(value))
    except ValueError:  # a code newer than our table: what Kafka's clients do with it
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _response_data(api_key: int, body: Any) -> KafkaApiResponseData:
    """The inverse of ``build_response``: fields a version lacks take their defaults."""
    throttle = _millis(getattr(body, "throttle_time", 0))
    match api_key:
        case ClientApiKey.METADATA:
            return MetadataResponseData(
                brokers=tuple(_broker_endpoint(b) for b in body.brokers),
                cluster_id=getattr(body, "cluster_id", None) or "",
                controller_id=BrokerId(int(getattr(body, "controller_id", -1))),
                topics=tuple(_topic_metadata(t) for t in body.topics),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.CREATE_TOPICS:
            return CreateTopicsResponseData(
                topics=tuple(_create_topic_result(t) for t in body.topics),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DELETE_TOPICS:
            return DeleteTopicsResponseData(
                topics=tuple(
                    DeleteTopicResult(
                        name=None if r.name is None else TopicName(r.name),
                        topic_id=_topic_id(getattr(r, "topic_id", None)),
                        error_code=_error_code(r.error_code),
                        error_message=getattr(r, "error_message", None),
                    )
                    for r in body.responses
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DESCRIBE_CONFIGS:
            return DescribeConfigsResponseData(
                results=tuple(
                    DescribeConfigsResult(
                        resource_type=int(r.resource_type),
                        resource_name=r.resource_name,
                        error_code=_error_code(r.error_code),
                        error_message=r.error_message,
                        configs=tuple(_config_entry(c) for c in r.configs),
                    )
                    for r in body.results
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.CREATE_PARTITIONS:
            return CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(
                        name=TopicName(r.name),
                        error_code=_error_code(r.error_code),
                        error_message=getattr(r, "error_message", None),
                    )
                    for r in body.results
                ),
                throttle_time_ms=throttle,
            )
        case ClientApiKey.DESCRIBE_CLUSTER:
            return DescribeClusterResponseData(
                cluster_id=body.cluster_id,
                controller_id=BrokerId(int(body.controller_id)),
                brokers=tuple(
                    BrokerEndpoint(
                        broker_id=BrokerId(int(b.broker_id)),
                        host=b.host,
                        port=int(b.port),
                        rack=b.rack,
                    )
                    for b in body.brokers
                ),
                error_code=_error_code(body.error_code),
                error_message=body.error_message,
                endpoint_type=int(getattr(body, "endpoint_type", 1)),
                cluster_authorized_operations=int(body.cluster_authorized_operations),
                throttle_time_ms=throttle,
            )
    raise ValueError(f"API {api_key} has no plain response values")


def _broker_endpoint(broker: Any) -> BrokerEndpoint:
    return BrokerEndpoint(
        broker_id=BrokerId(int(broker.node_id)),
        host=broker.host,
        port=int(broker.port),
        rack=getattr(broker, "rack", None),
    )


def _topic_metadata(topic: Any) -> TopicMetadata:
    return TopicMetadata(
        name=TopicName(topic.name or ""),
        topic_id=_topic_id(getattr(topic, "topic_id", None)),
        error_code=_error_code(topic.error_code),
        is_internal=bool(getattr(topic, "is_internal", False)),
        partitions=tuple(
            PartitionMetadata(
                partition=int(p.partition_index),
                leader=BrokerId(int(p.leader_id)),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=_broker_ids(p.replica_nodes),
                isr=_broker_ids(p.isr_nodes),
                offline_replicas=_broker_ids(getattr(p, "offline_replicas", ())),
                error_code=_error_code(p.error_code),
            )
            for p in topic.partitions
        ),
        authorized_operations=int(
            getattr(topic, "topic_authorized_operations", NO_AUTHORIZED_OPERATIONS)
        ),
    )


def _create_topic_result(result: Any) -> CreateTopicResult:
    configs = getattr(result, "configs", None)
    return CreateTopicResult(
        name=TopicName(result.name),
        error_code=_error_code(result.error_code),
        error_message=getattr(result, "error_message", None),
        topic_id=_topic_id(getattr(result, "topic_id", None)),
        num_partitions=int(getattr(result, "num_partitions", -1)),
        replication_factor=int(getattr(result, "replication_factor", -1)),
        configs=(
            None
            if configs is None
            else tuple(
                ConfigEntry(
                    name=c.name,
                    value=c.value,
                    read_only=bool(c.read_only),
                    source=_config_source(getattr(c, "config_source", -1)),
                    is_sensitive=bool(c.is_sensitive),
                )
                for c in configs
            )
        ),
    )


def _config_source(value: Any) -> ConfigSource:
    try:
        return ConfigSource(int(value))
    except ValueError:
        return ConfigSource.UNKNOWN


def _config_entry(entry: Any) -> ConfigEntry:
    """One DescribeConfigs entry. Before v1 there was no source, only ``is_default``."""
    if hasattr(entry, "config_source"):
        source = _config_source(entry.config_source)
    elif getattr(entry, "is_default", False):
        source = ConfigSource.DEFAULT_CONFIG
    else:
        source = ConfigSource.UNKNOWN
    try:
        value_type = ConfigValueType(int(getattr(entry, "config_type", 0)))
    except ValueError:
        value_type = ConfigValueType.UNKNOWN
    return ConfigEntry(
        name=entry.name,
        value=entry.value,
        read_only=bool(entry.read_only),
        source=source,
        is_sensitive=bool(entry.is_sensitive),
        synonyms=tuple(
            ConfigSynonym(name=s.name, value=s.value, source=_config_source(s.source))
            for s in getattr(entry, "synonyms", ())
        ),
        value_type=value_type,
        documentation=getattr(entry, "documentation", None),
    )


# ---------------------------------------------------------------------- the listener


class _Slot:
    """One request's place in its connection's response order. ``frame`` stays ``None``
    when the connection must close instead of answering (``close_reason`` says why)."""

    __slots__ = ("close_reason", "done", "final", "frame")

    def __init__(self, frame: bytes | None = None) -> None:
        self.done = anyio.Event()
        self.frame = frame
        self.close_reason = ""
        self.final = False  # the last slot of its connection: nothing is read after it
        if frame is not None:
            self.done.set()

    @classmethod
    def closing(cls, reason: str) -> _Slot:
        """The end of a connection, after the answers to every request before it."""
        slot = cls()
        slot.close_reason = reason
        slot.final = True
        slot.done.set()
        return slot


class _Connection:
    __slots__ = ("close_reason", "peer", "stream")

    def __init__(self, stream: SocketStream, peer: str) -> None:
        self.stream = stream
        self.peer = peer
        self.close_reason = "closed_by_client"


def _remote(stream: SocketStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)  # noqa: S610 - not Django
    except (OSError, anyio.TypedAttributeLookupError):
        return "?"
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"


async def _receive(stream: SocketStream) -> bytes:
    try:
        return await stream.receive(256 * 1024)
    except anyio.EndOfStream:
        return b""
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc!r}") from exc


async def _send(stream: SocketStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc!r}") from exc


class KafkaWireServer:
    """One broker's Kafka listener. Start it with ``port = await tg.start(server.serve)``;
    cancel that task group to stop it and every connection."""

    def __init__(
        self,
        handler: KafkaApiHandler,
        *,
        node: str,
        host: str = DEFAULT_HOST,
        port: int = 0,
        tracer: Tracer | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Clock | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"not a TCP port: {port}")
        self._handler = handler
        self._node = node
        self._host = host
        self._port = port
        self._tracer = tracer
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max_in_flight
        self._clock = clock or RealClock()
        self._api_versions = advertised_api_versions(handler.supported)
        for key, (low, high) in self._api_versions.items():  # load what we implement now
            if key in handler.supported or key == _API_VERSIONS:
                for version in range(low, high + 1):
                    _request_schema(key, version)
        self._api_versions_bodies: dict[int, bytes] = {}
        # Encoding is pure Python (~15 ms for 1,000 partitions): Metadata answers, asked
        # for again and again with nothing changed, are encoded once per version.
        self._metadata_bodies: OrderedDict[tuple[int, MetadataResponseData], bytes] = OrderedDict()
        self._bound: int | None = None

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """The table this listener advertises."""
        return types.MappingProxyType(self._api_versions)

    @property
    def cached_metadata_responses(self) -> int:
        """How many encoded Metadata bodies the listener keeps (for metrics and tests)."""
        return len(self._metadata_bodies)

    @property
    def port(self) -> int:
        """The bound port, once serving."""
        if self._bound is None:
            raise NetworkError(f"the Kafka listener of {self._node} is not serving")
        return self._bound

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports the bound port when listening."""
        try:
            listener = await anyio.create_tcp_listener(local_host=self._host, local_port=self._port)
        except OSError as exc:
            raise NetworkError(
                f"{self._node} cannot listen on {self._host}:{self._port}: {exc}"
            ) from exc
        port = int(listener.extra(SocketAttribute.local_port))  # noqa: S610 - not Django
        self._bound = port
        try:
            async with listener, anyio.create_task_group() as connections:
                self._trace(TraceKind.EVENT, "kafka_listening", host=self._host, port=port)
                for one in listener.listeners:
                    assert isinstance(one, SocketListener)  # a TCP listener's, one per address
                    connections.start_soon(self._accept_connections, one, connections)
                task_status.started(port)
        finally:
            self._bound = None

    async def _accept_connections(self, listener: SocketListener, connections: TaskGroup) -> None:
        """Accept connections until cancelled. An ``accept()`` that fails (EMFILE when the
        process is out of file descriptors, ENFILE, ENOBUFS, ECONNABORTED) costs nothing
        but a pause of ``ACCEPT_BACKOFF``: as Kafka's ``SocketServer.Acceptor``, the
        listener logs and carries on. A run of failures is logged and traced once when
        it starts (``kafka_accept_failed``) and once when a connection is accepted again
        (``kafka_accept_recovered``, with how many tries failed), not once per try."""
        failures = 0
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if not failures:
                    log.warning("kafka_accept_failed", node=self._node, error=repr(exc))
                    self._trace(TraceKind.ERROR, "kafka_accept_failed", detail=repr(exc))
                failures += 1
                await self._clock.sleep(ACCEPT_BACKOFF)
                continue
            if failures:
                log.warning("kafka_accept_recovered", node=self._node, failures=failures)
                self._trace(TraceKind.EVENT, "kafka_accept_recovered", failures=failures)
                failures = 0
            connections.start_soon(self._serve_connection, stream)

    # -------------------------------------------------------------- one connection

    async def _serve_connection(self, stream: SocketStream) -> None:
        conn = _Connection(stream, _remote(stream))
        self._trace(TraceKind.EVENT, "kafka_connection_opened", peer=conn.peer)
        try:
            async with stream, anyio.create_task_group() as tg:
                send, receive = anyio.create_memory_object_stream[_Slot](self._max_in_flight)
                tg.start_soon(self._write_responses, conn, receive, tg)
                async with send:
                    closing = await self._read_requests(conn, send, tg)
                if not closing:  # the client is gone: its answers have nowhere to go
                    tg.cancel_scope.cancel()
                # else the writer answers what came before the closing request, then closes
        except anyio.get_cancelled_exc_class():
            conn.close_reason = "listener_stopped"
            raise
        except Exception as exc:  # a bug must cost this connection only, not the listener
            conn.close_reason = "failed"
            self._trace(TraceKind.ERROR, "connection_failed", peer=conn.peer, detail=repr(exc))
        finally:
            self._trace(
                TraceKind.EVENT, "kafka_connection_closed", peer=conn.peer, reason=conn.close_reason
            )

    async def _read_requests(
        self, conn: _Connection, send: ObjectSendStream[_Slot], tg: TaskGroup
    ) -> bool:
        """Until the end of the stream (False) or a request that closes the connection
        (True): its closing slot is queued behind the requests before it, which are
        answered first, as Kafka's ``SocketServer.Processor`` sends the responses it has
        before closing a connection."""
        reader = FrameReader(max_bytes=self._max_frame_bytes)
        while True:
            try:
                chunk = await _receive(conn.stream)
            except NetworkError:
                conn.close_reason = "connection_lost"
                return False
            if not chunk:
                if reader.pending:
                    self._bad_frame(conn, f"truncated: closed {reader.pending} bytes into a frame")
                return False
            try:
                frames = reader.feed(chunk)
            except FrameError as exc:
                await send.send(self._bad_frame(conn, str(exc)))
                return True
            for frame in frames:
                slot = self._accept(conn, frame, tg)
                await send.send(slot)
                if slot.final:
                    return True

    def _accept(self, conn: _Connection, frame: bytes, tg: TaskGroup) -> _Slot:
        """Decode one request and give it its slot (a closing one if it ends the
        connection)."""
        try:
            request = decode_request(frame, self._api_versions)
        except FrameError as exc:
            return self._bad_frame(conn, str(exc))
        except UnsupportedApiError as unsupported:
            if (
                unsupported.api_key == _API_VERSIONS
                and unsupported.api_version > self._api_versions[_API_VERSIONS][1]
            ):
                return self._api_versions_too_new(conn, frame)
            self._trace(
                TraceKind.ERROR,
                "unsupported_request",
                corr=unsupported.correlation_id,
                peer=conn.peer,
                api_key=unsupported.api_key,
                api_version=unsupported.api_version,
            )
            return _Slot.closing("unsupported_request")
        if self._tracer is not None and self._tracer.enabled:
            self._trace(
                TraceKind.EVENT,
                "kafka_request",
                corr=request.correlation_id,
                peer=conn.peer,
                api_key=request.api_key,
                api_version=request.api_version,
                client_id=request.client_id,
            )
        if request.api_key == _API_VERSIONS:
            return _Slot(self._api_versions_frame(request.api_version, request.correlation_id))
        slot = _Slot()
        tg.start_soon(self._handle, conn, request, slot)
        return slot

    def _api_versions_too_new(self, conn: _Connection, frame: bytes) -> _Slot:
        try:
            request = _header_only(frame)
        except FrameError as exc:
            return self._bad_frame(conn, str(exc))
        self._trace(
            TraceKind.EVENT,
            "kafka_api_versions_too_new",
            corr=request.correlation_id,
            peer=conn.peer,
            api_version=request.api_version,
            client_id=request.client_id,
        )
        return _Slot(
            self._api_versions_frame(0, request.correlation_id, ErrorCode.UNSUPPORTED_VERSION)
        )

    def _api_versions_frame(
        self, version: int, correlation_id: int, error: ErrorCode = ErrorCode.NONE
    ) -> bytes:
        """ApiVersions bodies are encoded once per version (header v0: the correlation id)."""
        key = version if error is ErrorCode.NONE else -1
        body = self._api_versions_bodies.get(key)
        if body is None:
            cls = _response_schema(_API_VERSIONS, version)
            response = _build(
                cls,
                {
                    "error_code": error,
                    "throttle_time": 0,
                    "api_keys": [
                        {"api_key": k, "min_version": low, "max_version": high}
                        for k, (low, high) in sorted(self._api_versions.items())
                    ],
                },
            )
            buffer = io.BytesIO()
            entity_writer(cls)(buffer, response)
            body = self._api_versions_bodies[key] = buffer.getvalue()
        return _SIZE.pack(4 + len(body)) + _SIZE.pack(correlation_id) + body

    async def _handle(self, conn: _Connection, request: KafkaRequest, slot: _Slot) -> None:
        """Run the handler for one request and fill its slot; never raises (but cancels)."""
        try:
            response = await self._handler.handle(request)
        except NodeStoppedError:
            # The broker went down while the request waited: its connections drop, as a
            # stopped Kafka broker's do, and the client retries elsewhere.
            slot.close_reason = "broker_stopped"
            slot.done.set()
            return
        except Exception as exc:  # the handler's bug: answer as Kafka would, and trace it
            self._trace(
                TraceKind.ERROR,
                "handler_failed",
                corr=request.correlation_id,
                peer=conn.peer,
                api_key=request.api_key,
                detail=repr(exc),
            )
            response = error_response(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if response is None:
            self._trace(
                TraceKind.EVENT,
                "kafka_unimplemented_api",
                corr=request.correlation_id,
                peer=conn.peer,
                api_key=request.api_key,
                api_version=request.api_version,
            )
            response = error_response(request, ErrorCode.UNSUPPORTED_VERSION)
        if response is None:
            slot.close_reason = "unanswerable_request"
            self._trace(
                TraceKind.ERROR,
                "unanswerable_request",
                corr=request.correlation_id,
                peer=conn.peer,
                api_key=request.api_key,
                api_version=request.api_version,
            )
        else:
            try:
                slot.frame = self._encode(request, response)
            except Exception as exc:  # a response the codec refuses: a handler bug
                slot.close_reason = "bad_response"
                self._trace(
                    TraceKind.ERROR,
                    "bad_response",
                    corr=request.correlation_id,
                    peer=conn.peer,
                    api_key=request.api_key,
                    detail=repr(exc),
                )
        slot.done.set()

    def _encode(self, request: KafkaRequest, response: Any) -> bytes:
        if not isinstance(response, KafkaApiResponseData):
            return encode_response(request, response)
        if not isinstance(response, MetadataResponseData):
            return encode_response(request, build_response(request, response))
        key = (request.api_version, response)
        body = self._metadata_bodies.get(key)
        if body is None:
            body = _encode_body(build_response(request, response))
            self._metadata_bodies[key] = body
            if len(self._metadata_bodies) > METADATA_CACHE_SIZE:
                self._metadata_bodies.popitem(last=False)
        else:
            self._metadata_bodies.move_to_end(key)
        return _frame(request, body)

    async def _write_responses(
        self, conn: _Connection, receive: ObjectReceiveStream[_Slot], tg: TaskGroup
    ) -> None:
        """Write responses in request order; close the connection when one cannot be."""
        async with receive:
            async for slot in receive:
                await slot.done.wait()
                if slot.frame is None:
                    conn.close_reason = slot.close_reason
                    tg.cancel_scope.cancel()
                    return
                try:
                    await _send(conn.stream, slot.frame)
                except NetworkError:
                    conn.close_reason = "connection_lost"
                    tg.cancel_scope.cancel()
                    return

    # -------------------------------------------------------------- tracing

    def _bad_frame(self, conn: _Connection, detail: str) -> _Slot:
        """Trace a frame that closes its connection; the slot that closes it."""
        conn.close_reason = "bad_frame"
        self._trace(TraceKind.ERROR, "bad_frame", peer=conn.peer, detail=detail)
        return _Slot.closing("bad_frame")

    def _trace(self, kind: TraceKind, type: str, corr: int | None = None, **fields: Any) -> None:
        if self._tracer is not None:
            self._tracer.emit(
                kind, node=self._node, actor="kafka_listener", type=type, corr=corr, **fields
            )
