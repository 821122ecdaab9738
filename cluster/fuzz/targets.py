"""The five fuzz targets: how each reaches its server, what one input is, how it is
written and read back, and the liveness probe a fresh connection must pass after every
batch.

An exchange writes one input on a new connection followed by a valid request (a probe),
then reads until the probe is answered (everything before it was taken, the connection
still serves) or the server closes the connection. When the bytes do not end on a frame
boundary the server would wait for the rest, so the write side is shut at once: the
server sees the end of the stream in the middle of a frame. No exchange waits on a timer
unless the server fails to do either, which the deadline catches."""

from __future__ import annotations

import enum
import socket
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hypothesis import strategies as st

from cluster.fuzz.frame_inputs import (
    FramesCase,
    HandshakeCase,
    TransportCase,
    all_message_types,
    transport_inputs,
)
from cluster.fuzz.http_inputs import http_inputs
from cluster.fuzz.kafka_inputs import kafka_inputs
from cluster.fuzz.servers import Address, Endpoints
from cluster.kafka.apis import (
    SERVED_API_VERSIONS,
    decode_api_versions_response,
    decode_response,
    encode_api_versions_request,
)
from cluster.kafka.framing import request_frame
from cluster.kafka.listener import DEFAULT_MAX_FRAME_BYTES
from cluster.network.auth import ANSWER_BYTES, CHALLENGE_BYTES, VERDICT_BYTES, client_answer
from cluster.network.auth import server_verdict as check_verdict
from protocol import launcher, store
from protocol.base import ActorRef, Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.codec import MAX_FRAME_BYTES, decode_envelope, frame
from protocol.envelope import Envelope, EnvelopeKind
from protocol.errors import FrameError, KemuError
from protocol.launcher import LauncherStatus, LauncherStatusRequest
from protocol.store import StoreExists, StoreFailure

EXCHANGE_TIMEOUT: Final = 5.0  # seconds an exchange may take before it counts as timed out
CLOSE_TIMEOUT: Final = 0.25  # seconds to close a connection that sent a size over the limit
PROBE_TIMEOUT: Final = 10.0  # seconds a fresh connection has to answer the liveness probe
PROBE_CORRELATION: Final = 0x5EED  # the probe's correlation id in an exchange
_SIZE = struct.Struct(">I")


class Outcome(enum.Enum):
    """How an exchange ended."""

    ANSWERED = "answered"  # the probe after the input was answered
    CLOSED = "closed"  # the server closed the connection (a refused input)
    TIMED_OUT = "timed_out"  # neither within EXCHANGE_TIMEOUT
    LEFT_OPEN = "left_open"  # a size over the limit after whole frames: not closed in time


class ProbeFailed(KemuError):
    """A fresh connection did not get a valid answer in time: the server stopped serving."""


class Finding(KemuError):
    """An exchange showed wrong behaviour without killing the server (an authentication
    verdict that contradicts the answer sent)."""


@dataclass(frozen=True, slots=True)
class Target:
    """One server to fuzz. ``inputs`` is built from the running server (the Kafka
    listener's advertised table is asked at run time)."""

    name: str
    processes: bool  # needs kemu up --processes (broker 0 in a process of its own)
    address: Callable[[Endpoints], Address]
    pid: Callable[[Endpoints], int]  # the process holding the server
    inputs: Callable[[Endpoints], st.SearchStrategy[bytes] | st.SearchStrategy[TransportCase]]
    exchange: Callable[[Endpoints, object], Outcome]
    probe: Callable[[Endpoints], None]
    encode_case: Callable[[object], dict[str, str | int]]
    decode_case: Callable[[Mapping[str, str | int]], object]


# ---------------------------------------------------------------------- sockets


def _connect(address: Address, timeout: float) -> socket.socket:
    sock = socket.create_connection(address, timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _receive_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _frames(sock: socket.socket) -> Iterator[bytes]:
    """Frame bodies as they arrive, until the connection ends (closed or reset)."""
    buffer = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return
        if not chunk:
            return
        buffer += chunk
        while len(buffer) >= _SIZE.size:
            (size,) = _SIZE.unpack_from(buffer)
            if len(buffer) < _SIZE.size + size:
                break
            yield buffer[_SIZE.size : _SIZE.size + size]
            buffer = buffer[_SIZE.size + size :]


def frame_boundaries(data: bytes, limit: int) -> tuple[bool, bool]:
    """How a server reads ``data`` as size-prefixed frames: whether it does not wait for
    more bytes (it takes all of it as whole frames, or meets a size over ``limit`` and
    must close), and whether that size over the limit comes after whole frames (a reader
    then answers those frames before it closes)."""
    position = frames = 0
    while position + _SIZE.size <= len(data):
        (size,) = _SIZE.unpack_from(data, position)
        if size > limit:
            return True, frames > 0
        position += _SIZE.size + size
        frames += 1
    return position == len(data), False


def _write_then_read(
    sock: socket.socket, data: bytes, limit: int, answered: Callable[[bytes], bool]
) -> Outcome:
    whole, oversize_after_frames = frame_boundaries(data, limit)
    try:
        sock.sendall(data)
        if not whole:
            sock.shutdown(socket.SHUT_WR)
        if oversize_after_frames:
            sock.settimeout(CLOSE_TIMEOUT)
        for body in _frames(sock):
            if answered(body):
                return Outcome.ANSWERED
    except (ConnectionResetError, BrokenPipeError):
        return Outcome.CLOSED
    except TimeoutError:
        return Outcome.LEFT_OPEN if oversize_after_frames else Outcome.TIMED_OUT
    return Outcome.CLOSED


# ---------------------------------------------------------------------- the Kafka listener


def _metadata_probe(correlation_id: int) -> bytes:
    """Metadata v1 for no topics: the brokers and the controller."""
    return request_frame(3, 1, correlation_id, "kemu-fuzz", {"topics": []})


def _is_metadata_answer(body: bytes, correlation_id: int, *, strict: bool) -> bool:
    """Whether ``body`` answers the Metadata v1 probe of ``correlation_id``. In an
    exchange an input may have used that correlation id too, so a response that is not
    Metadata is passed over there; on a fresh connection (``strict``) it is a failure
    (``FrameError``)."""
    if len(body) < 4 or _SIZE.unpack_from(body)[0] != correlation_id:
        return False
    try:
        decode_response(3, 1, body)
    except FrameError:
        if strict:
            raise
        return False
    return True


def advertised_versions(endpoints: Endpoints) -> dict[int, tuple[int, int]]:
    """The APIs and versions the broker advertises (asked with ApiVersions v3), with the
    table of served APIs (``SERVED_API_VERSIONS``) and ApiVersions itself."""
    with _connect(endpoints.kafka, PROBE_TIMEOUT) as sock:
        sock.sendall(encode_api_versions_request(api_version=3, correlation_id=1, client_id="f"))
        body = next(_frames(sock))
    table = dict(decode_api_versions_response(3, body).api_versions)
    for key, (low, high) in SERVED_API_VERSIONS.items():
        known = table.get(key, (low, high))
        table[key] = (min(low, known[0]), max(high, known[1]))
    return table


def _kafka_exchange(endpoints: Endpoints, case: object) -> Outcome:
    assert isinstance(case, bytes)
    with _connect(endpoints.kafka, EXCHANGE_TIMEOUT) as sock:
        return _write_then_read(
            sock,
            case + _metadata_probe(PROBE_CORRELATION),
            DEFAULT_MAX_FRAME_BYTES,
            lambda body: _is_metadata_answer(body, PROBE_CORRELATION, strict=False),
        )


def _kafka_probe(endpoints: Endpoints) -> None:
    try:
        with _connect(endpoints.kafka, PROBE_TIMEOUT) as sock:
            sock.sendall(_metadata_probe(7))
            for body in _frames(sock):
                if _is_metadata_answer(body, 7, strict=True):
                    return
    except (OSError, KemuError) as exc:
        raise ProbeFailed(f"Metadata on a fresh connection failed: {exc!r}") from exc
    raise ProbeFailed("Metadata on a fresh connection: closed without an answer")


def _bytes_case(case: object) -> dict[str, str | int]:
    assert isinstance(case, bytes)
    return {"data": case.hex()}


def _bytes_from(record: Mapping[str, str | int]) -> object:
    return bytes.fromhex(str(record["data"]))


KAFKA = Target(
    name="kafka",
    processes=False,
    address=lambda e: e.kafka,
    pid=lambda e: e.broker_pid,
    inputs=lambda e: kafka_inputs(advertised_versions(e)),
    exchange=_kafka_exchange,
    probe=_kafka_probe,
    encode_case=_bytes_case,
    decode_case=_bytes_from,
)


# ---------------------------------------------------------------------- kemu's endpoints


def _handshake(sock: socket.socket, secret: bytes) -> None:
    challenge = _receive_exactly(sock, CHALLENGE_BYTES)
    sock.sendall(client_answer(secret, challenge))
    check_verdict(secret, challenge, _receive_exactly(sock, VERDICT_BYTES))


def _ask_frame(destination: ActorRef, payload: Message, correlation_id: int) -> bytes:
    return frame(
        Envelope(
            src=ActorRef("kemu-fuzz", "probe"),
            dst=destination,
            corr=correlation_id,
            kind=EnvelopeKind.ASK,
            payload=payload,
        )
    )


def _is_reply(body: bytes, correlation_id: int, answer: type[Message]) -> bool:
    envelope = decode_envelope(body)
    return (
        envelope.kind is EnvelopeKind.REPLY
        and envelope.corr == correlation_id
        and envelope.dst.node == "kemu-fuzz"
        and isinstance(envelope.payload, answer)
    )


@dataclass(frozen=True, slots=True)
class _Endpoint:
    """One of kemu's own TCP endpoints: where it is, the ask that probes it."""

    address: Callable[[Endpoints], Address]
    destination: ActorRef
    question: Message
    answer: type[Message]

    def exchange(self, endpoints: Endpoints, case: object) -> Outcome:
        assert isinstance(case, HandshakeCase | FramesCase)
        with _connect(self.address(endpoints), EXCHANGE_TIMEOUT) as sock:
            if isinstance(case, HandshakeCase):
                return _garbled_handshake(sock, endpoints.secret, case)
            _handshake(sock, endpoints.secret)
            return _write_then_read(
                sock,
                case.data + _ask_frame(self.destination, self.question, PROBE_CORRELATION),
                MAX_FRAME_BYTES,
                lambda body: _is_reply(body, PROBE_CORRELATION, self.answer),
            )

    def probe(self, endpoints: Endpoints) -> None:
        try:
            with _connect(self.address(endpoints), PROBE_TIMEOUT) as sock:
                _handshake(sock, endpoints.secret)
                sock.sendall(_ask_frame(self.destination, self.question, 7))
                for body in _frames(sock):
                    if _is_reply(body, 7, self.answer):
                        return
        except (OSError, KemuError) as exc:
            raise ProbeFailed(f"an ask on a fresh connection failed: {exc!r}") from exc
        raise ProbeFailed("an ask on a fresh connection: closed without an answer")


def _garbled_handshake(sock: socket.socket, secret: bytes, case: HandshakeCase) -> Outcome:
    """Write the case in answer to the challenge and check the verdict: accepted exactly
    when the first ``ANSWER_BYTES`` written are the right answer."""
    challenge = _receive_exactly(sock, CHALLENGE_BYTES)
    right = client_answer(secret, challenge)
    written = case.prefix + right[: case.cut] + case.suffix
    sock.sendall(written)
    if len(written) < ANSWER_BYTES:
        sock.shutdown(socket.SHUT_WR)  # closed half-way through the answer
    try:
        verdict = _receive_exactly(sock, VERDICT_BYTES)
    except (ConnectionResetError, BrokenPipeError):
        verdict = b""
    except TimeoutError:
        return Outcome.TIMED_OUT
    should_accept = written[:ANSWER_BYTES] == right
    if bool(verdict) != should_accept:
        raise Finding(
            f"handshake: {'accepted' if verdict else 'refused'} an answer that is "
            f"{'right' if should_accept else 'wrong'} ({written.hex()} for {right.hex()})"
        )
    return Outcome.ANSWERED if verdict else Outcome.CLOSED


def _transport_case(case: object) -> dict[str, str | int]:
    if isinstance(case, HandshakeCase):
        return {"prefix": case.prefix.hex(), "cut": case.cut, "suffix": case.suffix.hex()}
    assert isinstance(case, FramesCase)
    return {"data": case.data.hex()}


def _transport_from(record: Mapping[str, str | int]) -> object:
    if "data" in record:
        return FramesCase(bytes.fromhex(str(record["data"])))
    return HandshakeCase(
        bytes.fromhex(str(record["prefix"])),
        int(record["cut"]),
        bytes.fromhex(str(record["suffix"])),
    )


def _message_family(*modules: object) -> tuple[type[Message], ...]:
    every = all_message_types()
    return tuple(cls for cls in every if any(cls.__module__ == m.__name__ for m in modules))  # type: ignore[attr-defined]


def _endpoint_target(
    name: str,
    endpoint: _Endpoint,
    messages: Callable[[], Sequence[type[Message]]],
    destinations: Sequence[ActorRef],
    pid: Callable[[Endpoints], int],
) -> Target:
    return Target(
        name=name,
        processes=True,
        address=endpoint.address,
        pid=pid,
        inputs=lambda e: transport_inputs(messages(), destinations),
        exchange=endpoint.exchange,
        probe=endpoint.probe,
        encode_case=_transport_case,
        decode_case=_transport_from,
    )


def _internal_address(endpoints: Endpoints) -> Address:
    assert endpoints.internal is not None, "the internal port needs kemu up --processes"
    return endpoints.internal


BROKER_0 = ActorRef("broker-0", "broker")

INTERNAL = _endpoint_target(
    "internal",
    _Endpoint(_internal_address, BROKER_0, BrokerStatusRequest(), BrokerStatus),
    all_message_types,
    (BROKER_0, ActorRef("broker-0", "controller"), ActorRef("broker-0", "log_manager")),
    lambda e: e.broker_pid,
)

STORE = _endpoint_target(
    "store",
    _Endpoint(
        lambda e: e.store,
        ActorRef("store", "store"),
        StoreExists(session_id=-1, path="/"),
        StoreFailure,
    ),
    lambda: _message_family(store),
    (ActorRef("store", "store"),),
    lambda e: e.launcher_pid,
)

CONTROL = _endpoint_target(
    "control",
    _Endpoint(
        lambda e: e.control,
        ActorRef("launcher", "status"),
        LauncherStatusRequest(),
        LauncherStatus,
    ),
    lambda: _message_family(launcher),
    (ActorRef("launcher", "control"), ActorRef("launcher", "status")),
    lambda e: e.launcher_pid,
)

# ---------------------------------------------------------------------- the Prometheus endpoint

_METRICS_PROBE: Final = b"GET /metrics HTTP/1.1\r\nHost: kemu-fuzz\r\n\r\n"
_METRICS_ANSWERED: Final = b"kafka_controller_kafkacontroller_activecontrollercount"


def _read_until_closed(sock: socket.socket) -> bytes:
    answer = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            return answer
        if not chunk:
            return answer
        answer += chunk


def _metrics_exchange(endpoints: Endpoints, case: object) -> Outcome:
    """One request per connection (the endpoint answers one, then closes): the input is
    sent whole and the write side shut, so the server never waits for more; an answer of
    200 with the metrics is ANSWERED, any other end CLOSED."""
    assert isinstance(case, bytes)
    assert endpoints.metrics is not None, "no Prometheus endpoint in the cluster file"
    with _connect(endpoints.metrics, EXCHANGE_TIMEOUT) as sock:
        try:
            sock.sendall(case)
            sock.shutdown(socket.SHUT_WR)
            answer = _read_until_closed(sock)
        except (ConnectionResetError, BrokenPipeError):
            return Outcome.CLOSED
        except TimeoutError:
            return Outcome.TIMED_OUT
    if answer.startswith(b"HTTP/1.1 200 ") and _METRICS_ANSWERED in answer:
        return Outcome.ANSWERED
    return Outcome.CLOSED


def _metrics_probe(endpoints: Endpoints) -> None:
    assert endpoints.metrics is not None
    try:
        with _connect(endpoints.metrics, PROBE_TIMEOUT) as sock:
            sock.sendall(_METRICS_PROBE)
            answer = _read_until_closed(sock)
    except OSError as exc:
        raise ProbeFailed(f"GET /metrics on a fresh connection failed: {exc!r}") from exc
    if not (answer.startswith(b"HTTP/1.1 200 ") and _METRICS_ANSWERED in answer):
        raise ProbeFailed(f"GET /metrics on a fresh connection: {answer[:200]!r}")


METRICS = Target(
    name="metrics",
    processes=False,
    address=lambda e: e.metrics or ("", 0),
    pid=lambda e: e.launcher_pid,
    inputs=lambda e: http_inputs(),
    exchange=_metrics_exchange,
    probe=_metrics_probe,
    encode_case=_bytes_case,
    decode_case=_bytes_from,
)

TARGETS: Final[Mapping[str, Target]] = {
    t.name: t for t in (KAFKA, INTERNAL, STORE, CONTROL, METRICS)
}
