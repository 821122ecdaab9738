"""The group coordinator's pure parts: the group's partition of ``__consumer_offsets``
as a JVM computes it, ``__consumer_offsets``' records in Kafka 2.7's byte layouts, and
``kemu up``'s group defaults."""

from __future__ import annotations

import pytest

from actors.group.records import (
    GroupKey,
    GroupMember,
    GroupValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
)
from cluster.cli.up import up_config


@pytest.mark.parametrize(
    ("group", "hash_code", "partition"),
    [
        ("test-group", 627841412, 12),
        ("my-group", -1906497762, 12),
        ("group", 98629247, 47),
        ("", 0, 0),
    ],
)
def test_partition_for_is_javas_hash_code_modulo(
    group: str, hash_code: int, partition: int
) -> None:
    """``Utils.abs(groupId.hashCode) % 50``, with the values a JVM gives."""
    assert java_string_hash(group) == hash_code
    assert partition_for(group, 50) == partition


def test_abs_of_the_smallest_int_is_zero() -> None:
    """``Utils.abs(Integer.MIN_VALUE)`` is 0 (``Math.abs`` would stay negative): a group
    hashing to -2^31 lives in partition 0. "polygenelubricants" hashes there."""
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0


def test_keys_and_values_have_kafkas_layout_and_read_back() -> None:
    """Offset key v1, offset value v3 (v1 with an explicit expiry), group key v2 and
    group value v3, byte for byte as ``GroupMetadataManager`` writes them."""
    key = encode_offset_key(OffsetKey("g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetKey("g", "t", 3)
    value = OffsetValue(offset=7, metadata="m", commit_timestamp=1000, leader_epoch=2)
    raw = encode_offset_value(value)
    assert raw == (
        b"\x00\x03" + (7).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x00\x01m"
        + (1000).to_bytes(8, "big")
    )  # fmt: skip
    assert decode_offset_value(raw) == value
    expiring = OffsetValue(offset=7, metadata="", commit_timestamp=1, expire_timestamp=9)
    assert encode_offset_value(expiring)[:2] == b"\x00\x01"
    assert decode_offset_value(encode_offset_value(expiring)) == expiring
    assert encode_group_key("g") == b"\x00\x02\x00\x01g"
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    group = GroupValue(
        protocol_type="consumer",
        generation=4,
        protocol="range",
        leader="m-1",
        current_state_timestamp=5,
        members=(GroupMember("m-1", None, "c", "/127.0.0.1", 300_000, 10_000, b"sub", b"asg"),),
    )
    raw = encode_group_value(group)
    assert raw[:2] == b"\x00\x03"
    assert b"\xff\xff" in raw  # the null group instance id
    assert decode_group_value(raw) == group


def test_unreadable_records_are_refused() -> None:
    """An unknown version or a record cut short is a RecordFormatError."""
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x09\x00\x01g")
    with pytest.raises(RecordFormatError):
        decode_offset_value(b"\x00\x03\x00")


def test_kemu_up_sets_kafkas_local_group_defaults_unless_given() -> None:
    """``kemu up`` lowers the initial rebalance delay to 0 and the offsets topic's
    replication factor to the broker count (at most 3); ``--config`` wins."""
    assert up_config(1, {}) == {
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": "1",
    }
    assert up_config(5, {})["offsets.topic.replication.factor"] == "3"
    given = {"group.initial.rebalance.delay.ms": "3000", "offsets.topic.replication.factor": "2"}
    assert up_config(3, given) == given
