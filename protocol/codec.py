"""The typed frame codec for kemu's own TCP transport. MessagePack via msgspec; never pickle.

A frame body is a msgpack array ``[version, src, dst, corr, kind, payload]`` where
``payload`` is a ``Message`` tagged with its class name. The header is decoded first with
the payload left raw, then the payload is decoded against the union of every registered
``Message`` subclass, so an unknown tag, a wrong field type or a missing field is a
``FrameError``, never a half-built object.

Length prefixing (4 bytes, big endian) and the size limit are applied by ``frame`` and
``FrameReader`` so that transports share one implementation.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Union

import msgspec

from protocol.base import ActorRef, Message
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import FrameError

CODEC_VERSION = 1
MAX_FRAME_BYTES = 16 * 1024 * 1024  # like Kafka's socket.request.max.bytes (100 MiB) but smaller
_LEN = struct.Struct(">I")


class _WireHeader(msgspec.Struct, array_like=True, frozen=True):
    version: int
    src: ActorRef
    dst: ActorRef
    corr: int
    kind: EnvelopeKind
    payload: msgspec.Raw


def message_types() -> tuple[type[Message], ...]:
    """Every concrete ``Message`` subclass currently defined, sorted by tag."""
    seen: dict[str, type[Message]] = {}
    stack: list[type[Message]] = list(Message.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        other = seen.get(cls.__name__)
        if other is not None and other is not cls:
            raise TypeError(f"two Message classes share the tag {cls.__name__!r}")
        seen[cls.__name__] = cls
    return tuple(seen[k] for k in sorted(seen))


@lru_cache(maxsize=8)
def _payload_decoder(types: tuple[type[Message], ...]) -> msgspec.msgpack.Decoder[Any]:
    union: Any = Union[types]  # noqa: UP007 - a runtime-built union needs the subscript form
    return msgspec.msgpack.Decoder(union)


_header_decoder = msgspec.msgpack.Decoder(_WireHeader)
_encoder = msgspec.msgpack.Encoder()


def encode_envelope(env: Envelope) -> bytes:
    """The body of one frame (without the length prefix)."""
    payload = msgspec.Raw(_encoder.encode(env.payload))
    return _encoder.encode(
        _WireHeader(CODEC_VERSION, env.src, env.dst, env.corr, env.kind, payload)
    )


def decode_envelope(body: bytes) -> Envelope:
    """Decode one frame body; any malformed content raises ``FrameError``."""
    try:
        head = _header_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FrameError(f"malformed frame header: {exc}") from None
    if head.version != CODEC_VERSION:
        raise FrameError(f"unsupported codec version {head.version} (this is {CODEC_VERSION})")
    try:
        payload = _payload_decoder(message_types()).decode(head.payload)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise FrameError(f"malformed payload: {exc}") from None
    return Envelope(src=head.src, dst=head.dst, corr=head.corr, kind=head.kind, payload=payload)


def frame(env: Envelope, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Length-prefixed frame of an envelope; refuses to build one over ``max_bytes``."""
    body = encode_envelope(env)
    if len(body) > max_bytes:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {max_bytes}")
    return _LEN.pack(len(body)) + body


class FrameReader:
    """Splits a byte stream into frame bodies, enforcing the size limit before buffering."""

    def __init__(self, *, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_bytes

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete frame bodies. Raises ``FrameError`` on a
        length over the limit (the connection must then be closed)."""
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= _LEN.size:
            (size,) = _LEN.unpack_from(self._buf)
            if size > self._max:
                raise FrameError(f"frame length {size} exceeds the limit of {self._max}")
            end = _LEN.size + size
            if len(self._buf) < end:
                break
            out.append(bytes(self._buf[_LEN.size : end]))
            del self._buf[:end]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)
