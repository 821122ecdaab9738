"""Inputs for kemu's own TCP endpoints (the internal transport, the store server, the
control endpoint), as hypothesis strategies: frames of ``protocol.codec`` (a 4-byte size,
then a msgpack array ``[version, src, dst, corr, kind, payload]``) carrying typed messages
drawn along their msgspec schemas, the same mutated, msgpack values of any shape, random
bytes and huge sizes; and the handshake of ``cluster.network.auth`` garbled."""

from __future__ import annotations

import functools
import importlib
import pkgutil
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from hypothesis import strategies as st

import protocol
from cluster.fuzz.mutations import INTERESTING_INT32, mutated
from protocol.base import ActorRef, Message
from protocol.codec import CODEC_VERSION
from protocol.envelope import EnvelopeKind

MAX_PIPELINED: Final = 4
MAX_ITEMS: Final = 3
_SIZE = struct.Struct(">I")
_INT64: Final = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class HandshakeCase:
    """Bytes written in answer to the challenge: ``prefix``, then the first ``cut`` bytes
    of the right answer (computed from the secret and that connection's nonce), then
    ``suffix``."""

    prefix: bytes
    cut: int
    suffix: bytes


@dataclass(frozen=True, slots=True)
class FramesCase:
    """Bytes written after a completed handshake."""

    data: bytes


TransportCase = HandshakeCase | FramesCase


def all_message_types() -> tuple[type[Message], ...]:
    """Every typed message of ``protocol`` (its modules imported first), sorted by name."""
    for module in pkgutil.iter_modules(protocol.__path__):
        importlib.import_module(f"protocol.{module.name}")
    found: dict[str, type[Message]] = {}
    stack = list(Message.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        found[cls.__name__] = cls
    return tuple(found[name] for name in sorted(found))


def transport_inputs(
    messages: Sequence[type[Message]], destinations: Sequence[ActorRef]
) -> st.SearchStrategy[TransportCase]:
    """Mostly authenticated frames, sometimes a garbled handshake."""
    return st.one_of(
        handshake_cases(),
        st.builds(FramesCase, frame_sequences(messages, destinations)),
        st.builds(FramesCase, frame_sequences(messages, destinations)),
        st.builds(FramesCase, frame_sequences(messages, destinations)),
    )


def handshake_cases() -> st.SearchStrategy[HandshakeCase]:
    return st.builds(
        HandshakeCase,
        st.one_of(st.just(b""), st.binary(max_size=40)),
        st.integers(0, 40),
        st.one_of(st.just(b""), st.binary(max_size=40)),
    )


def frame_sequences(
    messages: Sequence[type[Message]], destinations: Sequence[ActorRef]
) -> st.SearchStrategy[bytes]:
    """One connection's bytes after the handshake: up to ``MAX_PIPELINED`` frames."""
    valid = valid_frames(messages, destinations)
    one = st.one_of(
        valid,
        valid,
        valid.flatmap(mutated),
        st.builds(_frame, msgpack_values().map(_encode)),
        st.binary(max_size=64),
        st.builds(
            lambda size, rest: struct.pack(">i", size) + rest,
            st.sampled_from(INTERESTING_INT32),
            st.binary(max_size=16),
        ),
    )
    return st.lists(one, min_size=1, max_size=MAX_PIPELINED).map(b"".join)


def valid_frames(
    messages: Sequence[type[Message]], destinations: Sequence[ActorRef]
) -> st.SearchStrategy[bytes]:
    """A frame as ``protocol.codec.frame`` writes it, of a message drawn along its schema
    (so mostly one the receiver decodes)."""
    refs = st.one_of(
        st.sampled_from(list(destinations)),
        st.builds(ActorRef, st.text(max_size=8), st.text(max_size=8)),
    )
    envelope = st.tuples(
        st.just(CODEC_VERSION),
        st.builds(ActorRef, st.sampled_from(["fuzz", "broker-0", "launcher", ""]), st.just("x")),
        refs,
        st.integers(*_INT64),
        st.sampled_from([kind.value for kind in EnvelopeKind]),
        st.sampled_from(list(messages)).flatmap(_message_values),
    )
    return envelope.map(lambda values: _frame(_encode(list(values))))


def _frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def _encode(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


def msgpack_values() -> st.SearchStrategy[Any]:
    """Any msgpack value: the shape of nothing in particular."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(*_INT64),
        st.floats(),
        st.text(max_size=16),
        st.binary(max_size=16),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=MAX_ITEMS + 3),
            st.dictionaries(st.text(max_size=8), inner, max_size=MAX_ITEMS),
        ),
        max_leaves=12,
    )


@functools.cache
def _message_values(cls: type[Message]) -> st.SearchStrategy[Any]:
    return _values(msgspec.inspect.type_info(cls))


def _values(info: msgspec.inspect.Type) -> st.SearchStrategy[Any]:
    """Plain msgpack-ready values that decode as the type ``info`` describes (or nearly:
    constraints are ignored on purpose, so values beyond them are drawn too)."""
    i = msgspec.inspect
    if isinstance(info, i.StructType):
        return _struct_values(info)
    if isinstance(info, i.IntType):
        return st.one_of(
            st.integers(-1, 3), st.sampled_from(INTERESTING_INT32), st.integers(*_INT64)
        )
    if isinstance(info, i.FloatType):
        return st.floats()
    if isinstance(info, i.BoolType):
        return st.booleans()
    if isinstance(info, i.StrType):
        return st.one_of(st.sampled_from(["/", "/brokers/ids", "/fuzz", ""]), st.text(max_size=12))
    if isinstance(info, (i.BytesType, i.ByteArrayType, i.MemoryViewType)):
        return st.binary(max_size=32)
    if isinstance(info, i.UUIDType):
        return st.uuids().map(str)
    if isinstance(info, i.NoneType):
        return st.none()
    if isinstance(info, i.EnumType):
        return st.sampled_from([member.value for member in info.cls])
    if isinstance(info, i.LiteralType):
        return st.sampled_from(list(info.values))
    if isinstance(info, (i.ListType, i.VarTupleType, i.SetType, i.FrozenSetType)):
        return st.lists(_values(info.item_type), max_size=MAX_ITEMS)
    if isinstance(info, i.TupleType):
        return st.tuples(*(_values(item) for item in info.item_types)).map(list)
    if isinstance(info, i.DictType):
        return st.dictionaries(_values(info.key_type), _values(info.value_type), max_size=MAX_ITEMS)
    if isinstance(info, i.UnionType):
        return st.one_of([_values(t) for t in info.types])
    return msgpack_values()  # Any, and types no message uses today


def _struct_values(info: msgspec.inspect.StructType) -> st.SearchStrategy[Any]:
    fields = [(field.encode_name, field) for field in info.fields]
    tag = [] if info.tag is None else [(str(info.tag_field), st.just(info.tag))]
    if info.array_like:
        items = [v for _, v in tag] + [_values(field.type) for _, field in fields]
        return st.tuples(*items).map(list)
    return st.fixed_dictionaries(
        {
            **dict(tag),
            **{name: _values(field.type) for name, field in fields if field.required},
        },
        optional={name: _values(field.type) for name, field in fields if not field.required},
    )
