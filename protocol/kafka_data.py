"""The Kafka data-plane APIs as kemu's own typed values.

What a client (or a follower's fetcher) asks a broker for data, and what the broker
answers, mirroring Kafka 2.7's message schemas (``clients/src/main/resources/common/
message/*.json``) field for field, in snake_case. The Kafka listener turns a wire request
of any served version into the request value below and the broker's answer into the
response of the version asked (``cluster.kafka.apis``: ``produce``, ``fetch``,
``list_offsets``, ``offset_for_leader_epoch``, ``init_producer_id``); a follower's
replica fetcher sends the very same ``FetchRequestData`` (``replica_id`` = its broker id)
to the leader over kemu's network, as Kafka's ``ReplicaFetcherThread`` sends a Fetch.

Conventions, for every type here:

* a request holds what every served version of its API can carry; fields a version lacks
  take Kafka's default (the schema's ``default``, else -1 for offsets, epochs and ids);
* a response holds what the newest served version can say; the codec drops what an older
  version cannot carry;
* records are ``bytes`` exactly as they travel: a Produce's batches as the client sent
  them (before v3, as the listener up-converted its messages), a Fetch's as they lie in
  the log (whole batches, the last one possibly cut off); the broker never decodes or
  re-encodes them on the way through;
* durations are milliseconds as ``int``; error codes are ``protocol.errors.ErrorCode``;
* nested values are plain frozen structs, requests and responses are ``Message``s so that
  they travel between actors unchanged.

=========================  =======  ========  =========================================
API                        key      versions  request / response values
=========================  =======  ========  =========================================
Produce                    0        0-8       ``ProduceRequestData`` / ``...ResponseData``
Fetch                      1        0-12      ``FetchRequestData`` / ``FetchResponseData``
ListOffsets                2        0-5       ``ListOffsetsRequestData`` / ``...Response``
InitProducerId             22       0-4       ``InitProducerIdRequestData`` / ``...``
OffsetForLeaderEpoch       23       0-3       ``OffsetForLeaderEpochRequestData`` / ``...``
=========================  =======  ========  =========================================

A Produce v0-v2's legacy messages are up-converted to one v2 batch by the listener
(``cluster.kafka.message_sets``) before the broker sees them, and a Fetch v0-v3's answer
down-converted by it to the message format the version reads: ``records`` here are always
v2 batches.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

import msgspec

from protocol.base import Message
from protocol.errors import ErrorCode
from protocol.ids import TopicName

__all__ = [
    "CONSUMER_REPLICA_ID",
    "DEBUG_REPLICA_ID",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "AbortedTransaction",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchRequestData",
    "FetchResponseData",
    "FetchTopic",
    "FetchTopicResponse",
    "ForgottenTopic",
    "InitProducerIdRequestData",
    "InitProducerIdResponseData",
    "IsolationLevel",
    "KafkaDataRequestData",
    "KafkaDataResponseData",
    "LeaderIdAndEpoch",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequestData",
    "ListOffsetsResponseData",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "OffsetForLeaderEpochRequestData",
    "OffsetForLeaderEpochResponseData",
    "OffsetForLeaderPartition",
    "OffsetForLeaderPartitionResult",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequestData",
    "ProduceResponseData",
    "ProduceTopicData",
    "ProduceTopicResponse",
    "RecordError",
    "validate_records",
]

CONSUMER_REPLICA_ID: Final = -1
"""``replica_id`` of a consumer's Fetch or ListOffsets (``FetchRequest.CONSUMER_REPLICA_ID``)."""
DEBUG_REPLICA_ID: Final = -2
"""``replica_id`` of a debugging consumer: reads up to the log end, from any replica
(``FetchRequest.DEBUGGING_REPLICA_ID``); OffsetForLeaderEpoch's default before v3."""
LATEST_TIMESTAMP: Final = -1
"""ListOffsets ``timestamp`` asking for the latest offset
(``ListOffsetRequest.LATEST_TIMESTAMP``)."""
EARLIEST_TIMESTAMP: Final = -2
"""ListOffsets ``timestamp`` asking for the log start offset."""
NO_PARTITION_LEADER_EPOCH: Final = -1
"""A leader epoch the sender does not know or does not check
(``RecordBatch.NO_PARTITION_LEADER_EPOCH``)."""
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1


class IsolationLevel(IntEnum):
    """Fetch and ListOffsets ``isolation_level`` wire ids (``IsolationLevel.java``). kemu
    has no transactions, so both read up to the high watermark."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class _Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the plain values nested inside requests and responses."""


# ------------------------------------------------------------------------ Produce (0)


class ProducePartitionData(_Value, frozen=True, kw_only=True):
    """One partition's records as the client sent them (``PartitionProduceData``). From
    v3 Kafka demands exactly one magic-v2 batch here (``ProduceRequest.validateRecords``);
    the codec checks that before the broker sees the request. Before v3 the listener has
    made the legacy messages one v2 batch; empty records (no whole message) append
    nothing and are answered without an offset (``Log.append``)."""

    index: int
    records: bytes | None


_LOG_OVERHEAD: Final = 12  # baseOffset + batchLength (``Records.LOG_OVERHEAD``)
_MIN_BATCH_LENGTH: Final = 14  # below it a batch is corrupt (``LegacyRecord.RECORD_OVERHEAD_V0``)
_V2_HEADER: Final = 61  # ``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``
_MAGIC_AT: Final = 16
_ATTRIBUTES_AT: Final = 21
_ZSTD: Final = 4
_INT32 = struct.Struct(">i")


def validate_records(records: bytes | None, version: int) -> ErrorCode:
    """What Kafka's ``ProduceRequest.validateRecords`` (called by
    ``KafkaApis.handleProduceRequest`` for each partition of a known topic) makes of one
    partition's records sent in Produce ``version``: from v3 exactly one magic-v2 batch
    (else INVALID_RECORD), zstd only from v7 (else UNSUPPORTED_COMPRESSION_TYPE), and a
    batch whose header is broken while the batches are walked is CORRUPT_MESSAGE. Only the
    headers are read, as ``MemoryRecords.batches`` does; a partial trailing batch is not a
    batch. NONE when the records pass (the log checks the rest: CRC, sizes, offsets)."""
    if version < 3:
        return ErrorCode.NONE
    data = records or b""
    position, batches = 0, 0
    while len(data) - position >= _LOG_OVERHEAD and batches < 2:
        length = _INT32.unpack_from(data, position + 8)[0]
        if length < _MIN_BATCH_LENGTH:
            return ErrorCode.CORRUPT_MESSAGE
        size = length + _LOG_OVERHEAD
        if len(data) - position < size:
            break
        magic = data[position + _MAGIC_AT]
        if magic > 2 or (magic == 2 and size < _V2_HEADER):
            return ErrorCode.CORRUPT_MESSAGE
        if batches == 0:
            if magic != 2:
                return ErrorCode.INVALID_RECORD
            if version < 7 and data[position + _ATTRIBUTES_AT + 1] & 0x07 == _ZSTD:
                return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        batches += 1
        position += size
    return ErrorCode.NONE if batches == 1 else ErrorCode.INVALID_RECORD


class ProduceTopicData(_Value, frozen=True, kw_only=True):
    name: TopicName
    partition_data: tuple[ProducePartitionData, ...]


class ProduceRequestData(Message, frozen=True, kw_only=True):
    """``acks``: 0 (no answer at all; the connection is closed if a partition failed),
    1 (answer after the leader's append) or -1 (after the ISR has it, up to
    ``timeout_ms``); anything else is INVALID_REQUIRED_ACKS for every partition.
    ``transactional_id`` is always null from kemu's clients (no transactions)."""

    acks: int
    timeout_ms: int
    topic_data: tuple[ProduceTopicData, ...]
    transactional_id: str | None = None
    version: int = 8
    """The Produce version the client sent, as Kafka's ``ProduceRequest`` knows its own:
    ``validate_records`` depends on it."""
    internal_topics_allowed: bool = False
    """``ReplicaManager.appendRecords``' ``internalTopicsAllowed``: only the group
    coordinator's own appends may write ``__consumer_offsets`` (a client's get
    INVALID_TOPIC_EXCEPTION there)."""


class RecordError(_Value, frozen=True, kw_only=True):
    """A record that made its batch be dropped (``BatchIndexAndErrorMessage``, v8+)."""

    batch_index: int
    batch_index_error_message: str | None = None


class ProducePartitionResponse(_Value, frozen=True, kw_only=True):
    """``base_offset``: the offset given to the batch's first record (-1 on error; a
    retried duplicate gets its original one). ``log_append_time_ms``: -1 unless the topic
    uses LogAppendTime (v2+). ``log_start_offset``: the partition's after the append (v5+).
    ``record_errors`` and ``error_message`` are v8+."""

    index: int
    error_code: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[RecordError, ...] = ()
    error_message: str | None = None


class ProduceTopicResponse(_Value, frozen=True, kw_only=True):
    name: TopicName
    partition_responses: tuple[ProducePartitionResponse, ...]


class ProduceResponseData(Message, frozen=True, kw_only=True):
    responses: tuple[ProduceTopicResponse, ...]
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ Fetch (1)


class FetchPartition(_Value, frozen=True, kw_only=True):
    """``current_leader_epoch`` (v9+): the fetcher's idea of the leader epoch, -1 to skip
    the fencing check. ``last_fetched_epoch`` (v12+): Kafka 2.7's follower never sets it.
    ``log_start_offset`` (v5+): a follower's own, -1 from consumers.
    ``partition_max_bytes``: at most this much of this partition's records."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    last_fetched_epoch: int = NO_PARTITION_LEADER_EPOCH
    log_start_offset: int = -1


class FetchTopic(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[FetchPartition, ...]


class ForgottenTopic(_Value, frozen=True, kw_only=True):
    """Partitions to drop from an incremental fetch session (v7+)."""

    topic: TopicName
    partitions: tuple[int, ...]


class FetchRequestData(Message, frozen=True, kw_only=True):
    """``replica_id``: -1 for a consumer (reads up to the high watermark), the broker id
    of a follower (reads up to the log end; the leader learns the follower's position from
    ``fetch_offset``), -2 for a debugging consumer. The broker answers once ``min_bytes``
    are available or ``max_wait_ms`` has passed (``DelayedFetch``). ``max_bytes`` caps
    the whole answer (v3+), except that the first partition with data returns at least
    one whole batch. ``session_id``/``session_epoch`` (v7+): kemu opens no fetch sessions
    (it answers session 0, as Kafka does when it creates none); 0/-1 is a sessionless
    full fetch. ``rack_id`` (v11+) is the consumer's ``client.rack``."""

    max_wait_ms: int
    min_bytes: int
    topics: tuple[FetchTopic, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    max_bytes: int = 0x7FFFFFFF
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED
    session_id: int = 0
    session_epoch: int = -1
    forgotten_topics_data: tuple[ForgottenTopic, ...] = ()
    rack_id: str = ""
    version: int = 12
    """The Fetch version the client sent: before v10 a topic compressed with zstd is
    UNSUPPORTED_COMPRESSION_TYPE, and before v4 the records are down-converted (unless
    the topic's ``message.downconversion.enable`` is false: UNSUPPORTED_VERSION for a
    consumer), as ``KafkaApis.maybeConvertFetchedData`` decides."""


class EpochEndOffset(_Value, frozen=True, kw_only=True):
    """Where a fetcher's log diverges from the leader's (Fetch v12 ``diverging_epoch``)."""

    epoch: int = -1
    end_offset: int = -1


class LeaderIdAndEpoch(_Value, frozen=True, kw_only=True):
    """The leader as this broker knows it (Fetch v12 ``current_leader``), sent with
    NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH."""

    leader_id: int = -1
    leader_epoch: int = -1


class AbortedTransaction(_Value, frozen=True, kw_only=True):
    producer_id: int
    first_offset: int


class FetchPartitionData(_Value, frozen=True, kw_only=True):
    """One partition's answer (``PartitionData``). ``high_watermark``: what consumers may
    read below; ``last_stable_offset`` (v4+) equals it in kemu (no transactions);
    ``log_start_offset`` (v5+): the leader's, which a follower adopts.
    ``aborted_transactions`` (v4+) is empty, never null, for read_committed without
    transactions. ``preferred_read_replica`` (v11+) is -1: kemu has no replica selector.
    ``diverging_epoch`` and ``current_leader`` are v12's tagged fields (``None``: not
    sent). ``records``: whole batches from the log, the last one possibly cut off at the
    byte limit; empty (not null) when there is nothing to return."""

    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    current_leader: LeaderIdAndEpoch | None = None
    aborted_transactions: tuple[AbortedTransaction, ...] | None = None
    preferred_read_replica: int = -1
    records: bytes = b""


class FetchTopicResponse(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[FetchPartitionData, ...]


class FetchResponseData(Message, frozen=True, kw_only=True):
    """``error_code`` (v7+) is the session's error (FETCH_SESSION_ID_NOT_FOUND for any
    non-zero ``session_id``, with no partitions); partition errors are per partition.
    ``responses`` follow the request's order."""

    responses: tuple[FetchTopicResponse, ...]
    error_code: ErrorCode = ErrorCode.NONE
    session_id: int = 0
    throttle_time_ms: int = 0


# ------------------------------------------------------------------------ ListOffsets (2)


class ListOffsetsPartition(_Value, frozen=True, kw_only=True):
    """``timestamp``: -1 latest, -2 earliest, else the first offset whose record
    timestamp is at least this (ms); in v0, the segments written before it.
    ``current_leader_epoch`` (v4+) fences as Fetch's. ``max_num_offsets`` (v0 only): how
    many offsets the answer may list."""

    partition_index: int
    timestamp: int
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    max_num_offsets: int = 1


class ListOffsetsTopic(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[ListOffsetsPartition, ...]


class ListOffsetsRequestData(Message, frozen=True, kw_only=True):
    """``replica_id``: -1 consumer (latest = the high watermark), a broker id or -2
    (latest = the log end; in v0 also read from a follower). ``isolation_level`` (v2+):
    no difference in kemu."""

    topics: tuple[ListOffsetsTopic, ...]
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED
    version: int = 5
    """The request's version: v0 asks for offsets before a time
    (``KafkaApis.handleListOffsetRequestV0``); before v5 OFFSET_NOT_AVAILABLE is answered
    as LEADER_NOT_AVAILABLE (``KafkaApis.handleListOffsetRequestV1AndAbove``)."""


class ListOffsetsPartitionResponse(_Value, frozen=True, kw_only=True):
    """``offset`` -1 and ``timestamp`` -1 with no error: no record at or after the
    timestamp below the high watermark. ``leader_epoch`` (v4+): the epoch of the offset.
    ``old_style_offsets`` is v0's whole answer (``Log.legacyFetchOffsetsBefore``: offsets,
    largest first) where v1+ have ``timestamp`` and ``offset``."""

    partition_index: int
    error_code: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    old_style_offsets: tuple[int, ...] = ()


class ListOffsetsTopicResponse(_Value, frozen=True, kw_only=True):
    name: TopicName
    partitions: tuple[ListOffsetsPartitionResponse, ...]


class ListOffsetsResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[ListOffsetsTopicResponse, ...]
    throttle_time_ms: int = 0


# --------------------------------------------------------------- InitProducerId (22)


class InitProducerIdRequestData(Message, frozen=True, kw_only=True):
    """``transactional_id`` null asks for a new idempotent producer id (any broker grants
    one, with epoch 0); kemu answers a non-null one as a broker without transactions
    would not (transactions are out of scope: the coordinator APIs are not advertised).
    ``producer_id``/``producer_epoch`` (v3+) are -1 except when a producer re-initialises."""

    transaction_timeout_ms: int
    transactional_id: str | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class InitProducerIdResponseData(Message, frozen=True, kw_only=True):
    error_code: ErrorCode = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    throttle_time_ms: int = 0


# --------------------------------------------------------- OffsetForLeaderEpoch (23)


class OffsetForLeaderPartition(_Value, frozen=True, kw_only=True):
    """``leader_epoch``: the epoch whose end offset is asked (a follower's latest);
    ``current_leader_epoch`` (v2+) fences as Fetch's, -1 skips the check."""

    partition: int
    leader_epoch: int
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH


class OffsetForLeaderTopic(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[OffsetForLeaderPartition, ...]


class OffsetForLeaderEpochRequestData(Message, frozen=True, kw_only=True):
    """``replica_id`` (v3+): the follower's broker id, or -2 for a consumer (the default
    of older versions)."""

    topics: tuple[OffsetForLeaderTopic, ...]
    replica_id: int = DEBUG_REPLICA_ID


class OffsetForLeaderPartitionResult(_Value, frozen=True, kw_only=True):
    """``LeaderEpochFileCache.endOffsetFor``'s answer: the largest epoch at or below the
    one asked and the offset where it ends (the log end for the latest epoch); -1/-1 when
    unknown. ``leader_epoch`` is v1+."""

    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    leader_epoch: int = -1
    end_offset: int = -1


class OffsetForLeaderTopicResult(_Value, frozen=True, kw_only=True):
    topic: TopicName
    partitions: tuple[OffsetForLeaderPartitionResult, ...]


class OffsetForLeaderEpochResponseData(Message, frozen=True, kw_only=True):
    topics: tuple[OffsetForLeaderTopicResult, ...]
    throttle_time_ms: int = 0


KafkaDataRequestData = (
    ProduceRequestData
    | FetchRequestData
    | ListOffsetsRequestData
    | InitProducerIdRequestData
    | OffsetForLeaderEpochRequestData
)
"""Every data-plane request a kemu broker answers."""

KafkaDataResponseData = (
    ProduceResponseData
    | FetchResponseData
    | ListOffsetsResponseData
    | InitProducerIdResponseData
    | OffsetForLeaderEpochResponseData
)
"""Every data-plane answer."""
