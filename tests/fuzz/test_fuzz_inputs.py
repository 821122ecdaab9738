"""The fuzzer's inputs are what they claim to be: its valid Kafka requests decode with the
listener's own decoder for every API and version a broker advertises, its valid frames
decode with kemu's frame codec, and its reading of frame boundaries matches a server's."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.log.records import check_stored_batch
from cluster.fuzz.frame_inputs import all_message_types, valid_frames
from cluster.fuzz.kafka_inputs import record_batches, request_frames, valid_requests
from cluster.fuzz.mutations import mutated
from cluster.fuzz.targets import frame_boundaries
from cluster.kafka.apis import SERVED_API_VERSIONS, advertised_api_versions
from cluster.kafka.framing import decode_request
from protocol.base import ActorRef
from protocol.codec import decode_envelope
from protocol.errors import KemuError

ADVERTISED = advertised_api_versions(SERVED_API_VERSIONS)
_SIZE = struct.Struct(">i")
_FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(valid_requests(ADVERTISED))
def test_valid_kafka_requests_decode_as_the_listener_decodes(frame: bytes) -> None:
    """Every valid request the fuzzer builds (any advertised API and version) has a true
    size prefix and decodes with ``decode_request`` to the API and version in its header."""
    (size,) = _SIZE.unpack_from(frame)
    assert size == len(frame) - _SIZE.size
    api_key, api_version = struct.unpack_from(">hh", frame, _SIZE.size)
    request = decode_request(frame[_SIZE.size :], ADVERTISED)
    assert (request.api_key, request.api_version) == (api_key, api_version)


@pytest.mark.parametrize("api_key", sorted(ADVERTISED))
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_advertised_version_has_valid_requests(api_key: int, data: st.DataObject) -> None:
    """For every version of every API of the table (the fuzzer reads it from the running
    broker) the fuzzer builds requests that the listener decodes as that API and version."""
    low, high = ADVERTISED[api_key]
    for api_version in range(low, high + 1):
        frame = data.draw(request_frames(api_key, api_version))
        request = decode_request(frame[_SIZE.size :], ADVERTISED)
        assert (request.api_key, request.api_version) == (api_key, api_version)


@_FAST
@given(record_batches().filter(lambda b: len(b) > 61))
def test_record_batches_pass_the_log_check_or_are_refused_by_it(batch: bytes) -> None:
    """Any record batch the fuzzer builds, mutated or not, either passes the log's own
    batch check or is refused with kemu's error, never with another exception."""
    with contextlib.suppress(KemuError):  # the check's refusal
        check_stored_batch(batch)


@_FAST
@given(valid_frames(all_message_types(), [ActorRef("store", "store")]))
def test_valid_transport_frames_decode_with_the_frame_codec(frame: bytes) -> None:
    """Every valid frame the fuzzer builds for kemu's endpoints (any typed message, drawn
    along its schema) decodes with ``protocol.codec.decode_envelope``."""
    (size,) = _SIZE.unpack_from(frame)
    assert size == len(frame) - _SIZE.size
    decode_envelope(frame[_SIZE.size :])


@_FAST
@given(st.binary(min_size=1, max_size=64).flatmap(lambda b: st.tuples(st.just(b), mutated(b))))
def test_mutations_stay_small(pair: tuple[bytes, bytes]) -> None:
    """A mutated input grows by at most the bytes four mutations can add."""
    original, changed = pair
    assert len(changed) <= len(original) + 4 * 32 + 4


def test_frame_boundaries_as_a_server_reads_them() -> None:
    """Whole frames end on a boundary; a cut frame does not; a size over the limit ends
    the reading, and is told apart when whole frames come before it."""
    one = _SIZE.pack(3) + b"abc"
    assert frame_boundaries(one + one, 100) == (True, False)
    assert frame_boundaries(one + _SIZE.pack(5) + b"ab", 100) == (False, False)
    assert frame_boundaries(one[:2], 100) == (False, False)
    assert frame_boundaries(_SIZE.pack(101), 100) == (True, False)
    assert frame_boundaries(one + _SIZE.pack(-1), 100) == (True, True)
    assert frame_boundaries(b"", 100) == (True, False)
