"""The typed frame codec for kemu's own TCP transport. MessagePack via msgspec; never pickle.

A frame body is a msgpack array ``[version, src, dst, corr, kind, payload]`` where
``payload`` is a ``Message`` tagged with its class name. It is decoded against the union of
every registered ``Message`` subclass, so an unknown tag, a wrong field type or a missing
field is a ``FrameError``, never a half-built object.

The union is built once and kept: walking ``Message``'s subclasses on every decode would
cost more than the decode itself. It is rebuilt only when a frame fails to decode and the
set of subclasses has changed since (a module defining new messages was imported later);
then the frame is tried once more.

Length prefixing (4 bytes, big endian) and the size limit are applied by ``frame`` and
``FrameReader`` so that transports share one implementation.
"""

from __future__ import annotations

import struct
from typing import Any, Union

import msgspec

from protocol.base import ActorRef, Message
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import FrameError

CODEC_VERSION = 1
MAX_FRAME_BYTES = 16 * 1024 * 1024  # like Kafka's socket.request.max.bytes (100 MiB) but smaller
_LEN = struct.Struct(">I")
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError)
"""What msgspec raises for bad bytes: a string that is not UTF-8 is a UnicodeDecodeError."""


class _WireHeader(msgspec.Struct, array_like=True, frozen=True):
    """The frame layout with the payload left raw: decoded first when a frame fails the
    one-pass decode, to say precisely what is wrong with it."""

    version: int
    src: ActorRef
    dst: ActorRef
    corr: int
    kind: EnvelopeKind
    payload: msgspec.Raw


class _WireFrame(msgspec.Struct, array_like=True, frozen=True):
    """The frame layout as written: the payload struct is encoded in place (with its tag),
    so encoding is a single pass and yields the same bytes as ``_WireHeader``."""

    version: int
    src: ActorRef
    dst: ActorRef
    corr: int
    kind: EnvelopeKind
    payload: Message


def message_types() -> tuple[type[Message], ...]:
    """Every ``Message`` subclass currently defined, sorted by tag."""
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


class _Decoders:
    """The decoders built for one set of ``Message`` types, replaced when the set grows."""

    def __init__(self) -> None:
        self.types: tuple[type[Message], ...] = ()
        self.payload: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(Message)
        self.frame: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(Any)
        self.refresh()

    def refresh(self) -> bool:
        """Rebuild the decoders if the set of ``Message`` subclasses changed; say whether
        it did."""
        types = message_types()
        if types == self.types:
            return False
        union: Any = Union[types]  # noqa: UP007 - a runtime-built union needs the subscript form
        self.types = types
        self.payload = msgspec.msgpack.Decoder(union)
        self.frame = msgspec.msgpack.Decoder(
            tuple[int, ActorRef, ActorRef, int, EnvelopeKind, union]
        )
        return True


_decoders = _Decoders()
_header_decoder = msgspec.msgpack.Decoder(_WireHeader)
_encoder = msgspec.msgpack.Encoder()


def encode_envelope(env: Envelope) -> bytes:
    """The body of one frame (without the length prefix)."""
    return _encoder.encode(
        _WireFrame(CODEC_VERSION, env.src, env.dst, env.corr, env.kind, env.payload)
    )


def decode_envelope(body: bytes) -> Envelope:
    """Decode one frame body; any malformed content raises ``FrameError``."""
    try:
        version, src, dst, corr, kind, payload = _decoders.frame.decode(body)
    except _DECODE_ERRORS:
        return _decode_carefully(body)
    if version != CODEC_VERSION:
        raise FrameError(f"unsupported codec version {version} (this is {CODEC_VERSION})")
    return Envelope(src=src, dst=dst, corr=corr, kind=kind, payload=payload)


def _decode_carefully(body: bytes) -> Envelope:
    """The slow path for a frame the one-pass decoder refused: header first, for a precise
    error, then the payload, retried once if new ``Message`` types appeared."""
    try:
        head = _header_decoder.decode(body)
    except _DECODE_ERRORS as exc:
        raise FrameError(f"malformed frame header: {exc}") from None
    if head.version != CODEC_VERSION:
        raise FrameError(f"unsupported codec version {head.version} (this is {CODEC_VERSION})")
    try:
        payload = _decoders.payload.decode(head.payload)
    except _DECODE_ERRORS as exc:
        if not _decoders.refresh():
            raise FrameError(f"malformed payload: {exc}") from None
        try:
            payload = _decoders.payload.decode(head.payload)
        except _DECODE_ERRORS as exc2:
            raise FrameError(f"malformed payload: {exc2}") from None
    return Envelope(src=head.src, dst=head.dst, corr=head.corr, kind=head.kind, payload=payload)


def frame(env: Envelope, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Length-prefixed frame of an envelope; refuses to build one over ``max_bytes``."""
    body = encode_envelope(env)
    if len(body) > max_bytes:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {max_bytes}")
    return _LEN.pack(len(body)) + body


class FrameReader:
    """Splits a byte stream into frame bodies, enforcing the size limit before buffering.

    Frames are cut out of each received chunk directly. Only an incomplete frame is kept
    between calls, in a buffer that grows without re-copying and is parsed again only once
    it holds the whole frame, so neither many small frames in one chunk nor one large frame
    in many chunks costs quadratic time."""

    def __init__(self, *, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._max = max_bytes
        self._tail = bytearray()
        self._need = _LEN.size  # bytes the tail must hold before it can yield a frame
        self.error: FrameError | None = None
        """A length over the limit met after complete frames of the same chunk: those
        frames were returned (a server answers them first, as Kafka's ``SocketServer``
        does), and the connection must then be closed. ``feed`` raises it if called again."""

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete frame bodies. A length over the limit
        (the connection must then be closed) raises ``FrameError`` when no complete frame
        comes before it in ``data``; otherwise those frames are returned and the error is
        kept in ``error``."""
        if self.error is not None:
            raise self.error
        if self._tail:
            self._tail += data
            if len(self._tail) < self._need:
                return []
            if self._need == _LEN.size:
                self._need = _LEN.size + self._frame_size(self._tail, 0)
                if len(self._tail) < self._need:
                    return []
            data = bytes(self._tail)
            self._tail = bytearray()
        out: list[bytes] = []
        pos, total = 0, len(data)
        need = _LEN.size
        unpack_from, limit = _LEN.unpack_from, self._max
        while total - pos >= _LEN.size:
            (size,) = unpack_from(data, pos)
            if size > limit:
                error = FrameError(f"frame length {size} exceeds the limit of {limit}")
                if not out:
                    raise error
                self.error, self._tail = error, bytearray()
                return out
            end = pos + _LEN.size + size
            if end > total:
                need = end - pos
                break
            out.append(data[pos + _LEN.size : end])
            pos = end
        if pos < total:
            self._tail = bytearray(memoryview(data)[pos:])
            self._need = need
        return out

    def _frame_size(self, buf: bytes | bytearray, pos: int) -> int:
        (size,) = _LEN.unpack_from(buf, pos)
        if size > self._max:
            raise FrameError(f"frame length {size} exceeds the limit of {self._max}")
        return int(size)

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at end of stream = truncated)."""
        return len(self._tail)
