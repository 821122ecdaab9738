"""ZooKeeper's wire encoding (jute) of multi-op requests and their replies, and of the
replies to a child listing and to a read.

The ZooKeeper adapter sends every controller write as a multi-op, thousands of them in a
bulk creation. aiozk builds and parses them through its generic ``Part`` classes (a
``render``/``parse`` call per field, a new ``struct`` format per string), which costs more
client CPU per multi than the server spends on it. These functions produce and read the
very same bytes with one precompiled ``struct`` per record; a test compares them with
aiozk's own encoding, field for field. The same goes for the reply to ``getChildren``
(the controller lists ``/brokers/topics`` at every topic change: thousands of names) and
to ``getData`` (pipelined reads of thousands of znodes: partition states, topic configs).

Request (after the 4-byte frame length): ``xid``, opcode 14, then per op a multi header
(``type``, ``done=false``, ``err=-1``) and the op's record, then a closing header
(``-1``, ``true``, ``-1``). Reply payload (after the reply header): per op a multi header
whose ``type`` is the op's opcode and then its result record, or ``-1`` and an error code
(``0`` for an op rolled back before the failing one, ``-2`` for one after it), then a
closing header.
"""

from __future__ import annotations

import struct

import msgspec

__all__ = [
    "OP_CHECK",
    "OP_CREATE",
    "OP_CREATE2",
    "OP_DELETE",
    "OP_GET_CHILDREN",
    "OP_GET_DATA",
    "OP_MULTI",
    "OP_SET_DATA",
    "ChildrenReply",
    "DataReply",
    "MultiReply",
    "OpReply",
    "RawStat",
    "check_op",
    "create_op",
    "delete_op",
    "multi_request",
    "parse_children_reply",
    "parse_data_reply",
    "parse_multi_reply",
    "set_data_op",
]

OP_CREATE = 1
OP_DELETE = 2
OP_GET_DATA = 4
OP_SET_DATA = 5
OP_GET_CHILDREN = 8
OP_CHECK = 13
OP_MULTI = 14
OP_CREATE2 = 15

_INT = struct.Struct("!i")
_REQUEST_HEADER = struct.Struct("!ii")  # xid, opcode
_MULTI_HEADER = struct.Struct("!i?i")  # type, done, err
_STAT = struct.Struct("!qqqqiiiqiiq")
_OPEN_ACL = (
    _INT.pack(1)  # one ACL: all permissions for world:anyone
    + _INT.pack(0x1F)
    + _INT.pack(5)
    + b"world"
    + _INT.pack(6)
    + b"anyone"
)
_END = _MULTI_HEADER.pack(-1, True, -1)


def _header(opcode: int) -> bytes:
    return _MULTI_HEADER.pack(opcode, False, -1)


_CHECK_HEADER = _header(OP_CHECK)
_DELETE_HEADER = _header(OP_DELETE)
_SET_DATA_HEADER = _header(OP_SET_DATA)
_CREATE_HEADERS = {OP_CREATE: _header(OP_CREATE), OP_CREATE2: _header(OP_CREATE2)}


def _string(text: str) -> bytes:
    raw = text.encode()
    return _INT.pack(len(raw)) + raw


def check_op(path: str, version: int) -> bytes:
    return _CHECK_HEADER + _string(path) + _INT.pack(version)


def create_op(path: str, data: bytes, flags: int, *, opcode: int = OP_CREATE2) -> bytes:
    """A create (``OP_CREATE2`` also returns the new node's stat) with an open ACL;
    ``flags``: 1 ephemeral, 2 sequential."""
    return (
        _CREATE_HEADERS[opcode]
        + _string(path)
        + _INT.pack(len(data))
        + data
        + _OPEN_ACL
        + _INT.pack(flags)
    )


def set_data_op(path: str, data: bytes, version: int) -> bytes:
    return _SET_DATA_HEADER + _string(path) + _INT.pack(len(data)) + data + _INT.pack(version)


def delete_op(path: str, version: int) -> bytes:
    return _DELETE_HEADER + _string(path) + _INT.pack(version)


def multi_request(xid: int, ops: list[bytes]) -> bytes:
    """The frame body of a multi of the encoded ``ops`` (without the length prefix)."""
    return b"".join((_REQUEST_HEADER.pack(xid, OP_MULTI), *ops, _END))


class RawStat(msgspec.Struct, frozen=True, gc=False):
    """A znode's stat as ZooKeeper sends it (the attribute names of aiozk's ``Stat``).
    The reply values here are ``gc=False`` structs (immutable, no cycle possible): a bulk
    deletion reads 31,000 multi replies, and the cyclic collector need not walk them."""

    created_zxid: int
    last_modified_zxid: int
    created: int
    modified: int
    version: int
    child_version: int
    acl_version: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    last_modified_children: int


class OpReply(msgspec.Struct, frozen=True, gc=False):
    """One op's result in a multi reply: the created path, the stat (create2, set)."""

    path: str | None = None
    stat: RawStat | None = None


class MultiReply(msgspec.Struct, frozen=True, gc=False):
    """Per op, its ``OpReply`` or the error code it failed with (``0``/``-2``: an op
    rolled back because another one failed); ``failed`` if any did."""

    responses: tuple[OpReply | int, ...]
    failed: bool = False


_CHECKED = OpReply()


def parse_multi_reply(payload: bytes) -> MultiReply:
    """Read a multi reply's payload (after the reply header)."""
    out: list[OpReply | int] = []
    offset = 0
    failed = False
    while True:
        kind, done, _ = _MULTI_HEADER.unpack_from(payload, offset)
        offset += _MULTI_HEADER.size
        if done:
            return MultiReply(tuple(out), failed)
        if kind == -1:
            (code,) = _INT.unpack_from(payload, offset)
            offset += _INT.size
            out.append(code)
            failed = True
        elif kind in (OP_CREATE, OP_CREATE2):
            (size,) = _INT.unpack_from(payload, offset)
            offset += _INT.size
            path = payload[offset : offset + size].decode()
            offset += size
            stat = None
            if kind == OP_CREATE2:
                stat = RawStat(*_STAT.unpack_from(payload, offset))
                offset += _STAT.size
            out.append(OpReply(path=path, stat=stat))
        elif kind == OP_SET_DATA:
            out.append(OpReply(stat=RawStat(*_STAT.unpack_from(payload, offset))))
            offset += _STAT.size
        elif kind in (OP_CHECK, OP_DELETE):
            out.append(_CHECKED)
        else:
            raise ValueError(f"unexpected op type {kind} in a multi reply")


class ChildrenReply(msgspec.Struct, frozen=True, gc=False):
    """A ``getChildren`` reply: the names, in the server's order."""

    children: list[str]


def parse_children_reply(payload: bytes) -> ChildrenReply:
    (count,) = _INT.unpack_from(payload, 0)
    offset = _INT.size
    names: list[str] = []
    for _ in range(count):
        (size,) = _INT.unpack_from(payload, offset)
        offset += _INT.size
        names.append(payload[offset : offset + size].decode())
        offset += size
    return ChildrenReply(names)


class DataReply(msgspec.Struct, frozen=True, gc=False):
    """A ``getData`` reply: the znode's data (``None`` for a null buffer, as aiozk reads
    it) and its stat (the attribute names of aiozk's ``GetDataResponse``)."""

    data: bytes | None
    stat: RawStat


def parse_data_reply(payload: bytes) -> DataReply:
    (size,) = _INT.unpack_from(payload, 0)
    offset = _INT.size
    data = None
    if size >= 0:
        data = payload[offset : offset + size]
        offset += size
    return DataReply(data, RawStat(*_STAT.unpack_from(payload, offset)))
