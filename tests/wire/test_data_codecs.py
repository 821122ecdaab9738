"""The data-plane codecs (``cluster.kafka.apis``: produce, fetch, list_offsets,
init_producer_id, offset_for_leader_epoch) for every version kemu serves.

Each request and response value goes through kemu's client side and server side and back,
and what travels on the wire is read by kafka-python's protocol classes too, a second
implementation of Kafka's schemas, so that the codec is not only checked against itself.
A version that lacks a field gives it Kafka's default on the way back (``project_*``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import given, settings
from kafka.protocol.consumer import (  # type: ignore[import-untyped]
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.producer import (  # type: ignore[import-untyped]
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from cluster.kafka.apis import (
    CODECS,
    advertised_api_versions,
    build_response,
    decode_response,
    encode_request,
    error_response,
    request_data,
)
from cluster.kafka.framing import KafkaRequest, decode_request, encode_response
from cluster.launch.cluster import SUPPORTED_APIS
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    FetchTopicResponse,
    ForgottenTopic,
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    LeaderIdAndEpoch,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
    ProduceTopicResponse,
    RecordError,
    validate_records,
)
from tests.support.fake_kafka import kp_decode
from tests.support.record_batches import client_batch, relabel, set_field

TABLE = advertised_api_versions(SUPPORTED_APIS)
replace = msgspec.structs.replace

# ---------------------------------------------------------------------- strategies

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
offsets = st.integers(-1, 2**62)
names = st.text("abcdefghij-._", min_size=1, max_size=12).map(TopicName)
records = st.binary(max_size=64)
codes = st.sampled_from(list(ErrorCode))
messages = st.none() | st.text(max_size=20)


def few(strategy: st.SearchStrategy[Any], most: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(strategy, max_size=most).map(tuple)


produce_requests = st.builds(
    ProduceRequestData,
    acks=st.sampled_from([-1, 0, 1]),
    timeout_ms=st.integers(0, 2**31 - 1),
    transactional_id=st.none(),
    topic_data=few(
        st.builds(
            ProduceTopicData,
            name=names,
            partition_data=few(
                st.builds(ProducePartitionData, index=i32, records=st.none() | records)
            ),
        )
    ),
)
produce_responses = st.builds(
    ProduceResponseData,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    responses=few(
        st.builds(
            ProduceTopicResponse,
            name=names,
            partition_responses=few(
                st.builds(
                    ProducePartitionResponse,
                    index=i32,
                    error_code=codes,
                    base_offset=offsets,
                    log_append_time_ms=st.sampled_from([-1, 0, 1_600_000_000_123]),
                    log_start_offset=offsets,
                    record_errors=few(
                        st.builds(RecordError, batch_index=i32, batch_index_error_message=messages)
                    ),
                    error_message=messages,
                )
            ),
        )
    ),
)
fetch_requests = st.builds(
    FetchRequestData,
    replica_id=st.integers(-2, 100),
    max_wait_ms=st.integers(0, 2**31 - 1),
    min_bytes=i32,
    max_bytes=i32,
    isolation_level=st.sampled_from([0, 1]),
    session_id=i32,
    session_epoch=i32,
    topics=few(
        st.builds(
            FetchTopic,
            topic=names,
            partitions=few(
                st.builds(
                    FetchPartition,
                    partition=i32,
                    current_leader_epoch=i32,
                    fetch_offset=i64,
                    last_fetched_epoch=i32,
                    log_start_offset=i64,
                    partition_max_bytes=i32,
                )
            ),
        )
    ),
    forgotten_topics_data=few(st.builds(ForgottenTopic, topic=names, partitions=few(i32))),
    rack_id=st.text("abc", max_size=5),
)
fetch_responses = st.builds(
    FetchResponseData,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    error_code=codes,
    session_id=i32,
    responses=few(
        st.builds(
            FetchTopicResponse,
            topic=names,
            partitions=few(
                st.builds(
                    FetchPartitionData,
                    partition_index=i32,
                    error_code=codes,
                    high_watermark=offsets,
                    last_stable_offset=offsets,
                    log_start_offset=offsets,
                    diverging_epoch=st.none()
                    | st.builds(EpochEndOffset, epoch=st.integers(0, 99), end_offset=offsets),
                    current_leader=st.none()
                    | st.builds(LeaderIdAndEpoch, leader_id=st.integers(0, 9), leader_epoch=i32),
                    aborted_transactions=st.none()
                    | few(st.builds(AbortedTransaction, producer_id=i64, first_offset=i64)),
                    preferred_read_replica=st.integers(-1, 9),
                    records=records,
                )
            ),
        )
    ),
)
list_offsets_requests = st.builds(
    ListOffsetsRequestData,
    replica_id=st.integers(-2, 100),
    isolation_level=st.sampled_from([0, 1]),
    topics=few(
        st.builds(
            ListOffsetsTopic,
            name=names,
            partitions=few(
                st.builds(
                    ListOffsetsPartition,
                    partition_index=i32,
                    timestamp=i64,
                    current_leader_epoch=i32,
                    max_num_offsets=i32,
                )
            ),
        )
    ),
)
list_offsets_responses = st.builds(
    ListOffsetsResponseData,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    topics=few(
        st.builds(
            ListOffsetsTopicResponse,
            name=names,
            partitions=few(
                st.builds(
                    ListOffsetsPartitionResponse,
                    partition_index=i32,
                    error_code=codes,
                    timestamp=i64,
                    offset=i64,
                    leader_epoch=i32,
                    old_style_offsets=few(i64),
                )
            ),
        )
    ),
)
init_producer_id_requests = st.builds(
    InitProducerIdRequestData,
    transactional_id=st.none() | st.text("abc", max_size=5),
    transaction_timeout_ms=st.integers(0, 2**31 - 1),
    producer_id=i64,
    producer_epoch=i16,
)
init_producer_id_responses = st.builds(
    InitProducerIdResponseData,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    error_code=codes,
    producer_id=i64,
    producer_epoch=i16,
)
epoch_requests = st.builds(
    OffsetForLeaderEpochRequestData,
    replica_id=st.integers(-2, 100),
    topics=few(
        st.builds(
            OffsetForLeaderTopic,
            topic=names,
            partitions=few(
                st.builds(
                    OffsetForLeaderPartition,
                    partition=i32,
                    current_leader_epoch=i32,
                    leader_epoch=i32,
                )
            ),
        )
    ),
)
epoch_responses = st.builds(
    OffsetForLeaderEpochResponseData,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    topics=few(
        st.builds(
            OffsetForLeaderTopicResult,
            topic=names,
            partitions=few(
                st.builds(
                    OffsetForLeaderPartitionResult,
                    partition=i32,
                    error_code=codes,
                    leader_epoch=i32,
                    end_offset=i64,
                )
            ),
        )
    ),
)

# ---------------------------------------------------------------------- projections
# What each version can carry: the rest comes back as Kafka's default.


def project_produce_request(data: ProduceRequestData, version: int) -> ProduceRequestData:
    data = replace(data, version=version)
    return data if version >= 3 else replace(data, transactional_id=None)


def project_produce_response(data: ProduceResponseData, version: int) -> ProduceResponseData:
    def partition(p: ProducePartitionResponse) -> ProducePartitionResponse:
        if version < 2:
            p = replace(p, log_append_time_ms=-1)
        if version < 5:
            p = replace(p, log_start_offset=-1)
        if version < 8:
            p = replace(p, record_errors=(), error_message=None)
        return p

    data = replace(
        data,
        responses=tuple(
            replace(t, partition_responses=tuple(partition(p) for p in t.partition_responses))
            for t in data.responses
        ),
    )
    return data if version >= 1 else replace(data, throttle_time_ms=0)


def project_fetch_request(data: FetchRequestData, version: int) -> FetchRequestData:
    def partition(p: FetchPartition) -> FetchPartition:
        if version < 5:
            p = replace(p, log_start_offset=-1)
        if version < 9:
            p = replace(p, current_leader_epoch=-1)
        if version < 12:
            p = replace(p, last_fetched_epoch=-1)
        return p

    data = replace(
        data,
        topics=tuple(
            replace(t, partitions=tuple(partition(p) for p in t.partitions)) for t in data.topics
        ),
    )
    if version < 7:
        data = replace(data, session_id=0, session_epoch=-1, forgotten_topics_data=())
    if version < 11:
        data = replace(data, rack_id="")
    if version < 4:
        data = replace(data, isolation_level=0)
    if version < 3:
        data = replace(data, max_bytes=0x7FFFFFFF)
    return replace(data, version=version)


def project_fetch_response(data: FetchResponseData, version: int) -> FetchResponseData:
    def partition(p: FetchPartitionData) -> FetchPartitionData:
        if version < 4:
            p = replace(p, last_stable_offset=-1, aborted_transactions=None)
        if version < 5:
            p = replace(p, log_start_offset=-1)
        if version < 11:
            p = replace(p, preferred_read_replica=-1)
        if version < 12:
            p = replace(p, diverging_epoch=None, current_leader=None)
        return p

    data = replace(
        data,
        responses=tuple(
            replace(t, partitions=tuple(partition(p) for p in t.partitions)) for t in data.responses
        ),
    )
    if version < 7:
        data = replace(data, error_code=ErrorCode.NONE, session_id=0)
    if version < 1:
        data = replace(data, throttle_time_ms=0)
    return data


def every_partition(data: Any, **changes: Any) -> Any:
    """``data`` with ``changes`` made to each partition of each of its ``topics``."""
    return replace(
        data,
        topics=tuple(
            replace(t, partitions=tuple(replace(p, **changes) for p in t.partitions))
            for t in data.topics
        ),
    )


def project_list_offsets_request(
    data: ListOffsetsRequestData, version: int
) -> ListOffsetsRequestData:
    data = replace(data, version=version)  # the version it came in, as the codec records it
    if version < 2:
        data = replace(data, isolation_level=0)
    if version < 4:
        data = every_partition(data, current_leader_epoch=-1)
    if version >= 1:  # v0's alone
        data = every_partition(data, max_num_offsets=1)
    return data


def project_list_offsets_response(
    data: ListOffsetsResponseData, version: int
) -> ListOffsetsResponseData:
    if version < 2:
        data = replace(data, throttle_time_ms=0)
    if version < 4:
        data = every_partition(data, leader_epoch=-1)
    if version == 0:  # a list of offsets, without a timestamp
        data = every_partition(data, timestamp=-1, offset=-1)
    else:
        data = every_partition(data, old_style_offsets=())
    return data


def project_init_request(data: InitProducerIdRequestData, version: int) -> Any:
    return data if version >= 3 else replace(data, producer_id=-1, producer_epoch=-1)


def project_epoch_request(data: OffsetForLeaderEpochRequestData, version: int) -> Any:
    """v3 adds the replica id (-2 before), v2 the current leader epoch (-1 before)."""
    if version < 3:
        data = replace(data, replica_id=-2)
    if version < 2:
        data = every_partition(data, current_leader_epoch=-1)
    return data


def project_epoch_response(data: OffsetForLeaderEpochResponseData, version: int) -> Any:
    """v2 adds the throttle time, v1 the leader epoch (-1 before)."""
    if version < 2:
        data = replace(data, throttle_time_ms=0)
    if version < 1:
        data = every_partition(data, leader_epoch=-1)
    return data


def unchanged(data: Any, version: int) -> Any:
    del version
    return data


Project = Callable[[Any, int], Any]

APIS: dict[ClientApiKey, tuple[Any, Any, Project, Project, Any, Any]] = {
    ClientApiKey.PRODUCE: (
        produce_requests,
        produce_responses,
        project_produce_request,
        project_produce_response,
        ProduceRequest,
        ProduceResponse,
    ),
    ClientApiKey.FETCH: (
        fetch_requests,
        fetch_responses,
        project_fetch_request,
        project_fetch_response,
        FetchRequest,
        FetchResponse,
    ),
    ClientApiKey.LIST_OFFSETS: (
        list_offsets_requests,
        list_offsets_responses,
        project_list_offsets_request,
        project_list_offsets_response,
        ListOffsetsRequest,
        ListOffsetsResponse,
    ),
    ClientApiKey.INIT_PRODUCER_ID: (
        init_producer_id_requests,
        init_producer_id_responses,
        project_init_request,
        unchanged,
        InitProducerIdRequest,
        InitProducerIdResponse,
    ),
    ClientApiKey.OFFSET_FOR_LEADER_EPOCH: (
        epoch_requests,
        epoch_responses,
        project_epoch_request,
        project_epoch_response,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    ),
}

SERVED = [
    (key, v) for key in APIS for v in range(CODECS[key].versions[0], CODECS[key].versions[1] + 1)
]


def served_id(case: tuple[ClientApiKey, int]) -> str:
    return f"{case[0].name.lower()}-v{case[1]}"


def test_the_data_apis_are_advertised_as_served() -> None:
    """Brokers advertise exactly the versions the data codecs serve: Kafka 2.7's ranges."""
    assert {key: TABLE[key] for key in APIS} == {
        ClientApiKey.PRODUCE: (0, 8),
        ClientApiKey.FETCH: (0, 12),
        ClientApiKey.LIST_OFFSETS: (0, 5),
        ClientApiKey.INIT_PRODUCER_ID: (0, 4),
        ClientApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 3),
    }


@pytest.mark.parametrize("case", SERVED, ids=served_id)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_requests_round_trip_every_version(case: tuple[ClientApiKey, int], data: Any) -> None:
    """A request value sent as a version comes back from the server side as the same
    value, less what the version cannot carry, and kafka-python reads the same frame."""
    key, version = case
    requests, _, project, _, kp_request, _ = APIS[key]
    value = data.draw(requests)
    frame = encode_request(value, api_version=version, correlation_id=5, client_id="t")
    request = decode_request(frame[4:], TABLE)
    assert (request.api_key, request.api_version, request.correlation_id) == (key, version, 5)
    assert request_data(request) == project(value, version)
    theirs = kp_request.decode(frame[4:], version=version, header=True).to_dict(json=False)
    assert agree(theirs, msgspec.to_builtins(project(value, version), builtin_types=(bytes,)))


@pytest.mark.parametrize("case", SERVED, ids=served_id)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_responses_round_trip_every_version(case: tuple[ClientApiKey, int], data: Any) -> None:
    """A response value answered as a version is read back by the client side as the
    same value, less what the version cannot carry; kafka-python reads the same frame."""
    key, version = case
    _, responses, _, project, _, kp_response = APIS[key]
    value = data.draw(responses)
    request = KafkaRequest(
        api_key=key, api_version=version, correlation_id=9, client_id="t", body=None
    )
    frame = encode_response(request, build_response(request, value))
    correlation_id, back = decode_response(key, version, frame[4:])
    assert (correlation_id, back) == (9, project(value, version))
    _, theirs = kp_decode(kp_response, version, frame)
    assert agree(theirs, msgspec.to_builtins(project(value, version), builtin_types=(bytes,)))


# ---------------------------------------------------------------------- kafka-python's view

_THEIRS_ONLY = frozenset({"cluster_id", "snapshot_id"})  # KRaft-era fields, not Kafka 2.7's


def agree(theirs: Any, ours: Any) -> bool:
    """kafka-python's ``to_dict`` of a message agrees with kemu's value (as builtins): same
    names, same values, for every field kafka-python reads in that version. A tagged
    entity kemu leaves out (``None``) is kafka-python's all -1 default."""
    if isinstance(theirs, dict) and ours is None:
        return all(v == -1 for v in theirs.values())
    if isinstance(theirs, dict):
        return isinstance(ours, dict) and all(
            name in _THEIRS_ONLY or (name in ours and agree(value, ours[name]))
            for name, value in theirs.items()
        )
    if isinstance(theirs, list | tuple):
        return (
            isinstance(ours, list | tuple)
            and len(theirs) == len(ours)
            and all(agree(a, b) for a, b in zip(theirs, ours, strict=True))
        )
    return bool(theirs == ours)


# ---------------------------------------------------------------------- validateRecords

BATCH = client_batch([b"one", b"two"])


def test_one_v2_batch_per_partition_passes_from_v3() -> None:
    """A producer's single magic-v2 batch passes in every served version, compressed or
    not, and a partial batch after it is not a second batch (``MemoryRecords.batches``)."""
    gzip = client_batch([b"x" * 100], codec=1)
    for version in range(3, 9):
        assert validate_records(BATCH, version) is ErrorCode.NONE
        assert validate_records(gzip, version) is ErrorCode.NONE
        assert validate_records(BATCH + BATCH[:30], version) is ErrorCode.NONE


def test_anything_but_exactly_one_v2_batch_is_an_invalid_record() -> None:
    """No batch, two batches, or a magic-1 batch is INVALID_RECORD, as
    ``ProduceRequest.validateRecords`` answers it through ``handleProduceRequest``."""
    legacy = set_field(BATCH, "magic", 1)
    for version in range(3, 9):
        assert validate_records(None, version) is ErrorCode.INVALID_RECORD
        assert validate_records(b"", version) is ErrorCode.INVALID_RECORD
        assert validate_records(BATCH[:40], version) is ErrorCode.INVALID_RECORD
        assert validate_records(BATCH + BATCH, version) is ErrorCode.INVALID_RECORD
        assert validate_records(legacy, version) is ErrorCode.INVALID_RECORD


def test_zstd_needs_produce_v7() -> None:
    """A zstd batch is UNSUPPORTED_COMPRESSION_TYPE before Produce v7, fine from v7."""
    zstd = relabel(client_batch([b"x" * 100], codec=1), 4)
    assert [validate_records(zstd, v) for v in range(3, 9)] == [
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    ] * 4 + [ErrorCode.NONE] * 2


def test_a_broken_batch_header_is_a_corrupt_message() -> None:
    """A batch length below the smallest record, a magic above 2, or a v2 batch shorter
    than its header is CORRUPT_MESSAGE (``CorruptRecordException``)."""
    assert validate_records(set_field(BATCH, "batch_length", 3), 8) is ErrorCode.CORRUPT_MESSAGE
    assert validate_records(set_field(BATCH, "magic", 3), 8) is ErrorCode.CORRUPT_MESSAGE
    short = set_field(BATCH, "batch_length", 40)[:52]
    assert validate_records(short, 8) is ErrorCode.CORRUPT_MESSAGE
    second_broken = BATCH + set_field(BATCH, "batch_length", 3)
    assert validate_records(second_broken, 8) is ErrorCode.CORRUPT_MESSAGE


# ---------------------------------------------------------------------- error answers


def asked(key: ClientApiKey, version: int, value: Any) -> KafkaRequest:
    """``value`` as the listener would have decoded it from a client's frame."""
    frame = encode_request(value, api_version=version, correlation_id=3, client_id="t")
    return decode_request(frame[4:], TABLE)


def error_answered(key: ClientApiKey, version: int, value: Any, code: ErrorCode) -> Any:
    """The error response to ``value`` sent as ``version``, as the client side reads it."""
    request = asked(key, version, value)
    frame = encode_response(request, error_response(request, code))
    return decode_response(key, version, frame[4:])[1]


TWO_PARTITIONS = (TopicName("a"), (0, 1))


def test_error_answers_fail_every_partition() -> None:
    """``getErrorResponse`` of each data API: every partition of the request gets the code
    (Fetch also at the top, with the request's session), offsets and epochs undefined."""
    name, partitions = TWO_PARTITIONS
    produce = ProduceRequestData(
        acks=1,
        timeout_ms=100,
        topic_data=(
            ProduceTopicData(
                name=name,
                partition_data=tuple(
                    ProducePartitionData(index=p, records=BATCH) for p in partitions
                ),
            ),
        ),
    )
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    (topic,) = error_answered(ClientApiKey.PRODUCE, 8, produce, code).responses
    assert [(p.index, int(p.error_code), p.base_offset) for p in topic.partition_responses] == [
        (0, code, -1),
        (1, code, -1),
    ]
    fetch = FetchRequestData(
        max_wait_ms=500,
        min_bytes=1,
        session_id=7,
        topics=(
            FetchTopic(
                topic=name,
                partitions=tuple(
                    FetchPartition(partition=p, fetch_offset=3, partition_max_bytes=9)
                    for p in partitions
                ),
            ),
        ),
    )
    assert error_answered(ClientApiKey.FETCH, 12, fetch, code) == FetchResponseData(
        error_code=code,
        session_id=7,
        responses=(
            FetchTopicResponse(
                topic=name,
                partitions=tuple(
                    FetchPartitionData(partition_index=p, error_code=code) for p in partitions
                ),
            ),
        ),
    )
    offsets = ListOffsetsRequestData(
        topics=(
            ListOffsetsTopic(
                name=name,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions
                ),
            ),
        )
    )
    listed = error_answered(ClientApiKey.LIST_OFFSETS, 5, offsets, code)
    assert [(p.error_code, p.offset, p.timestamp) for p in listed.topics[0].partitions] == [
        (code, -1, -1)
    ] * 2
    epochs = OffsetForLeaderEpochRequestData(
        topics=(
            OffsetForLeaderTopic(
                topic=name,
                partitions=tuple(
                    OffsetForLeaderPartition(partition=p, leader_epoch=2) for p in partitions
                ),
            ),
        )
    )
    ended = error_answered(ClientApiKey.OFFSET_FOR_LEADER_EPOCH, 3, epochs, code)
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in ended.topics[0].partitions] == [
        (code, -1, -1)
    ] * 2
    init = InitProducerIdRequestData(transaction_timeout_ms=1)
    granted = error_answered(
        ClientApiKey.INIT_PRODUCER_ID, 4, init, ErrorCode.COORDINATOR_NOT_AVAILABLE
    )
    assert granted == InitProducerIdResponseData(
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
    )
