"""The frame codec the TCP transport uses: round trips, limits, and late message types."""

from __future__ import annotations

import struct

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.base import ActorRef, Message
from protocol.codec import (
    CODEC_VERSION,
    FrameReader,
    decode_envelope,
    encode_envelope,
    frame,
    message_types,
)
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import FrameError
from tests.support.network import NetTestPing, ping

REF = {"node": "a", "name": "b"}
names = st.text(min_size=1, max_size=12)
envelopes = st.builds(
    Envelope,
    src=st.builds(ActorRef, names, names),
    dst=st.builds(ActorRef, names, names),
    corr=st.integers(0, 2**63 - 1),
    kind=st.sampled_from(EnvelopeKind),
    payload=st.builds(NetTestPing, seq=st.integers(-(2**63), 2**63 - 1), note=st.text()),
)


@given(batch=st.lists(envelopes, min_size=1, max_size=8), cuts=st.lists(st.integers(1, 64)))
def test_frames_survive_any_chunking(batch: list[Envelope], cuts: list[int]) -> None:
    """Envelopes framed back to back decode to themselves however the stream is cut."""
    stream = b"".join(frame(env) for env in batch)
    reader = FrameReader()
    bodies: list[bytes] = []
    pos = 0
    for size in [*cuts, len(stream)]:
        bodies += reader.feed(stream[pos : pos + size])
        pos += size
    assert [decode_envelope(b) for b in bodies] == batch
    assert reader.pending == 0


def test_wire_format_is_the_documented_array() -> None:
    """A frame body is ``[version, src, dst, corr, kind, payload]`` with a tagged payload."""
    env = ping("a", "b", 3)
    body = frame(env)[4:]
    assert struct.unpack(">I", frame(env)[:4]) == (len(body),)
    assert body == encode_envelope(env)
    assert msgspec.msgpack.decode(body) == [
        CODEC_VERSION,
        {"node": "a", "name": "actor"},
        {"node": "b", "name": "actor"},
        0,
        "tell",
        {"type": "NetTestPing", "seq": 3, "note": ""},
    ]


def test_length_over_the_limit_fails_before_buffering() -> None:
    """A length prefix over the limit raises as soon as the 4 bytes are in."""
    reader = FrameReader(max_bytes=100)
    assert reader.feed(b"\x00\x00") == []
    with pytest.raises(FrameError, match="exceeds the limit"):
        reader.feed(b"\x00\x65")
    with pytest.raises(FrameError, match="exceeds the limit"):
        frame(ping("a", "b", 1, note="x" * 200), max_bytes=100)


def test_a_partial_frame_stays_pending() -> None:
    """Bytes of an incomplete frame are held back, and counted, until the rest arrives."""
    data = frame(ping("a", "b", 1))
    reader = FrameReader()
    assert reader.feed(data[:7]) == []
    assert reader.pending == 7
    assert reader.feed(data[7:]) == [data[4:]]
    assert reader.pending == 0


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        (b"\xc1", "malformed frame header"),
        (msgspec.msgpack.encode([99, REF, REF, 0, "tell", {}]), "version"),
        (
            msgspec.msgpack.encode([CODEC_VERSION, REF, REF, 0, "tell", {"type": "NoSuchTag"}]),
            "malformed payload",
        ),
        (
            msgspec.msgpack.encode([CODEC_VERSION, REF, REF, 0, "tell", {"type": "NetTestPing"}]),
            "malformed payload",
        ),
        (
            msgspec.msgpack.encode([CODEC_VERSION, REF, REF, 0, "tell", {}]).replace(
                b"\xa4tell", b"\xa4\x80ell"
            ),
            "malformed frame header",
        ),
        (
            msgspec.msgpack.encode(
                [CODEC_VERSION, REF, REF, 0, "tell", {"type": "NetTestPinX"}]
            ).replace(b"NetTestPinX", b"NetTestPin\x80"),
            "malformed payload",
        ),
    ],
    ids=[
        "garbage",
        "version",
        "unknown-tag",
        "missing-field",
        "header-not-utf8",
        "payload-not-utf8",
    ],
)
def test_malformed_bodies_raise_frame_error(body: bytes, complaint: str) -> None:
    """Garbage, a foreign version, an unknown tag, a missing field or a string that is not
    UTF-8 is a FrameError."""
    with pytest.raises(FrameError, match=complaint):
        decode_envelope(body)


def test_message_types_defined_later_are_decoded() -> None:
    """A Message subclass defined after the decoder was built is still decoded."""
    decode_envelope(frame(ping("a", "b", 1))[4:])

    class NetTestLateComer(Message, frozen=True, kw_only=True):
        value: int

    env = Envelope(
        src=ActorRef("a", "x"),
        dst=ActorRef("b", "y"),
        corr=5,
        kind=EnvelopeKind.ASK,
        payload=NetTestLateComer(value=9),
    )
    assert NetTestLateComer in message_types()
    assert decode_envelope(frame(env)[4:]) == env
