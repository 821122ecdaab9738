"""Record batches as ``actors.log.records`` reads them, checked against independent code:
batches a client builds (aiokafka) with any keys, values, headers and timestamps are
walked to the records kio's reader finds; and no mutation of a batch makes the leader's
validation fail other than with a Kafka error code.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actors.log.records import (
    TimestampType,
    ValidatedRecords,
    assign_offsets,
    read_header,
    record_timestamps,
)
from protocol.errors import ErrorCode, KafkaApiError
from tests.support.record_batches import decode_batches, fix_crc

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
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (key, value, hdrs, delta) in enumerate(rows):
        builder.append(i, timestamp=T0 + delta, key=key, value=value, headers=hdrs)
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
