"""Kafka error codes (the real numbers) and kemu's exception tree.

``ErrorCode`` is the wire table. Exceptions are a separate, small tree with one root,
``KemuError``, and one subclass per layer. ``error_code_for`` is the only place that maps an
exception to a code; it is called where a response is built.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import IntEnum


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106


# --------------------------------------------------------------------------- exceptions


class KemuError(Exception):
    """Root of every exception kemu raises on purpose."""


# -- actors layer


class ActorError(KemuError):
    """Actor runtime errors."""


class AskTimeoutError(ActorError):
    """An ``ask`` got no reply within its timeout."""


class BrokerDisconnectedError(AskTimeoutError):
    """A client's connection to a broker was refused (its process is not running) or
    reset while the request was in flight (the process ended): what Kafka's
    ``NetworkClient`` reports at once as a disconnect, where a broker that is stopped
    (SIGSTOP) or cut off leaves the request unanswered until its timeout. An
    ``AskTimeoutError``, so that whoever takes no answer as "try again, maybe elsewhere"
    does so; ``sent``: whether the request had gone out (an in-flight request the broker
    may have acted on) or never left (refused)."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class NodeStoppedError(ActorError):
    """The node an ``ask`` was made from stopped or crashed before the reply came."""


class ActorNotFoundError(ActorError):
    """A message was addressed to an actor that does not exist (or no longer does)."""


class RemoteError(ActorError):
    """The handler of an ``ask`` raised; carries the Kafka error code it mapped to."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.detail = message


class FatalNodeError(ActorError):
    """Raised by a handler when the node cannot go on: the node crashes."""


class InconsistentClusterIdError(FatalNodeError):
    """A broker's log dirs hold another cluster's data (Kafka's
    ``InconsistentClusterIdException``): it does not start."""


# -- network layer


class NetworkError(KemuError):
    """Transport errors (sockets, frames, unknown destinations)."""


class FrameError(NetworkError):
    """A frame was malformed, of an unknown type or version, or over the size limit."""


class UnreachableError(NetworkError):
    """The destination node is not known to the network or cannot be connected to."""


# -- store layer (ZooKeeper semantics)


class StoreError(KemuError):
    """Metadata-store errors, named after ZooKeeper's KeeperException codes."""


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class NoChildrenForEphemeralsError(StoreError):
    pass


class BadArgumentsError(StoreError):
    pass


class SessionExpiredError(StoreError):
    """The session is gone: its ephemerals were removed; a new session is needed."""


class ConnectionLossError(StoreError):
    """The store could not be reached; the outcome of the operation is unknown."""


class StoreClosedError(StoreError):
    """The session was closed by its owner."""


class TransactionFailedError(StoreError):
    """A multi-op failed as a whole. ``results`` holds one entry per op: the exception of
    the op that failed, ``None`` for the others (which were rolled back)."""

    def __init__(self, results: tuple[StoreError | None, ...]) -> None:
        first = next((r for r in results if r is not None), None)
        super().__init__(f"transaction failed: {first!r}")
        self.results = results


# -- ZooKeeper data (protocol layer)


class ZkDataError(KemuError):
    """A znode's payload is not what Kafka 2.7 writes or reads: malformed JSON, a missing or
    mistyped field, an unsupported version; or a name that cannot be a znode path segment."""


# -- Kafka API layer


class KafkaApiError(KemuError):
    """A Kafka-level failure with its code and the message Kafka would return."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.detail = message


class RecordValidationError(KafkaApiError):
    """A batch refused for what some of its records hold (Kafka's
    ``RecordValidationException``): INVALID_RECORD or INVALID_TIMESTAMP, with each bad
    record's index in its batch and why (``record_errors``: Produce v8's
    ``batch_index`` and ``batch_index_error_message``)."""

    def __init__(
        self, code: ErrorCode, message: str, record_errors: tuple[tuple[int, str], ...]
    ) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


def sole_error(error: BaseException) -> BaseException:
    """The one error inside nested single-error groups (anyio task groups wrap what fails
    in them), or ``error`` itself: how a command finds the ``KemuError`` to print."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


@contextlib.contextmanager
def unwrap_kemu_error(*also: type[BaseException]) -> Iterator[None]:
    """Around a body whose task groups may wrap its failure: the ``KemuError`` (or one of
    ``also``) alone inside single-error groups (``sole_error``) goes on by itself, so that a
    command prints its one line; any other group goes on as it is."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaf = sole_error(group)
        if isinstance(leaf, (KemuError, *also)):
            raise leaf from None
        raise


def error_code_for(exc: BaseException) -> ErrorCode:
    """The single mapping from an exception to the Kafka error code put in a response."""
    if isinstance(exc, KafkaApiError | RemoteError):
        return exc.code
    if isinstance(exc, BrokerDisconnectedError):
        return ErrorCode.NETWORK_EXCEPTION
    if isinstance(exc, AskTimeoutError):
        return ErrorCode.REQUEST_TIMED_OUT
    if isinstance(exc, UnreachableError):
        return ErrorCode.BROKER_NOT_AVAILABLE
    if isinstance(exc, NetworkError):
        return ErrorCode.NETWORK_EXCEPTION
    return ErrorCode.UNKNOWN_SERVER_ERROR


STORE_ERRORS: dict[str, type[StoreError]] = {
    cls.__name__: cls
    for cls in (
        NoNodeError,
        NodeExistsError,
        BadVersionError,
        NotEmptyError,
        NoChildrenForEphemeralsError,
        BadArgumentsError,
        SessionExpiredError,
        ConnectionLossError,
        StoreClosedError,
        StoreError,
    )
}
"""Store errors by class name, to rebuild them on the far side of the network."""


def store_error(name: str, message: str) -> StoreError:
    return STORE_ERRORS.get(name, StoreError)(message)
