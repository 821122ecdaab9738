"""The records the group coordinator keeps in ``__consumer_offsets``, in Kafka 2.7's
formats (``GroupMetadataManager``'s key and value schemas), and the choice of the
partition a group lives in (``GroupMetadataManager.partitionFor``).

Every key and value starts with an int16 schema version; a string is an int16 length
and UTF-8 (-1: null), bytes an int32 length, an array an int32 count. What 2.7 writes
(inter.broker.protocol.version 2.7):

* an offset commit: key v1 (group, topic, partition int32); value v3 (offset int64,
  leader epoch int32, metadata, commit timestamp int64), or v1 (offset, metadata,
  commit timestamp, expire timestamp) when the commit named an explicit retention;
* a group: key v2 (group); value v3 (protocol type, generation int32, protocol, leader,
  current state timestamp int64, members: member id, group instance id, client id,
  client host, rebalance timeout int32, session timeout int32, subscription bytes,
  assignment bytes);
* a tombstone: the key with a null value.

Reading accepts every version 2.7 reads: offset keys v0-v1, offset values v0-v3, group
values v0-v3.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

__all__ = [
    "GroupKey",
    "GroupMember",
    "GroupValue",
    "OffsetKey",
    "OffsetValue",
    "RecordFormatError",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "java_string_hash",
    "partition_for",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION: Final = 1
GROUP_KEY_VERSION: Final = 2
OFFSET_VALUE_VERSION: Final = 3
OFFSET_VALUE_EXPIRING_VERSION: Final = 1
GROUP_VALUE_VERSION: Final = 3


class RecordFormatError(ValueError):
    """A key or value of ``__consumer_offsets`` that cannot be read."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: h = 31·h + c over the UTF-16 code units, in wrapping
    signed 32-bit arithmetic."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """``GroupMetadataManager.partitionFor``: ``Utils.abs(groupId.hashCode) % n``, where
    ``Utils.abs`` maps -2^31 to 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ------------------------------------------------------------------------ writing


class _Writer:
    def __init__(self, version: int) -> None:
        self.out = bytearray(_I16.pack(version))

    def i32(self, value: int) -> _Writer:
        self.out += _I32.pack(value)
        return self

    def i64(self, value: int) -> _Writer:
        self.out += _I64.pack(value)
        return self

    def string(self, value: str | None) -> _Writer:
        if value is None:
            self.out += _I16.pack(-1)
        else:
            raw = value.encode()
            self.out += _I16.pack(len(raw)) + raw
        return self

    def bytes_(self, value: bytes) -> _Writer:
        self.out += _I32.pack(len(value)) + value
        return self


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed offset (``OffsetAndMetadata``); ``expire_timestamp`` only in v1."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[GroupMember, ...]


def encode_offset_key(key: OffsetKey) -> bytes:
    """``GroupMetadataManager.offsetCommitKey`` (v1)."""
    w = _Writer(OFFSET_KEY_VERSION).string(key.group).string(key.topic).i32(key.partition)
    return bytes(w.out)


def encode_group_key(group: str) -> bytes:
    """``GroupMetadataManager.groupMetadataKey`` (v2)."""
    return bytes(_Writer(GROUP_KEY_VERSION).string(group).out)


def encode_offset_value(value: OffsetValue) -> bytes:
    """``GroupMetadataManager.offsetCommitValue``: v3, or v1 with an explicit expiry."""
    if value.expire_timestamp is not None:
        w = _Writer(OFFSET_VALUE_EXPIRING_VERSION).i64(value.offset).string(value.metadata)
        w.i64(value.commit_timestamp).i64(value.expire_timestamp)
        return bytes(w.out)
    w = _Writer(OFFSET_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
    w.string(value.metadata).i64(value.commit_timestamp)
    return bytes(w.out)


def encode_group_value(value: GroupValue) -> bytes:
    """``GroupMetadataManager.groupMetadataValue`` (v3)."""
    w = _Writer(GROUP_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


# ------------------------------------------------------------------------ reading


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise RecordFormatError("a field runs past the end of the record")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def string(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        try:
            return self._take(length).decode()
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"a string is not UTF-8: {exc}") from None

    def text(self) -> str:
        value = self.string()
        if value is None:
            raise RecordFormatError("a non-null string is null")
        return value

    def bytes_(self) -> bytes:
        return self._take(self.i32())


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    """``GroupMetadataManager.readMessageKey``: an offset key (v0-v1) or a group key
    (v2)."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.text(), r.text(), r.i32())
    if version == GROUP_KEY_VERSION:
        return GroupKey(r.text())
    raise RecordFormatError(f"unknown key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    """``GroupMetadataManager.readOffsetMessageValue`` (v0-v3)."""
    r = _Reader(data)
    version = r.i16()
    if version == 0:
        return OffsetValue(offset=r.i64(), metadata=r.text(), commit_timestamp=r.i64())
    if version == 1:
        offset, metadata, commit = r.i64(), r.text(), r.i64()
        return OffsetValue(offset, metadata, commit, expire_timestamp=r.i64())
    if version == 2:
        return OffsetValue(offset=r.i64(), metadata=r.text(), commit_timestamp=r.i64())
    if version == OFFSET_VALUE_VERSION:
        offset, epoch = r.i64(), r.i32()
        return OffsetValue(offset, r.text(), r.i64(), leader_epoch=epoch)
    raise RecordFormatError(f"unknown offset value version {version}")


def decode_group_value(data: bytes) -> GroupValue:
    """``GroupMetadataManager.readGroupMessageValue`` (v0-v3)."""
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= GROUP_VALUE_VERSION:
        raise RecordFormatError(f"unknown group value version {version}")
    protocol_type = r.text()
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.text()
        instance = r.string() if version >= 3 else None
        client_id, client_host = r.text(), r.text()
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        if version == 0:
            rebalance = session
        members.append(
            GroupMember(
                member_id=member_id,
                group_instance_id=instance,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout_ms=rebalance,
                session_timeout_ms=session,
                subscription=r.bytes_(),
                assignment=r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))
