"""A minimal Kafka admin client over the wire: what ``kemu topics --bootstrap-server``
needs, behaving as Kafka 2.7's ``KafkaAdminClient`` does where the CLI can tell.

* It connects to a bootstrap server, asks ApiVersions on every connection and sends each
  API at the highest version both sides know, capped at what a 2.7 client sends (Metadata
  v9, CreateTopics v6, DeleteTopics v5, DescribeConfigs v3, CreatePartitions v3). An API
  the broker does not advertise fails with "The broker does not support <API>".
* Metadata (with no topics) tells it the brokers and the controller. CreateTopics,
  CreatePartitions and DeleteTopics go to the controller; an answer with NOT_CONTROLLER
  makes it forget the controller, refresh the metadata and retry the whole call.
  Metadata and DescribeConfigs go to any broker.
* Every call has a deadline (``default.api.timeout.ms``), every request a timeout
  (``request.timeout.ms``). Connection failures and a missing controller are retried with
  ``retry.backoff.ms`` between tries until the deadline; after a connection failure the
  controller is looked up again (it may be the broker that went away).
* Errors are kemu's: ``KafkaApiError(code, message)`` with the broker's message or, when
  it sent none, the default message of the code (Kafka's ``Errors``);
  ``KafkaTimeoutError``, ``UnsupportedVersionError`` and ``ClientConfigError``. Socket
  errors are translated here and go no further.

Requests go one at a time per connection, so no task outlives a call: a call is a plain
coroutine. ``--command-config`` files are read by ``load_properties`` (Java properties).
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self, TypeVar

import anyio
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.log.records import CompressionType
from actors.runtime.clock import Clock, RealClock
from cluster.kafka.apis.api_versions import (
    codec_api_versions,
    decode_api_versions_response,
    encode_api_versions_request,
)
from cluster.kafka.apis.registry import CODECS, api_key_of, decode_response, encode_request
from cluster.kafka.records import ProducerRecord, encode_batch, split_records
from protocol.errors import ErrorCode, FrameError, KafkaApiError, KemuError
from protocol.group import (
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
    ListedGroup,
    ListGroupsRequestData,
    ListGroupsResponseData,
)
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterConfigsResponseData,
    AlterConfigsResult,
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    BrokerEndpoint,
    ClientApiKey,
    ConfigResource,
    ConfigResourceType,
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
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    DescribeLogDirsRequestData,
    DescribeLogDirsResponseData,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ElectLeadersTopic,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
    KafkaApiRequestData,
    KafkaApiResponseData,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
    ListReassignmentsTopic,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    ReassignablePartition,
    ReassignableTopic,
    TopicErrorResult,
    TopicMetadata,
)
from protocol.kafka_data import (
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)

__all__ = [
    "CLIENT_MAX_VERSIONS",
    "ERROR_MESSAGES",
    "JAVA_EXCEPTIONS",
    "RETRIABLE_PARTITION_ERRORS",
    "AdminClientConfig",
    "ClientConfigError",
    "ClusterView",
    "DeliveryTimeoutError",
    "KafkaAdminClient",
    "KafkaClientError",
    "KafkaDataClient",
    "KafkaTimeoutError",
    "SendResult",
    "UnsupportedVersionError",
    "api_error",
    "exception_class",
    "int_config",
    "java_exception",
    "load_properties",
    "long_config",
    "node_api_versions",
    "node_metadata",
    "parse_bootstrap_servers",
]

CLIENT_MAX_VERSIONS: Final[Mapping[ClientApiKey, int]] = {
    ClientApiKey.API_VERSIONS: 3,
    **{codec.api_key: codec.client_version for codec in CODECS.values()},
}
"""The newest version of each API a Kafka 2.7 admin client sends (the table's
``client_version``, and ApiVersions v3)."""

ERROR_MESSAGES: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: (
        "The server experienced an unexpected error when processing the request."
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.LEADER_NOT_AVAILABLE: (
        "There is no leader for this topic-partition as we are in the middle of a leadership"
        " election."
    ),
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    ErrorCode.BROKER_NOT_AVAILABLE: "The broker is not available.",
    ErrorCode.STALE_CONTROLLER_EPOCH: "The controller moved to another broker.",
    ErrorCode.NETWORK_EXCEPTION: "The server disconnected before a response was received.",
    ErrorCode.INVALID_TOPIC_EXCEPTION: (
        "The request attempted to perform an operation on an invalid topic."
    ),
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    ErrorCode.INVALID_PARTITIONS: "Number of partitions is below 1.",
    ErrorCode.INVALID_REPLICATION_FACTOR: (
        "Replication factor is below 1 or larger than the number of available brokers."
    ),
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    ErrorCode.INVALID_CONFIG: "Configuration is invalid.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library"
        " or the message was sent to an incompatible broker. See the broker logs for more"
        " details."
    ),
    ErrorCode.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: (
        "Eligible topic partition leaders are not available."
    ),
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    ErrorCode.OFFSET_OUT_OF_RANGE: (
        "The requested offset is not within the range of offsets maintained by the server."
    ),
    ErrorCode.CORRUPT_MESSAGE: (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for"
        " a compacted topic, or is otherwise corrupt."
    ),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "For requests intended only for the leader, this error indicates that the broker is"
        " not the current leader. For requests intended for any replica, this error indicates"
        " that the broker is not a replica of the topic partition."
    ),
    ErrorCode.MESSAGE_TOO_LARGE: (
        "The request included a message larger than the max message size the server will accept."
    ),
    ErrorCode.RECORD_LIST_TOO_LARGE: (
        "The request included message batch larger than the configured segment size on the server."
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS: (
        "Messages are rejected since there are fewer in-sync replicas than required."
    ),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: (
        "Messages are written to the log, but to fewer in-sync replicas than required."
    ),
    ErrorCode.INVALID_REQUIRED_ACKS: (
        "Produce request specified an invalid value for required acks."
    ),
    ErrorCode.INVALID_RECORD: (
        "This record has failed the validation on broker and hence will be rejected."
    ),
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: "The broker received an out of order sequence number.",
    ErrorCode.INVALID_TIMESTAMP: "The timestamp of the message is out of acceptable range.",
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: (
        "The message format version on the broker does not support the request."
    ),
    ErrorCode.INVALID_PRODUCER_EPOCH: "Producer attempted to produce with an old epoch.",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: (
        "The requesting client does not support the compression type of given partition."
    ),
}
"""Kafka's default message of each error code a topic or console command can meet
(``Errors.java``): what the exception says when the broker sent no message."""

_ERRORS: Final = "org.apache.kafka.common.errors."
JAVA_EXCEPTIONS: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: _ERRORS + "UnknownServerException",
    ErrorCode.CORRUPT_MESSAGE: _ERRORS + "CorruptRecordException",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: _ERRORS + "UnknownTopicOrPartitionException",
    ErrorCode.LEADER_NOT_AVAILABLE: _ERRORS + "LeaderNotAvailableException",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: _ERRORS + "NotLeaderOrFollowerException",
    ErrorCode.REQUEST_TIMED_OUT: _ERRORS + "TimeoutException",
    ErrorCode.MESSAGE_TOO_LARGE: _ERRORS + "RecordTooLargeException",
    ErrorCode.NETWORK_EXCEPTION: _ERRORS + "NetworkException",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: _ERRORS + "CoordinatorLoadInProgressException",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _ERRORS + "CoordinatorNotAvailableException",
    ErrorCode.NOT_COORDINATOR: _ERRORS + "NotCoordinatorException",
    ErrorCode.INVALID_TOPIC_EXCEPTION: _ERRORS + "InvalidTopicException",
    ErrorCode.RECORD_LIST_TOO_LARGE: _ERRORS + "RecordBatchTooLargeException",
    ErrorCode.NOT_ENOUGH_REPLICAS: _ERRORS + "NotEnoughReplicasException",
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _ERRORS + "NotEnoughReplicasAfterAppendException",
    ErrorCode.INVALID_REQUIRED_ACKS: _ERRORS + "InvalidRequiredAcksException",
    ErrorCode.ILLEGAL_GENERATION: _ERRORS + "IllegalGenerationException",
    ErrorCode.INVALID_GROUP_ID: _ERRORS + "InvalidGroupIdException",
    ErrorCode.UNKNOWN_MEMBER_ID: _ERRORS + "UnknownMemberIdException",
    ErrorCode.REBALANCE_IN_PROGRESS: _ERRORS + "RebalanceInProgressException",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: _ERRORS + "TopicAuthorizationException",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: _ERRORS + "GroupAuthorizationException",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: _ERRORS + "ClusterAuthorizationException",
    ErrorCode.INVALID_TIMESTAMP: _ERRORS + "InvalidTimestampException",
    ErrorCode.UNSUPPORTED_VERSION: _ERRORS + "UnsupportedVersionException",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: _ERRORS + "InvalidReplicaAssignmentException",
    ErrorCode.INVALID_CONFIG: _ERRORS + "InvalidConfigurationException",
    ErrorCode.NOT_CONTROLLER: _ERRORS + "NotControllerException",
    ErrorCode.INVALID_REQUEST: _ERRORS + "InvalidRequestException",
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: _ERRORS + "UnsupportedForMessageFormatException",
    ErrorCode.POLICY_VIOLATION: _ERRORS + "PolicyViolationException",
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: _ERRORS + "OutOfOrderSequenceException",
    ErrorCode.INVALID_PRODUCER_EPOCH: _ERRORS + "InvalidProducerEpochException",
    ErrorCode.KAFKA_STORAGE_ERROR: _ERRORS + "KafkaStorageException",
    ErrorCode.NON_EMPTY_GROUP: _ERRORS + "GroupNotEmptyException",
    ErrorCode.GROUP_ID_NOT_FOUND: _ERRORS + "GroupIdNotFoundException",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: _ERRORS + "UnsupportedCompressionTypeException",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: _ERRORS + "PreferredLeaderNotAvailableException",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: _ERRORS + "EligibleLeadersNotAvailableException",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: _ERRORS + "NoReassignmentInProgressException",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: _ERRORS + "GroupSubscribedToTopicException",
    ErrorCode.INVALID_RECORD: "org.apache.kafka.common.InvalidRecordException",
}
"""The class of the exception ``Errors.exception`` makes of each error code a kemu tool
can meet (Kafka 2.7's ``Errors.java``; ``InvalidRecordException`` moved out of
``errors`` in 2.6): the one table the tools print Java's exceptions from."""


def exception_class(code: ErrorCode, default: str = _ERRORS + "UnknownServerException") -> str:
    """The class of ``code``'s exception (``default`` for a code not in the table)."""
    return JAVA_EXCEPTIONS.get(code, default)


def java_exception(code: ErrorCode, message: str | None) -> str:
    """The exception's ``toString`` (``Errors.exception(message)``): its class, and the
    broker's message, or the error's own when the response carries none (None)."""
    text = message if message is not None else ERROR_MESSAGES.get(code)
    return exception_class(code) + (f": {text}" if text else "")


def produce_exception(code: ErrorCode, message: str | None) -> str:
    """What Java prints of the exception a 2.7 producer fails a send with
    (``Sender.completeBatch``: ``error.exception(response.errorMessage)``): its class and
    the broker's ``error_message`` (Produce v8), else the error's default message."""
    return f"{exception_class(code)}: {message or ERROR_MESSAGES.get(code, code.name)}"


DEFAULT_CLIENT_ID: Final = "adminclient-1"
_SIZE = struct.Struct(">i")
_MAX_RESPONSE_BYTES: Final = 100 * 1024 * 1024


class KafkaClientError(KemuError):
    """The admin client could not complete a call (besides an error the broker answered)."""


class KafkaTimeoutError(KafkaClientError):
    """A call did not complete before its deadline (Kafka's ``TimeoutException``)."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A producer batch's ``delivery.timeout.ms`` passed before it was answered
    (``Sender.sendProducerData``'s expired batches)."""


class UnsupportedVersionError(KafkaClientError):
    """The broker does not advertise an API, or no version both sides know."""


class ClientConfigError(KafkaClientError):
    """A client config (``--command-config``, bootstrap servers) is not valid."""


def api_error(code: ErrorCode, message: str | None) -> KafkaApiError:
    """The exception of an error answered by a broker, with Kafka's default message when
    the broker sent none."""
    return KafkaApiError(code, message or ERROR_MESSAGES.get(code, code.name))


# --------------------------------------------------------------------------- configs


_PROPERTY_SEPARATOR = re.compile(r"(?<!\\)[=:\s]")


def load_properties(path: Path) -> dict[str, str]:
    """A Java properties file (``Properties.load``): ``key=value``, ``key:value`` or
    ``key value``; ``#``/``!`` comments; a trailing backslash continues a line; ``\\``
    escapes, ``\\uXXXX`` included. Raises ``ClientConfigError`` if it cannot be read."""
    try:
        text = path.read_text(encoding="latin-1")
    except OSError as exc:
        raise ClientConfigError(f"{path} ({exc.strerror or exc})") from None
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        match = _PROPERTY_SEPARATOR.search(line)
        if match is None:
            key, value = line, ""
        else:
            key, rest = line[: match.start()], line[match.end() :]
            rest = rest.lstrip(" \t\f")
            if match.group() not in "=:" and rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip(" \t\f")
            value = rest
        props[_unescape(key)] = _unescape(value)
    return props


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        if backslashes % 2:
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_bootstrap_servers(servers: str) -> tuple[tuple[str, int], ...]:
    """``HOST:PORT[,HOST:PORT...]`` as Kafka's ``ClientUtils.parseAndValidateAddresses``
    reads it (blank entries skipped, ``[v6]:port`` allowed)."""
    out: list[tuple[str, int]] = []
    for entry in servers.split(","):
        url = entry.strip()
        if not url:
            continue
        match = re.fullmatch(r"\[?([0-9a-zA-Z\-%._:]*?)]?:([0-9]+)", url)
        if match is None or not match.group(1):
            raise ClientConfigError(f"Invalid url in bootstrap.servers: {url}")
        out.append((match.group(1), int(match.group(2))))
    if not out:
        raise ClientConfigError("No resolvable bootstrap urls given in bootstrap.servers")
    return tuple(out)


def int_config(props: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    """An INT client config (``ConfigDef``'s parsing): ``default`` when absent;
    ``ClientConfigError`` with Kafka's ``ConfigException`` message when not a number or
    below ``minimum``."""
    return _number_config(props, name, default, minimum=minimum, bits=32)


def long_config(props: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    """A LONG client config (``max.block.ms``), as ``int_config`` for 64 bits."""
    return _number_config(props, name, default, minimum=minimum, bits=64)


def _number_config(
    props: Mapping[str, str], name: str, default: int, *, minimum: int, bits: int
) -> int:
    raw = props.get(name)
    if raw is None:
        return default
    text = raw.strip()
    limit = 2 ** (bits - 1)
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -limit <= int(text) < limit:
        kind = "INT" if bits == 32 else "LONG"
        raise ClientConfigError(
            f"Invalid value {raw} for configuration {name}: Not a number of type {kind}"
        )
    if int(text) < minimum:
        raise ClientConfigError(
            f"Invalid value {text} for configuration {name}: Value must be at least {minimum}"
        )
    return int(text)


@dataclass(frozen=True, slots=True)
class AdminClientConfig:
    """The admin client configs kemu honours (Kafka's names and defaults); anything else a
    ``--command-config`` file holds (``client.id`` aside) is accepted and ignored."""

    client_id: str = DEFAULT_CLIENT_ID
    request_timeout_ms: int = 30_000
    default_api_timeout_ms: int = 60_000
    retry_backoff_ms: int = 100

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AdminClientConfig:
        """Raises ``ClientConfigError`` with Kafka's ``ConfigException`` message."""
        return cls(
            client_id=props.get("client.id", "").strip() or DEFAULT_CLIENT_ID,
            request_timeout_ms=int_config(props, "request.timeout.ms", 30_000, minimum=0),
            default_api_timeout_ms=int_config(props, "default.api.timeout.ms", 60_000, minimum=0),
            retry_backoff_ms=int_config(props, "retry.backoff.ms", 100, minimum=0),
        )


# --------------------------------------------------------------------------- connections


class _ConnectionError(KafkaClientError):
    """A connection failed or broke: retriable on another try."""


class _Connection:
    """One broker connection: requests one at a time, in order."""

    def __init__(self, address: tuple[str, int], stream: SocketStream, client_id: str) -> None:
        self.address = address
        self._stream = stream
        self._reader = BufferedByteReceiveStream(stream)
        self._client_id = client_id
        self._correlation = 0
        self._lock = anyio.Lock()
        self.api_versions: Mapping[int, tuple[int, int]] = {}

    @classmethod
    async def open(cls, address: tuple[str, int], client_id: str) -> _Connection:
        host, port = address
        try:
            stream = await anyio.connect_tcp(host, port)
        except OSError as exc:
            raise _ConnectionError(f"cannot connect to {host}:{port}: {exc}") from None
        connection = cls(address, stream, client_id)
        try:
            await connection._negotiate()
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()

    async def _negotiate(self) -> None:
        version = CLIENT_MAX_VERSIONS[ClientApiKey.API_VERSIONS]
        frame = await self._exchange(
            lambda corr: encode_api_versions_request(
                api_version=version, correlation_id=corr, client_id=self._client_id
            )
        )
        answer = decode_api_versions_response(version, frame)
        if answer.error_code is ErrorCode.UNSUPPORTED_VERSION:  # an older broker: v0
            version = 0
            frame = await self._exchange(
                lambda corr: encode_api_versions_request(
                    api_version=version, correlation_id=corr, client_id=self._client_id
                )
            )
            answer = decode_api_versions_response(version, frame)
        if answer.error_code is not ErrorCode.NONE:
            raise api_error(answer.error_code, None)
        self.api_versions = answer.api_versions

    def version_for(self, api_key: ClientApiKey) -> int:
        """The highest version of ``api_key`` the broker, the codec and a 2.7 client share
        (``NodeApiVersions.latestUsableVersion``, with its messages)."""
        broker = self.api_versions.get(int(api_key))
        codec = codec_api_versions(int(api_key))
        if broker is None or codec is None:
            raise UnsupportedVersionError(f"The broker does not support {api_key.name}")
        allowed = (codec[0], min(codec[1], CLIENT_MAX_VERSIONS[api_key]))
        low, high = max(allowed[0], broker[0]), min(allowed[1], broker[1])
        if low > high:
            raise UnsupportedVersionError(
                f"The broker does not support {api_key.name} with version in range"
                f" [{allowed[0]},{allowed[1]}]. The supported range is [{broker[0]},{broker[1]}]."
            )
        return high

    async def request(self, data: KafkaApiRequestData) -> KafkaApiResponseData:
        api_key = api_key_of(data)
        version = self.version_for(api_key)
        frame = await self._exchange(
            lambda corr: encode_request(
                data, api_version=version, correlation_id=corr, client_id=self._client_id
            )
        )
        try:
            correlation_id, response = decode_response(int(api_key), version, frame)
        except FrameError as exc:
            raise _ConnectionError(f"bad response from {self._name}: {exc}") from None
        del correlation_id  # checked by _exchange
        return response

    async def send_only(self, data: KafkaApiRequestData) -> None:
        """Send a request the broker does not answer (Produce with acks=0)."""
        version = self.version_for(api_key_of(data))
        async with self._lock:
            self._correlation += 1
            frame = encode_request(
                data,
                api_version=version,
                correlation_id=self._correlation,
                client_id=self._client_id,
            )
            try:
                await self._stream.send(frame)
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise _ConnectionError(f"connection to {self._name} lost: {exc!r}") from None

    @property
    def _name(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    async def _exchange(self, encode: Callable[[int], bytes]) -> bytes:
        """Send one request, return its response frame (without the size prefix)."""
        async with self._lock:
            self._correlation += 1
            correlation_id = self._correlation
            try:
                await self._stream.send(encode(correlation_id))
                size = _SIZE.unpack(await self._reader.receive_exactly(_SIZE.size))[0]
                if not 4 <= size <= _MAX_RESPONSE_BYTES:
                    raise _ConnectionError(f"{self._name} sent a frame of {size} bytes")
                frame = await self._reader.receive_exactly(size)
            except (
                OSError,
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,  # closed by a caller whose request timed out
            ) as exc:
                raise _ConnectionError(f"connection to {self._name} lost: {exc!r}") from None
            except anyio.IncompleteRead:
                raise _ConnectionError(f"{self._name} closed the connection") from None
            (answered,) = _SIZE.unpack_from(frame)
            if answered != correlation_id:
                raise _ConnectionError(
                    f"{self._name} answered correlation id {answered}, expected {correlation_id}"
                )
            return frame


async def node_api_versions(
    address: tuple[str, int], config: AdminClientConfig
) -> Mapping[int, tuple[int, int]]:
    """The ApiVersions table of one broker, read on a connection of its own within
    ``request.timeout.ms`` (``BrokerApiVersionsCommand``'s ``getApiVersions``). Raises
    ``KafkaClientError`` (the broker unreachable, silent, or answering an error)."""
    with anyio.move_on_after(config.request_timeout_ms / 1000):
        connection = await _Connection.open(address, config.client_id)
        await connection.aclose()
        return connection.api_versions
    raise KafkaTimeoutError(f"no answer from {address[0]}:{address[1]} in time")


async def node_metadata(
    address: tuple[str, int], config: AdminClientConfig
) -> MetadataResponseData:
    """Metadata for every topic from one broker, one try within ``request.timeout.ms``
    (``BrokerApiVersionsCommand``'s ``sendAnyNode``, for one node). Raises
    ``KafkaClientError`` as ``node_api_versions``."""
    with anyio.move_on_after(config.request_timeout_ms / 1000):
        connection = await _Connection.open(address, config.client_id)
        try:
            response = await connection.request(MetadataRequestData(topics=None))
        finally:
            await connection.aclose()
        if not isinstance(response, MetadataResponseData):
            raise KafkaClientError(f"unexpected answer to Metadata: {type(response).__name__}")
        return response
    raise KafkaTimeoutError(f"no answer from {address[0]}:{address[1]} in time")


# --------------------------------------------------------------------------- the client


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What Metadata says about the cluster: its live brokers and the controller."""

    cluster_id: str
    controller_id: BrokerId
    brokers: tuple[BrokerEndpoint, ...]


R = TypeVar("R", bound=KafkaApiResponseData)


class _Retry(Exception):
    """This try failed in a way the next one may not: back off and go again."""


class KafkaAdminClient:
    """Use as ``async with KafkaAdminClient(servers, config) as client: ...``."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[tuple[str, int]],
        config: AdminClientConfig | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._bootstrap = (
            parse_bootstrap_servers(bootstrap_servers)
            if isinstance(bootstrap_servers, str)
            else tuple(bootstrap_servers)
        )
        if not self._bootstrap:
            raise ClientConfigError("No resolvable bootstrap urls given in bootstrap.servers")
        self.config = config or AdminClientConfig()
        self._clock = clock or RealClock()
        self._connections: dict[tuple[str, int], _Connection] = {}
        self._coordinator_connections: dict[tuple[str, int], _Connection] = {}
        """A group coordinator's own connections (``request_broker(coordinator=True)``)."""
        self._brokers: dict[BrokerId, tuple[str, int]] = {}
        self._controller: BrokerId | None = None
        self._next_bootstrap = 0

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        connections = [*self._connections.values(), *self._coordinator_connections.values()]
        self._connections, self._coordinator_connections = {}, {}
        for connection in connections:
            await connection.aclose()

    # ------------------------------------------------------------------ the calls

    async def metadata(
        self, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = False
    ) -> MetadataResponseData:
        """Metadata for ``topics`` (None: every topic; empty: brokers only)."""
        request = MetadataRequestData(
            topics=None if topics is None else tuple(TopicName(t) for t in topics),
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        return await self._call("metadata", request, MetadataResponseData, controller=False)

    async def list_topics(self, *, include_internal: bool) -> tuple[TopicName, ...]:
        """``listTopics``: every topic's name (internal ones only if asked)."""
        response = await self._call(
            "listTopics", MetadataRequestData(topics=None), MetadataResponseData, controller=False
        )
        return tuple(
            t.name
            for t in response.topics
            if t.error_code is ErrorCode.NONE and (include_internal or not t.is_internal)
        )

    async def describe_cluster(self) -> ClusterView:
        """``describeCluster`` as 2.7 does it: a Metadata request for no topics."""
        response = await self._call(
            "describeCluster",
            MetadataRequestData(topics=()),
            MetadataResponseData,
            controller=False,
        )
        return ClusterView(response.cluster_id, response.controller_id, response.brokers)

    async def describe_log_dirs(
        self, broker_ids: Sequence[int]
    ) -> dict[BrokerId, DescribeLogDirsResponseData]:
        """``describeLogDirs``: each broker's DescribeLogDirs for every partition, asked
        of the broker itself. Raises ``KafkaClientError`` for a broker the cluster does not
        have (where Kafka's client waits out its timeout for a node assignment)."""
        view = await self.describe_cluster()
        addresses = {b.broker_id: (b.host, b.port) for b in view.brokers}
        missing = [b for b in broker_ids if BrokerId(b) not in addresses]
        if missing:
            known = ",".join(str(b) for b in sorted(addresses))
            raise KafkaClientError(
                f"No broker {','.join(map(str, missing))} in the cluster (brokers {known})"
            )
        answers: dict[BrokerId, DescribeLogDirsResponseData] = {}
        for broker_id in broker_ids:
            response = await self.request_broker(
                addresses[BrokerId(broker_id)],
                DescribeLogDirsRequestData(topics=None),
                timeout=self.config.request_timeout_ms / 1000,
            )
            if not isinstance(response, DescribeLogDirsResponseData):
                raise KafkaClientError(
                    f"unexpected answer to DescribeLogDirs: {type(response).__name__}"
                )
            answers[BrokerId(broker_id)] = response
        return answers

    async def describe_topics(self, names: Sequence[str]) -> dict[TopicName, TopicMetadata]:
        """``describeTopics``: each topic's metadata; a topic answered with an error raises
        ``KafkaApiError`` (the first in the answer's order)."""
        if not names:
            return {}
        request = MetadataRequestData(
            topics=tuple(TopicName(n) for n in names),
            allow_auto_topic_creation=False,
        )
        response = await self._call(
            "describeTopics", request, MetadataResponseData, controller=False
        )
        found: dict[TopicName, TopicMetadata] = {}
        for topic in response.topics:
            if topic.error_code is not ErrorCode.NONE:
                raise api_error(topic.error_code, None)
            found[topic.name] = topic
        for name in names:
            if name not in found:
                raise api_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        return found

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, include_synonyms: bool = False
    ) -> dict[tuple[int, str], DescribeConfigsResult]:
        """``describeConfigs``: the result of each resource, errors included. As Kafka's
        admin client, a broker's own resource (a broker id) goes to that broker in a
        request of its own; the rest go together to any broker."""
        own = [
            r for r in resources if r.resource_type == ConfigResourceType.BROKER and r.resource_name
        ]
        shared = [r for r in resources if r not in own]
        results: dict[tuple[int, str], DescribeConfigsResult] = {}
        if shared:
            response = await self._call(
                "describeConfigs",
                DescribeConfigsRequestData(
                    resources=tuple(shared), include_synonyms=include_synonyms
                ),
                DescribeConfigsResponseData,
                controller=False,
            )
            results.update({(r.resource_type, r.resource_name): r for r in response.results})
        for resource in own:
            answer = await self._to_broker(
                resource.resource_name,
                "describeConfigs",
                DescribeConfigsRequestData(
                    resources=(resource,), include_synonyms=include_synonyms
                ),
            )
            if not isinstance(answer, DescribeConfigsResponseData):
                raise KafkaClientError(
                    f"unexpected answer to DescribeConfigs: {type(answer).__name__}"
                )
            results.update({(r.resource_type, r.resource_name): r for r in answer.results})
        return results

    async def _to_broker(self, broker: str, call: str, request: KafkaApiRequestData) -> object:
        """``request`` to the broker whose id is ``broker`` (``dependsOnSpecificNode``); a
        broker the cluster does not have fails the call at once (where Kafka's client
        waits out its timeout for a node assignment)."""
        view = await self.describe_cluster()
        addresses = {str(b.broker_id): (b.host, b.port) for b in view.brokers}
        address = addresses.get(broker)
        if address is None:
            raise KafkaTimeoutError(f"Timed out waiting for a node assignment. Call: {call}")
        return await self.request_broker(
            address, request, timeout=self.config.request_timeout_ms / 1000
        )

    async def incremental_alter_configs(
        self, resources: Sequence[AlterConfigsResource]
    ) -> dict[tuple[int, str], AlterConfigsResult]:
        """``incrementalAlterConfigs``: the result of each resource, errors included. As
        Kafka's admin client (``dependsOnSpecificNode``), a broker's own resource (a broker
        id, or a broker logger) goes to that broker, each in a request of its own; the rest
        go together to any broker. A broker the cluster does not have fails the call at
        once (where Kafka's client waits out its timeout for a node assignment)."""
        return await self._alter(resources, incremental=True)

    async def alter_configs(
        self, resources: Sequence[AlterConfigsResource]
    ) -> dict[tuple[int, str], AlterConfigsResult]:
        """``alterConfigs`` (the legacy API: each resource's whole new set), routed as
        ``incremental_alter_configs``; the operations of ``resources`` are not sent."""
        return await self._alter(resources, incremental=False)

    async def _alter(
        self, resources: Sequence[AlterConfigsResource], *, incremental: bool
    ) -> dict[tuple[int, str], AlterConfigsResult]:
        call = "incrementalAlterConfigs" if incremental else "alterConfigs"

        def request(chosen: Sequence[AlterConfigsResource]) -> KafkaApiRequestData:
            if incremental:
                return IncrementalAlterConfigsRequestData(resources=tuple(chosen))
            return AlterConfigsRequestData(resources=tuple(chosen))

        own = [r for r in resources if _depends_on_specific_node(r)]
        shared = [r for r in resources if not _depends_on_specific_node(r)]
        answers: list[object] = []
        if shared:
            answers.append(
                await self._call(
                    call,
                    request(shared),
                    IncrementalAlterConfigsResponseData
                    if incremental
                    else AlterConfigsResponseData,
                    controller=False,
                )
            )
        for resource in own:
            answers.append(await self._to_broker(resource.resource_name, call, request([resource])))
        results: dict[tuple[int, str], AlterConfigsResult] = {}
        for answer in answers:
            if not isinstance(
                answer, IncrementalAlterConfigsResponseData | AlterConfigsResponseData
            ):
                raise KafkaClientError(f"unexpected answer to {call}: {type(answer).__name__}")
            results.update({(r.resource_type, r.resource_name): r for r in answer.results})
        return results

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> tuple[CreateTopicResult, ...]:
        """``createTopics`` (sent to the controller; the broker waits up to
        ``request.timeout.ms`` for leaders). One result per topic, errors included."""
        request = CreateTopicsRequestData(
            topics=tuple(topics),
            timeout_ms=self.config.request_timeout_ms,
            validate_only=validate_only,
        )
        response = await self._call(
            "createTopics", request, CreateTopicsResponseData, controller=True
        )
        return response.topics

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> tuple[TopicErrorResult, ...]:
        """``createPartitions`` (to the controller). One result per topic."""
        request = CreatePartitionsRequestData(
            topics=tuple(topics),
            timeout_ms=self.config.request_timeout_ms,
            validate_only=validate_only,
        )
        response = await self._call(
            "createPartitions", request, CreatePartitionsResponseData, controller=True
        )
        return response.results

    async def delete_topics(self, names: Sequence[str]) -> tuple[DeleteTopicResult, ...]:
        """``deleteTopics`` (to the controller). One result per topic."""
        request = DeleteTopicsRequestData(
            topics=tuple(TopicName(n) for n in names),
            timeout_ms=self.config.request_timeout_ms,
        )
        response = await self._call(
            "deleteTopics", request, DeleteTopicsResponseData, controller=True
        )
        return response.topics

    async def elect_leaders(
        self,
        election_type: int,
        partitions: Sequence[tuple[str, int]] | None,
    ) -> ElectLeadersResponseData:
        """``electLeaders`` (to the controller): ``partitions`` None for every partition.
        As Kafka's admin client, per-partition NOT_CONTROLLER is not retried: it is the
        answer of a broker that lost the controllership meanwhile."""
        if partitions is None:
            topics = None
        else:
            grouped: dict[str, list[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = tuple(
                ElectLeadersTopic(topic=TopicName(t), partitions=tuple(ps))
                for t, ps in grouped.items()
            )
        request = ElectLeadersRequestData(
            topic_partitions=topics,
            election_type=election_type,
            timeout_ms=self.config.request_timeout_ms,
        )
        return await self._call("electLeaders", request, ElectLeadersResponseData, controller=True)

    async def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None = None
    ) -> ListPartitionReassignmentsResponseData:
        """``listPartitionReassignments`` (to the controller, NOT_CONTROLLER retried):
        ``partitions`` None for every reassignment in flight."""
        topics = None
        if partitions is not None:
            grouped: dict[str, list[int]] = {}
            for topic, partition in partitions:
                grouped.setdefault(topic, []).append(partition)
            topics = tuple(
                ListReassignmentsTopic(name=TopicName(t), partition_indexes=tuple(ps))
                for t, ps in grouped.items()
            )
        request = ListPartitionReassignmentsRequestData(
            topics=topics, timeout_ms=self.config.request_timeout_ms
        )
        return await self._call(
            "listPartitionReassignments",
            request,
            ListPartitionReassignmentsResponseData,
            controller=True,
        )

    async def alter_partition_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> AlterPartitionReassignmentsResponseData:
        """``alterPartitionReassignments`` (to the controller, NOT_CONTROLLER retried): each
        partition's target replicas, None to cancel its reassignment in flight."""
        grouped: dict[str, list[ReassignablePartition]] = {}
        for (topic, partition), replicas in targets.items():
            grouped.setdefault(topic, []).append(
                ReassignablePartition(
                    partition_index=partition,
                    replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
                )
            )
        request = AlterPartitionReassignmentsRequestData(
            topics=tuple(
                ReassignableTopic(name=TopicName(t), partitions=tuple(ps))
                for t, ps in grouped.items()
            ),
            timeout_ms=self.config.request_timeout_ms,
        )
        return await self._call(
            "alterPartitionReassignments",
            request,
            AlterPartitionReassignmentsResponseData,
            controller=True,
        )

    # ------------------------------------------------------------------ groups

    async def list_groups(self, states: Sequence[str] = ()) -> tuple[ListedGroup, ...]:
        """``listConsumerGroups``: ListGroups at every live broker (each answers the
        groups it coordinates, only those in ``states`` if any are named); those of
        protocol type "consumer" or "" are kept."""
        view = await self._call(
            "findAllBrokers", MetadataRequestData(topics=()), MetadataResponseData, controller=False
        )
        found: list[ListedGroup] = []
        for broker in view.brokers:
            response = await self.request_broker(
                (broker.host, broker.port),
                ListGroupsRequestData(states_filter=tuple(states)),
                timeout=self.config.request_timeout_ms / 1000,
            )
            if not isinstance(response, ListGroupsResponseData):
                raise KafkaClientError(f"unexpected answer to ListGroups: {response!r}")
            if response.error_code is not ErrorCode.NONE:
                raise api_error(response.error_code, None)
            found.extend(g for g in response.groups if g.protocol_type in ("consumer", ""))
        return tuple(found)

    async def find_coordinator(self, group: str) -> FindCoordinatorResponseData:
        """FindCoordinator for ``group``, asked again while the coordinator is not
        available or loading, until the call's deadline."""
        deadline = self._clock.now() + self.config.default_api_timeout_ms / 1000
        while True:
            found = await self._call(
                "findCoordinator",
                FindCoordinatorRequestData(key=group),
                FindCoordinatorResponseData,
                controller=False,
            )
            if found.error_code is ErrorCode.NONE:
                return found
            if found.error_code not in _COORDINATOR_ERRORS:
                raise api_error(found.error_code, found.error_message)
            if self._clock.now() >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {group} did not answer in time")
            await self._backoff(deadline)

    async def group_request(self, group: str, request: KafkaApiRequestData, expected: type[R]) -> R:
        """``request`` at ``group``'s coordinator (found with FindCoordinator), tried
        again while the coordinator is unknown, not available, loading or elsewhere
        (Kafka's admin client's retriable coordinator errors) until the call's deadline."""
        deadline = self._clock.now() + self.config.default_api_timeout_ms / 1000
        while True:
            found = await self.find_coordinator(group)
            try:
                response = await self.request_broker(
                    (found.host, found.port),
                    request,
                    timeout=self.config.request_timeout_ms / 1000,
                )
            except KafkaClientError:
                response = None
            if isinstance(response, expected) and not _COORDINATOR_ERRORS & set(
                _group_codes(response)
            ):
                return response
            if self._clock.now() >= deadline:
                raise KafkaTimeoutError(f"the coordinator of group {group} did not answer in time")
            await self._backoff(deadline)

    # ------------------------------------------------------------------ machinery

    async def _call(
        self,
        name: str,
        request: KafkaApiRequestData,
        expected: type[R],
        *,
        controller: bool,
    ) -> R:
        """Send ``request`` until it is answered (retrying failed connections, a missing
        controller and NOT_CONTROLLER) or the call's deadline passes."""
        deadline = self._clock.now() + self.config.default_api_timeout_ms / 1000
        tries = 0
        reached = False
        while True:
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                if not reached:
                    raise KafkaTimeoutError(
                        f"Timed out waiting for a node assignment. Call: {name}"
                    )
                raise KafkaTimeoutError(f"Call(callName={name}) timed out after {tries} attempt(s)")
            tries += 1
            try:
                with anyio.fail_after(min(remaining, self.config.request_timeout_ms / 1000)):
                    connection = await (
                        self._controller_connection() if controller else self._any_connection()
                    )
                    reached = True
                    response = await connection.request(request)
            except (TimeoutError, _ConnectionError, _Retry) as exc:
                if isinstance(exc, TimeoutError | _ConnectionError):
                    await self._drop_connections()
                    # As Kafka's client after a disconnect: refresh the metadata before the
                    # next try, so a controller that died is not tried until the deadline.
                    self._controller = None
                await self._backoff(deadline)
                continue
            if not isinstance(response, expected):
                raise KafkaClientError(f"{name}: unexpected answer {type(response).__name__}")
            if controller and _answers_not_controller(response):
                self._controller = None
                await self._backoff(deadline)
                continue
            return response

    async def _backoff(self, deadline: float) -> None:
        pause = min(self.config.retry_backoff_ms / 1000, max(0.0, deadline - self._clock.now()))
        await self._clock.sleep(pause)

    async def request_broker(
        self,
        address: tuple[str, int],
        data: KafkaApiRequestData,
        *,
        timeout: float,
        coordinator: bool = False,
    ) -> KafkaApiResponseData:
        """One request to the broker at ``address``, on its connection (opened when
        needed), answered within ``timeout`` seconds: what a producer's ``Sender`` or a
        consumer's ``Fetcher`` sends to a partition's leader it already knows. With
        ``coordinator``, on a connection of its own, as Kafka's consumer reaches its group
        coordinator (a node of id ``Integer.MAX_VALUE - id``): a heartbeat then never
        waits behind a Fetch to the same broker. A connection that fails or answers
        nothing in time is closed (the next call opens another) and ``KafkaClientError``
        raised."""
        pool = self._coordinator_connections if coordinator else self._connections
        try:
            with anyio.fail_after(timeout):
                connection = await self._connect(address, pool)
                return await connection.request(data)
        except (TimeoutError, _ConnectionError) as exc:
            stale = pool.pop(address, None)
            if stale is not None:
                await stale.aclose()
            reason = str(exc) or f"no answer within {timeout:g}s"
            raise KafkaClientError(f"{address[0]}:{address[1]}: {reason}") from None

    async def _drop_connections(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.aclose()

    async def _any_connection(self) -> _Connection:
        """A connection to a known broker, or to the next bootstrap server."""
        if self._connections:
            return next(iter(self._connections.values()))
        candidates = list(self._brokers.values()) + list(self._bootstrap)
        start = self._next_bootstrap % len(candidates)
        self._next_bootstrap += 1
        last: _ConnectionError | None = None
        for address in candidates[start:] + candidates[:start]:
            try:
                return await self._connect(address)
            except _ConnectionError as exc:
                last = exc
        raise last or _ConnectionError("no broker to connect to")

    async def _connect(
        self, address: tuple[str, int], pool: dict[tuple[str, int], _Connection] | None = None
    ) -> _Connection:
        pool = self._connections if pool is None else pool
        connection = pool.get(address)
        if connection is None:
            opened = await _Connection.open(address, self.config.client_id)
            # Two calls may open one at once: the first stored is kept, the other closed.
            connection = pool.setdefault(address, opened)
            if connection is not opened:
                await opened.aclose()
        return connection

    async def _refresh(self) -> None:
        """Learn the brokers and the controller (Metadata for no topics)."""
        connection = await self._any_connection()
        response = await connection.request(MetadataRequestData(topics=()))
        if not isinstance(response, MetadataResponseData):
            raise _ConnectionError(f"unexpected answer to Metadata: {type(response).__name__}")
        self._brokers = {b.broker_id: (b.host, b.port) for b in response.brokers}
        known = response.controller_id in self._brokers
        self._controller = response.controller_id if known else None

    async def _controller_connection(self) -> _Connection:
        if self._controller is None:
            await self._refresh()
        if self._controller is None:
            raise _Retry("no controller yet")
        return await self._connect(self._brokers[self._controller])


def _depends_on_specific_node(resource: AlterConfigsResource) -> bool:
    """``KafkaAdminClient.dependsOnSpecificNode``: a broker's resource other than the
    cluster default, or a broker logger."""
    if resource.resource_type == ConfigResourceType.BROKER_LOGGER:
        return True
    return resource.resource_type == ConfigResourceType.BROKER and resource.resource_name != ""


_COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def _group_codes(response: KafkaApiResponseData) -> Iterable[ErrorCode]:
    """The error codes of a group response: its own and each group's."""
    code = getattr(response, "error_code", None)
    if isinstance(code, ErrorCode):
        yield code
    for group in getattr(response, "groups", ()):
        group_code = getattr(group, "error_code", None)
        if isinstance(group_code, ErrorCode):
            yield group_code
    for result in getattr(response, "results", ()):
        yield result.error_code


def _answers_not_controller(response: KafkaApiResponseData) -> bool:
    codes: Iterable[ErrorCode]
    match response:
        case CreateTopicsResponseData():
            codes = (t.error_code for t in response.topics)
        case CreatePartitionsResponseData():
            codes = (r.error_code for r in response.results)
        case DeleteTopicsResponseData():
            codes = (t.error_code for t in response.topics)
        case ListPartitionReassignmentsResponseData():
            codes = (response.error_code,)
        case _:
            return False
    return any(code is ErrorCode.NOT_CONTROLLER for code in codes)


# --------------------------------------------------------------------------- data


RETRIABLE_PARTITION_ERRORS: Final = frozenset({
    ErrorCode.CORRUPT_MESSAGE,  # CorruptRecordException
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REQUEST_TIMED_OUT,  # TimeoutException
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
    ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.LISTENER_NOT_FOUND,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
})  # fmt: skip
"""The errors whose exception is a ``RetriableException`` (``InvalidMetadataException``'s
subclasses among them) in Kafka 2.7's clients: a partition answered with one is sent
again (``Sender.canRetry``) after its leader is looked up again."""

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class SendResult:
    """What became of a batch of ``KafkaDataClient.send``: the broker's answer to it, or
    the error that failed it (a ``TimeoutException``'s message for an expired batch)."""

    records: tuple[ProducerRecord, ...]
    error_code: ErrorCode
    error_message: str | None = None
    base_offset: int = -1


class KafkaDataClient(KafkaAdminClient):
    """The admin client plus what Kafka's producer and consumer do: Produce and ListOffsets
    of one partition, and rounds of Fetches, sent to the partitions' leaders. A leader is
    learnt from Metadata, and again after a retriable partition error or a lost connection
    (``Sender`` and ``Fetcher``'s handling); Produce and ListOffsets retry until
    ``default.api.timeout.ms`` runs out, then raise the last error as ``KafkaApiError``.
    ``send`` is a producer's handling of one batch of records: ``retries`` counting lost
    requests too, ``delivery.timeout.ms``, and the split of a batch too large."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[tuple[str, int]],
        config: AdminClientConfig | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(bootstrap_servers, config, clock=clock)
        self._leaders: dict[tuple[TopicName, int], BrokerId] = {}

    async def partitions(
        self, topic: str, *, auto_create: bool = False
    ) -> dict[int, PartitionMetadata]:
        """The topic's partitions by index, from Metadata (asking the brokers to create the
        topic if ``auto_create``, as a producer does). A topic unknown or without leaders
        yet is asked again until the deadline; then its error is raised as
        ``KafkaApiError``."""
        deadline = self._clock.now() + self.config.default_api_timeout_ms / 1000
        while True:
            response = await self.metadata([topic], allow_auto_topic_creation=auto_create)
            self._brokers = {b.broker_id: (b.host, b.port) for b in response.brokers}
            (found,) = response.topics
            code = found.error_code
            if code is ErrorCode.NONE and any(p.leader < 0 for p in found.partitions):
                code = ErrorCode.LEADER_NOT_AVAILABLE
            if code is ErrorCode.NONE or code not in RETRIABLE_PARTITION_ERRORS:
                break
            if self._clock.now() >= deadline:
                break
            await self._backoff(deadline)
        if found.error_code is not ErrorCode.NONE:
            raise api_error(found.error_code, None)
        for p in found.partitions:
            self._leaders[(found.name, p.partition)] = p.leader
        return {p.partition: p for p in found.partitions}

    async def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        *,
        acks: int = 1,
        timeout_ms: int | None = None,
        retries: int | None = None,
        delivery_deadline: float | None = None,
    ) -> ProducePartitionResponse:
        """Send one partition's records (one v2 batch). With ``acks`` 0 nothing comes back:
        the answer is an empty success. A retriable error is sent again until the deadline,
        at most ``retries`` times if given (the producer's ``retries``, counted as
        ``Sender.canRetry`` counts a batch's attempts), then answered as it is. With
        ``retries``, a request sent whose connection drops or that is not answered within
        ``request.timeout.ms`` is an attempt too, answered NETWORK_EXCEPTION as
        ``Sender.handleProduceResponse`` answers a disconnected request (raised as
        ``KafkaApiError`` once no retry is left). ``delivery_deadline`` (a clock time: the
        batch's creation plus ``delivery.timeout.ms``) replaces ``default.api.timeout.ms``:
        an error answered after it is not retried, and the batch still unanswered at it
        raises ``DeliveryTimeoutError``."""
        name = TopicName(topic)
        request = ProduceRequestData(
            acks=acks,
            timeout_ms=self.config.request_timeout_ms if timeout_ms is None else timeout_ms,
            topic_data=(
                ProduceTopicData(
                    name=name,
                    partition_data=(ProducePartitionData(index=partition, records=records),),
                ),
            ),
        )
        if acks == 0:
            connection = await self._leader_connection(name, partition)
            await connection.send_only(request)
            return ProducePartitionResponse(index=partition)

        def answer(response: ProduceResponseData) -> ProducePartitionResponse:
            return response.responses[0].partition_responses[0]

        return await self._leader_call(
            "produce",
            name,
            partition,
            request,
            ProduceResponseData,
            answer,
            retries=retries,
            delivery_deadline=delivery_deadline,
        )

    async def send(
        self,
        topic: str,
        partition: int,
        records: Sequence[ProducerRecord],
        *,
        acks: int = 1,
        compression: CompressionType = CompressionType.NONE,
        retries: int,
        delivery_timeout_ms: int,
        batch_size: int = 16_384,
    ) -> list[SendResult]:
        """What a 2.7 producer's ``Sender`` does with one batch of ``records`` (sent as
        ``produce`` sends it, ``retries`` and ``delivery.timeout.ms`` from now): a batch of
        more than one record answered MESSAGE_TOO_LARGE is split
        (``RecordAccumulator.splitAndReenqueue``: ``ProducerBatch.split`` by
        ``batch.size``) and each piece sent as a new batch, with retries of its own but the
        first batch's deadline; a batch still unsent or unanswered at the deadline expires
        with Kafka's ``TimeoutException`` message. The outcome of each batch, in order."""
        created = self._clock.now()
        deadline = created + delivery_timeout_ms / 1000
        pending = deque([tuple(records)])
        results: list[SendResult] = []
        while pending:
            batch = pending.popleft()
            try:
                answer = await self.produce(
                    topic,
                    partition,
                    encode_batch(batch, compression=compression),
                    acks=acks,
                    retries=retries,
                    delivery_deadline=deadline,
                )
            except DeliveryTimeoutError:
                waited = round((self._clock.now() - created) * 1000)
                message = (
                    f"Expiring {len(batch)} record(s) for {topic}-{partition}:{waited} ms has"
                    " passed since batch creation"
                )
                results.append(SendResult(batch, ErrorCode.REQUEST_TIMED_OUT, message))
                continue
            except KafkaApiError as exc:
                results.append(SendResult(batch, exc.code, exc.detail))
                continue
            if answer.error_code is ErrorCode.MESSAGE_TOO_LARGE and len(batch) > 1:
                # A piece that fits batch.size whole comes back as it was: as in Kafka, it
                # is split again until it is taken or its deadline passes.
                pending.extendleft(reversed(split_records(batch, batch_size)))
                continue
            results.append(
                SendResult(batch, answer.error_code, answer.error_message, answer.base_offset)
            )
        return results

    async def fetch_positions(
        self,
        topic: str,
        positions: Mapping[int, int],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 52_428_800,
        partition_max_bytes: int = 1_048_576,
    ) -> dict[int, FetchPartitionData]:
        """One round of a consumer's ``Fetcher``: one Fetch per leader for the partitions
        it leads, from their positions. A partition whose leader is unknown or
        unreachable is left out of the answer (its leader is learnt again next round); one
        answered with a retriable error is in it, with the error."""
        name = TopicName(topic)
        by_leader: dict[BrokerId, list[int]] = {}
        for partition in sorted(positions):
            leader = self._leaders.get((name, partition))
            if leader is None or leader not in self._brokers:
                await self.partitions(topic)
                leader = self._leaders.get((name, partition), BrokerId(-1))
            if leader >= 0 and leader in self._brokers:
                by_leader.setdefault(leader, []).append(partition)
        found: dict[int, FetchPartitionData] = {}
        for leader, partitions in sorted(by_leader.items()):
            request = FetchRequestData(
                max_wait_ms=max_wait_ms,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                topics=(
                    FetchTopic(
                        topic=name,
                        partitions=tuple(
                            FetchPartition(
                                partition=p,
                                fetch_offset=positions[p],
                                partition_max_bytes=partition_max_bytes,
                            )
                            for p in partitions
                        ),
                    ),
                ),
            )
            try:
                timeout = self.config.request_timeout_ms / 1000 + max_wait_ms / 1000
                with anyio.fail_after(timeout):
                    connection = await self._connect(self._brokers[leader])
                    response = await connection.request(request)
            except (TimeoutError, _ConnectionError):
                await self._drop_connections()
                for p in partitions:
                    self._leaders.pop((name, p), None)
                continue
            if not isinstance(response, FetchResponseData):
                raise KafkaClientError(f"fetch: unexpected answer {type(response).__name__}")
            if response.error_code is not ErrorCode.NONE:
                raise api_error(response.error_code, None)
            for answer in (p for t in response.responses for p in t.partitions):
                if answer.error_code in RETRIABLE_PARTITION_ERRORS:
                    self._leaders.pop((name, answer.partition_index), None)
                found[answer.partition_index] = answer
        return found

    async def list_offset(
        self, topic: str, partition: int, timestamp: int
    ) -> ListOffsetsPartitionResponse:
        """ListOffsets for one partition: ``timestamp`` -1 the latest offset (the high
        watermark), -2 the earliest (the log start), else the first offset at or after it."""
        name = TopicName(topic)
        request = ListOffsetsRequestData(
            topics=(
                ListOffsetsTopic(
                    name=name,
                    partitions=(
                        ListOffsetsPartition(partition_index=partition, timestamp=timestamp),
                    ),
                ),
            )
        )

        def answer(response: ListOffsetsResponseData) -> ListOffsetsPartitionResponse:
            return response.topics[0].partitions[0]

        return await self._leader_call(
            "listOffsets", name, partition, request, ListOffsetsResponseData, answer
        )

    async def _leader_connection(self, topic: TopicName, partition: int) -> _Connection:
        leader = self._leaders.get((topic, partition))
        if leader is None or leader < 0 or leader not in self._brokers:
            known = await self.partitions(topic)
            if partition not in known:
                raise api_error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            leader = known[partition].leader
        if leader < 0 or leader not in self._brokers:
            raise _Retry(f"no leader for {topic}-{partition}")
        return await self._connect(self._brokers[leader])

    async def _leader_call(
        self,
        name: str,
        topic: TopicName,
        partition: int,
        request: KafkaApiRequestData,
        expected: type[R],
        answer: Callable[[R], P],
        *,
        retries: int | None = None,
        delivery_deadline: float | None = None,
    ) -> P:
        """Send ``request`` to the partition's leader until it is answered without a
        retriable error, or the deadline passes (then the last error is raised), or it was
        answered with one ``retries`` times more (then that answer is returned). With
        ``retries``, a request that was sent and then lost (its connection dropped, or no
        answer within ``request.timeout.ms``) counts as an answer NETWORK_EXCEPTION, raised
        once no retry is left; failing to reach the leader at all counts nothing, as a
        producer's batch waits in its accumulator until a connection is ready. A
        ``delivery_deadline`` replaces ``default.api.timeout.ms`` (``produce``)."""
        deadline = (
            self._clock.now() + self.config.default_api_timeout_ms / 1000
            if delivery_deadline is None
            else delivery_deadline
        )
        last: ErrorCode | None = None
        while True:
            remaining = deadline - self._clock.now()
            if remaining <= 0:
                if delivery_deadline is not None:
                    raise DeliveryTimeoutError(f"Call(callName={name}) expired")
                if last is not None:
                    raise api_error(last, None)
                raise KafkaTimeoutError(f"Call(callName={name}) timed out")
            sent = False
            try:
                with anyio.fail_after(min(remaining, self.config.request_timeout_ms / 1000)):
                    connection = await self._leader_connection(topic, partition)
                    sent = True
                    response = await connection.request(request)
            except (TimeoutError, _ConnectionError, _Retry) as exc:
                if isinstance(exc, TimeoutError | _ConnectionError):
                    await self._drop_connections()
                self._leaders.pop((topic, partition), None)
                if sent and retries is not None and self._clock.now() < deadline:
                    # NetworkClient completes a request whose connection drops, or that
                    # outlives request.timeout.ms, as disconnected: Sender answers its
                    # batch NETWORK_EXCEPTION, one attempt like any other.
                    if retries <= 0:
                        raise api_error(ErrorCode.NETWORK_EXCEPTION, None) from None
                    retries -= 1
                    last = ErrorCode.NETWORK_EXCEPTION
                await self._backoff(deadline)
                continue
            if not isinstance(response, expected):
                raise KafkaClientError(f"{name}: unexpected answer {type(response).__name__}")
            result = answer(response)
            code = getattr(result, "error_code", ErrorCode.NONE)
            if code in RETRIABLE_PARTITION_ERRORS:
                if delivery_deadline is not None and self._clock.now() >= deadline:
                    return result  # Sender.canRetry: the batch reached its delivery timeout
                if retries is not None:
                    if retries <= 0:
                        return result
                    retries -= 1
                last = code
                self._leaders.pop((topic, partition), None)
                await self._backoff(deadline)
                continue
            return result
