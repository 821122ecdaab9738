"""Record batches as ``actors.log.records`` reads them, checked against independent code:
batches a client builds (aiokafka) with any keys, values, headers and timestamps are
walked to the records kio's reader finds; and no mutation of a batch makes the leader's
validation fail other than with a Kafka error code.
"""

from __future__ import annotations

import struct

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.log import record_scan
from actors.log.compression import compress
from actors.log.records import (
    LONG_MAX,
    RECORD_BATCH_OVERHEAD,
    RecordChecks,
    TimestampType,
    ValidatedRecords,
    assign_offsets,
    read_header,
    record_timestamps,
)
from protocol.errors import ErrorCode, KafkaApiError, RecordValidationError
from tests.support.record_batches import (
    client_batch,
    decode_batches,
    fix_crc,
    get_field,
    set_field,
)

from aiokafka.record.default_records import (  # type: ignore[import-untyped]  # isort: skip
    DefaultRecordBatchBuilder,
)

T0 = 1_600_000_000_000

optional_bytes = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)
records = st.lists(
    st.tuples(optional_bytes, optional_bytes, headers, st.integers(0, 10**6)),
    min_size=1,
    max_size=8,
)


def build(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    offsets: list[int] | None = None,
) -> bytes:
    """A client's batch of ``rows``; its records carry ``offsets`` as their offset deltas
    if given (a client's may not be 0..n-1; the last is the batch's last offset delta)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    deltas = range(len(rows)) if offsets is None else offsets
    for offset, (key, value, hdrs, delta) in zip(deltas, rows, strict=True):
        builder.append(offset, timestamp=T0 + delta, key=key, value=value, headers=hdrs)
    return bytes(builder.build())


def validate(batch: bytes, *, next_offset: int) -> ValidatedRecords:
    """A leader's validation and offset assignment, CreateTime, epoch 3."""
    return assign_offsets(
        batch,
        next_offset=next_offset,
        leader_epoch=3,
        max_message_bytes=1 << 20,
        timestamp_type=TimestampType.CREATE_TIME,
        now_ms=0,
    )


@settings(max_examples=150, deadline=None)
@given(records)
def test_the_record_walk_agrees_with_kio(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
) -> None:
    """Every record of a client's uncompressed batch is found, with its offset delta and
    timestamp, where kio's independent reader finds it."""
    batch = build(rows)
    header = read_header(batch)
    walked = list(record_timestamps(batch, header))
    (decoded,) = decode_batches(batch)
    assert [delta for delta, _ in walked] == list(range(len(rows)))
    assert [stamp for _, stamp in walked] == [T0 + delta for *_, delta in rows]
    assert [r.value for r in decoded.batch.records] == [value for _, value, _, _ in rows]
    validated = validate(batch, next_offset=100)
    assert validated.max_timestamp == T0 + max(delta for *_, delta in rows)
    (stored,) = decode_batches(b"".join(validated.chunks))
    assert [r.offset for r in stored.batch.records] == list(range(100, 100 + len(rows)))


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_a_mutated_batch_fails_only_with_a_kafka_error(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    data: st.DataObject,
) -> None:
    """Whatever byte of a batch is changed, validation accepts it or raises a
    KafkaApiError, never an IndexError or a struct.error; a change after the magic byte
    with the CRC left alone is always CORRUPT_MESSAGE."""
    batch = bytearray(build(rows))
    at = data.draw(st.integers(0, len(batch) - 1))
    batch[at] ^= data.draw(st.integers(1, 255))
    fixed = data.draw(st.booleans())
    mutated = fix_crc(bytes(batch)) if fixed and len(batch) > 21 else bytes(batch)
    code = None
    try:
        validate(mutated, next_offset=0)
    except KafkaApiError as exc:
        code = exc.code
    if not fixed and at > 16:
        assert code == ErrorCode.CORRUPT_MESSAGE


def test_a_linger_sized_batch_is_walked_whole() -> None:
    """A batch as large as a producer's linger makes: offset deltas of one, two and three
    bytes (0-63, 64-8191, 8192 on) and timestamp deltas of one, two and three bytes are
    all read where kio's reader finds them."""
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(None, b"v" * 100, [], i * 7) for i in range(9000)]
    batch = build(rows)
    walked = list(record_timestamps(batch, read_header(batch)))
    assert walked == [(i, T0 + i * 7) for i in range(9000)]
    validated = validate(batch, next_offset=5)
    assert (validated.max_timestamp, validated.offset_of_max_timestamp) == (T0 + 8999 * 7, 9004)
    (stored,) = decode_batches(b"".join(validated.chunks))
    assert [r.offset for r in stored.batch.records] == list(range(5, 9005))


# ----------------------------------------------------------- the scan a field at a time


def scanned(batch: bytes) -> list[int] | None:
    header = read_header(batch)
    found = record_scan.scan(
        batch, RECORD_BATCH_OVERHEAD, header.size, max(header.records_count, 0)
    )
    return None if found is None else [header.first_timestamp + int(d) for d in found[0]]


def walked_or_error(batch: bytes) -> list[int] | ErrorCode:
    try:
        return [stamp for _, stamp in record_timestamps(batch, read_header(batch))]
    except KafkaApiError as exc:
        return exc.code


many_records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=3)),
        st.one_of(st.none(), st.binary(max_size=150)),
        st.just(list[tuple[str, bytes | None]]()),
        st.integers(-(4 * 10**5), 4 * 10**5),  # deltas from the first within three bytes
    ),
    min_size=record_scan.MIN_RECORDS,
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(many_records, st.data())
def test_the_scan_accepts_only_what_the_walk_accepts_with_the_same_timestamps(
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    data: st.DataObject,
) -> None:
    """The field-at-a-time scan of a client's batch gives the record timestamps the walk
    finds; whatever byte of its records is then changed, the scan still agrees with the
    walk or declines, and never accepts a batch the walk refuses."""
    batch = bytearray(build(rows))
    assert scanned(bytes(batch)) == walked_or_error(bytes(batch))
    at = data.draw(st.integers(RECORD_BATCH_OVERHEAD, len(batch) - 1))
    batch[at] ^= data.draw(st.integers(1, 255))
    found = scanned(bytes(batch))
    if found is not None:
        assert found == walked_or_error(bytes(batch))


def test_the_scan_covers_a_producers_linger_batch() -> None:
    """A batch as a producer's linger makes it (null keys, 100-byte values, offset deltas
    past 8191, timestamps spread over seconds, some before the first) is scanned, not
    walked, to the walk's timestamps."""
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(None, b"v" * 100, [], (i * 37) % 5000 - 60) for i in range(9000)]
    batch = build(rows)
    assert scanned(batch) == walked_or_error(batch)


def test_runs_of_one_size_and_sizes_that_vary_are_scanned_alike() -> None:
    """Where records keep one size the scan checks a guessed run of them at once, where
    sizes vary it hops one by one, and it switches between the two: long runs, runs cut
    short, every record another size, a lone odd record, all to the walk's timestamps."""
    sizes = [100] * 700 + [7, 90, 3, 120, 44] * 30 + [60] * 9 + [61] + [60] * 300 + [1] * 5
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(None, b"v" * size, [], i % 97) for i, size in enumerate(sizes)]
    batch = build(rows)
    found = scanned(batch)
    assert found is not None
    assert found == walked_or_error(batch)


def test_records_the_scan_does_not_cover_are_walked() -> None:
    """Headers, a length varint of three bytes or a timestamp delta of four: the scan
    declines and the walk reads the batch."""
    plain: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    plain = [(b"k", b"v", [], i) for i in range(40)]
    assert scanned(build(plain)) is not None
    header: list[tuple[str, bytes | None]] = [("h", b"x")]
    with_header = [*plain[:-1], (b"k", b"v", header, 39)]
    big_value = [*plain[:-1], (b"k", b"v" * 9000, [], 39)]
    far_timestamp = [*plain[:-1], (b"k", b"v", [], 10**7)]
    for rows in (with_header, big_value, far_timestamp):
        batch = build(rows)
        assert scanned(batch) is None
        validated = validate(batch, next_offset=0)
        assert validated.max_timestamp == T0 + max(delta for *_, delta in rows)


@pytest.mark.parametrize("count", [3, record_scan.MIN_RECORDS])
def test_the_offset_of_the_max_timestamp_counts_records_not_offset_deltas(count: int) -> None:
    """The offset reported for the largest timestamp is the one the leader gives its record
    (the batch's new base offset plus the record's index, LogValidator's offset counter),
    even where the client's offset deltas skip or repeat; first of equal maxima wins."""
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(None, b"v", [], 0) for _ in range(count)]
    rows[1] = (None, b"v", [], 9)
    rows[2] = (None, b"v", [], 9)
    offsets = [0] * (count - 1) + [count - 1]
    validated = validate(build(rows, offsets), next_offset=50)
    assert (validated.max_timestamp, validated.offset_of_max_timestamp) == (T0 + 9, 51)
    assert validated.last_offset == 50 + count - 1


@pytest.mark.parametrize("codec", [0, 1])
def test_a_client_batch_claiming_log_append_time_is_invalid_timestamp(codec: int) -> None:
    """A producer may not set the LogAppendTime bit (LogValidator.validateTimestamp):
    INVALID_TIMESTAMP, under either topic timestamp type; a batch whose records are
    broken is INVALID_RECORD first, as the records are read before they are judged."""
    batch = client_batch([b"a", b"b"], codec=codec)
    claimed = fix_crc(set_field(batch, "attributes", get_field(batch, "attributes") | 0x08))
    for timestamp_type in TimestampType:
        with pytest.raises(KafkaApiError) as raised:
            assign_offsets(
                claimed,
                next_offset=0,
                leader_epoch=0,
                max_message_bytes=1 << 20,
                timestamp_type=timestamp_type,
                now_ms=0,
            )
        assert raised.value.code == ErrorCode.INVALID_TIMESTAMP
    broken = bytearray(client_batch([b"a"]))
    broken[-1] = 0x02  # the header count: one header, which is not there
    broken_claim = fix_crc(set_field(bytes(broken), "attributes", 0x08))
    with pytest.raises(KafkaApiError) as raised:
        validate(broken_claim, next_offset=0)
    assert raised.value.code == ErrorCode.INVALID_RECORD


def assigned(batch: bytes, *, compacted: bool) -> ErrorCode:
    """The code a leader answers ``batch`` with (NONE: accepted)."""
    try:
        assign_offsets(
            batch,
            next_offset=0,
            leader_epoch=0,
            max_message_bytes=1 << 20,
            timestamp_type=TimestampType.CREATE_TIME,
            now_ms=0,
            checks=RecordChecks(compacted=compacted),
        )
    except KafkaApiError as exc:
        return exc.code
    return ErrorCode.NONE


@pytest.mark.parametrize("count", [3, record_scan.MIN_RECORDS + 8])
def test_a_compacted_topic_refuses_a_record_without_a_key(count: int) -> None:
    """LogValidator.validateKey: on a compacted topic one record without a key makes the
    batch INVALID_RECORD, whether the batch is walked or scanned; elsewhere, and with
    every key present (empty ones too), it is accepted."""
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(b"k%d" % i, b"v", [], i) for i in range(count)]
    rows[count // 2] = (b"", None, [], 0)  # an empty key is a key; a null value a tombstone
    assert assigned(build(rows), compacted=True) is ErrorCode.NONE
    rows[-1] = (None, b"v", [], 0)
    assert assigned(build(rows), compacted=True) is ErrorCode.INVALID_RECORD
    assert assigned(build(rows), compacted=False) is ErrorCode.NONE


def test_key_and_timestamp_errors_of_one_batch_resolve_as_kafka_does() -> None:
    """A batch claiming LogAppendTime on a compacted topic: records without a key get the
    key error instead of the timestamp one, and any timestamp error makes the batch
    INVALID_TIMESTAMP (processRecordErrors): every key missing is INVALID_RECORD, one
    key present INVALID_TIMESTAMP."""

    def claiming(keys: list[bytes | None]) -> bytes:
        rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
        rows = [(key, b"v", [], 0) for key in keys]
        batch = build(rows)
        return fix_crc(set_field(batch, "attributes", get_field(batch, "attributes") | 0x08))

    assert assigned(claiming([None, None]), compacted=True) is ErrorCode.INVALID_RECORD
    assert assigned(claiming([None, b"k"]), compacted=True) is ErrorCode.INVALID_TIMESTAMP
    assert assigned(claiming([None, None]), compacted=False) is ErrorCode.INVALID_TIMESTAMP


def compressed_as(batch: bytes, codec: int) -> bytes:
    """``batch`` (uncompressed) with its records compressed by ``codec``, as a producer
    of that codec sends them (snappy and lz4 in kemu's literal framings, which every
    reader of the codec accepts)."""
    records = batch[RECORD_BATCH_OVERHEAD:]
    payload = (
        zstandard.ZstdCompressor().compress(records) if codec == 4 else compress(codec, records)
    )
    out = bytearray(batch[:RECORD_BATCH_OVERHEAD] + payload)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, get_field(batch, "attributes") | codec)
    return fix_crc(bytes(out))


def checked(
    batch: bytes,
    checks: RecordChecks,
    *,
    now_ms: int = T0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> ValidatedRecords:
    """``batch`` validated by a leader holding its records to ``checks``."""
    return assign_offsets(
        batch,
        next_offset=0,
        leader_epoch=0,
        max_message_bytes=1 << 20,
        timestamp_type=timestamp_type,
        now_ms=now_ms,
        checks=checks,
    )


def refusal(batch: bytes, checks: RecordChecks, *, now_ms: int = T0) -> RecordValidationError:
    """The record refusal a leader answers ``batch`` with under CreateTime."""
    with pytest.raises(RecordValidationError) as raised:
        checked(batch, checks, now_ms=now_ms)
    return raised.value


COMPACTED = RecordChecks(topic_partition="t-0", compacted=True)
KEY_ERROR = "Compacted topic cannot accept message without key in topic partition t-0."


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("count", [3, record_scan.MIN_RECORDS + 8])
def test_records_without_a_key_are_named_by_their_index(codec: int, count: int) -> None:
    """LogValidator.validateKey in both of its paths: on a compacted topic every record
    without a key, of an uncompressed batch (walked or scanned) or of a compressed one of
    any codec, is a record error with its index in the batch and Kafka's message, and the
    batch is INVALID_RECORD ("One or more records have been rejected")."""
    rows: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]
    rows = [(b"k%d" % i, b"v", [], i) for i in range(count)]
    rows[1] = (None, b"v", [], 1)
    rows[-1] = (None, None, [], count - 1)
    batch = build(rows)
    if codec:
        batch = compressed_as(batch, codec)
    refused = refusal(batch, COMPACTED)
    assert refused.code is ErrorCode.INVALID_RECORD
    assert refused.detail == "One or more records have been rejected"
    assert refused.record_errors == ((1, KEY_ERROR), (count - 1, KEY_ERROR))
    keyed = build([(b"k", b"v", [], i) for i in range(count)])
    accepted = checked(compressed_as(keyed, codec) if codec else keyed, COMPACTED)
    assert accepted.last_offset == count - 1


@pytest.mark.parametrize("codec", [0, 1, 3])
def test_timestamps_too_far_from_the_broker_time_refuse_the_batch(codec: int) -> None:
    """LogValidator.validateTimestamp under CreateTime: a record whose timestamp is more
    than message.timestamp.difference.max.ms from the broker's time, before or after it,
    is INVALID_TIMESTAMP with its index, offset and the window in Kafka's words; one at
    the window's edge, and a record without a timestamp (-1), pass."""
    now, most = T0, 1000
    stamps = [now - most, now - most - 1, -1, now + most + 5, now + most]
    batch = client_batch([b"v"] * len(stamps), timestamps=stamps)
    batch = compressed_as(batch, codec) if codec else batch
    checks = RecordChecks(topic_partition="t-0", max_difference_ms=most)
    refused = refusal(batch, checks, now_ms=now)
    assert refused.code is ErrorCode.INVALID_TIMESTAMP
    assert refused.detail == "One or more records have been rejected due to invalid timestamp"
    window = f"The timestamp should be within [{now - most}, {now + most}]"
    assert refused.record_errors == (
        (1, f"Timestamp {now - most - 1} of message with offset 1 is out of range. {window}"),
        (3, f"Timestamp {now + most + 5} of message with offset 3 is out of range. {window}"),
    )
    inside = client_batch([b"v", b"w"], timestamps=[now - most, now + most])
    inside = compressed_as(inside, codec) if codec else inside
    assert checked(inside, checks, now_ms=now).last_offset == 1
    # Under LogAppendTime the records' own timestamps are not judged.
    appended = checked(batch, checks, now_ms=now, timestamp_type=TimestampType.LOG_APPEND_TIME)
    assert appended.max_timestamp == now


def test_the_default_bound_refuses_no_timestamp() -> None:
    """Long.MaxValue, the default, bounds nothing: the extremes of a record timestamp
    pass (Java's Math.abs of the difference never exceeds it)."""
    unbounded = RecordChecks(max_difference_ms=LONG_MAX)
    for stamp in (0, -(1 << 62), (1 << 62), 1 << 40):
        assert checked(client_batch([b"v"], timestamps=[stamp]), unbounded).last_offset == 0


@pytest.mark.parametrize(
    ("codec", "shown"),
    [
        (0, "DefaultRecord(offset={i}, timestamp={t}, key=0 bytes, value=2 bytes)"),
        (1, "PartialDefaultRecord(offset={i}, timestamp={t}, key=-1 bytes, value=2 bytes)"),
    ],
)
def test_a_batch_claiming_log_append_time_names_every_record(codec: int, shown: str) -> None:
    """A producer's batch with the LogAppendTime bit: every record is refused with
    Kafka's text, the record printed as Kafka prints it (an uncompressed batch's
    DefaultRecord; a compressed one's PartialDefaultRecord, read without key and value,
    its null key -1 bytes); on a compacted topic a record without a key gets the key
    error first (validateKey, then validateTimestamp)."""
    batch = client_batch([b"v1", b"v2"], codec=codec, key=None)
    claimed = fix_crc(set_field(batch, "attributes", get_field(batch, "attributes") | 0x08))
    refused = refusal(claimed, RecordChecks(topic_partition="t-0"))
    assert refused.code is ErrorCode.INVALID_TIMESTAMP
    assert refused.record_errors == tuple(
        (
            i,
            f"Invalid timestamp type in message {shown.format(i=i, t=T0 + i)}. "
            "Producer should not set timestamp type to LogAppendTime.",
        )
        for i in range(2)
    )
    keyless = refusal(claimed, COMPACTED)
    assert keyless.code is ErrorCode.INVALID_RECORD
    assert keyless.record_errors == ((0, KEY_ERROR), (1, KEY_ERROR))


def test_the_record_printed_has_its_own_key_and_value_sizes() -> None:
    """The LogAppendTime message prints each record's key and value sizes, headers or
    not (a header's sizes are not the value's)."""
    batch = build([(b"key", b"value", [("h", b"xx")], 0), (b"k", b"", [], 1)])
    claimed = fix_crc(set_field(batch, "attributes", get_field(batch, "attributes") | 0x08))
    refused = refusal(claimed, RecordChecks())
    assert [why.split(". ")[0] for _, why in refused.record_errors] == [
        f"Invalid timestamp type in message DefaultRecord(offset=0, timestamp={T0}, "
        "key=3 bytes, value=5 bytes)",
        f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={T0 + 1}, "
        "key=1 bytes, value=0 bytes)",
    ]
