"""The Kafka listener: the TCP side of the wire protocol that real Kafka clients talk to.

Sockets, connections, pipelining and response order live here; what the bytes mean lives
beside it (``cluster.kafka.framing`` for frames and headers, ``cluster.kafka.apis`` for
each API's translations, ``cluster.kafka.bounds`` for the length check; the flow is told
in docs/kafka-wire.md). What to answer is decided by a ``KafkaApiHandler`` (the broker),
which gets each request decoded and returns the response object for that API and version,
or kemu's plain values (``protocol.kafka_api``), so the handler never touches codec types.

The listener, per connection (as Kafka's ``SocketServer`` and ``KafkaApis`` do):

* reads frames (4-byte big-endian size, then the request); a size over ``max_frame_bytes``
  closes the connection;
* parses the request header (v1, or v2 for flexible versions, as the API's schema says);
* answers ApiVersions itself (``advertised_api_versions``): the APIs the handler serves,
  each with its versions within a Kafka 2.7.2 broker's, and ApiVersions v0-3. An
  ApiVersions request of a version outside 0-3 gets what Kafka's
  ``RequestContext.parseRequest`` and ``ApiVersionsRequest.getErrorResponse`` give: only
  its header is parsed, and the reply is a v0 body with UNSUPPORTED_VERSION and
  ApiVersions' own range, so that the client retries with a version we know; a v3 request
  whose client software name or version is not Kafka's pattern gets INVALID_REQUEST.
  ApiVersions responses always carry response header v0;
* closes the connection on an API key or version it does not advertise, as a 2.7 broker
  does with an unknown key (``RequestHeader.parse`` fails) or version (``parseRequest``
  fails), both closing the connection in ``SocketServer.Processor``;
* closes the connection on a request the codec cannot decode (a malformed frame, an unknown
  tagged field) or whose length prefixes claim more than the frame holds (checked before
  the codec runs, which would otherwise allocate from them: ``cluster.kafka.bounds``),
  traced as an ``error`` of type ``bad_frame``; other connections and the listener carry
  on. The requests before it on the connection are answered first, as Kafka's
  ``SocketServer.Processor`` sends what it has before closing;
* hands every other request to the handler in its own task, several at a time (librdkafka
  pipelines), and writes the responses in request order whatever order they complete in.
  A handler that returns ``None`` or raises (a bug: it serves every advertised API) gets
  the error response Kafka would send where the API's schema can carry one
  (``error_response``); otherwise the connection is closed. A Produce with ``acks`` 0 is
  answered with nothing, or, if a partition failed, by closing the connection, as Kafka
  does. A Produce's partitions whose records are not exactly one magic-v2 batch are
  answered here (``produce.invalid_partitions``); the handler gets the rest. A handler may
  answer with plain values; the listener then builds the response, and reuses the
  encoding of a Metadata answer it has already sent (encoding is pure Python, and clients
  poll Metadata).

An ``accept()`` that fails (EMFILE: the process is out of file descriptors) is logged once
per run of failures and retried after ``ACCEPT_BACKOFF``, as Kafka's
``SocketServer.Acceptor`` carries on; a connection's socket errors (ECONNRESET) close that
connection only.

Every task belongs to the listener's task group: stopping it (cancelling ``serve``) closes
the listener and every connection. Socket errors become ``NetworkError`` here.

The codec names this module used to hold (``KafkaRequest``, ``request_data``,
``build_response``, ...) are re-exported for the modules that still import them from here;
new code imports them from ``cluster.kafka``.
"""

from __future__ import annotations

import dataclasses
import types
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final, Protocol

import anyio
import structlog
from anyio.abc import (
    ObjectReceiveStream,
    ObjectSendStream,
    SocketAttribute,
    SocketListener,
    SocketStream,
    TaskGroup,
    TaskStatus,
)

from actors.runtime.clock import Clock, RealClock
from actors.runtime.tracer import Tracer
from cluster.kafka.apis import produce
from cluster.kafka.apis.api_versions import (
    API_VERSIONS_RANGE,
    KAFKA_2_7_API_VERSIONS,
    ApiVersionsAnswer,
    advertised_api_versions,
    codec_api_versions,
    decode_api_versions_response,
    encode_api_versions_body,
    encode_api_versions_request,
    valid_api_versions_request,
)
from cluster.kafka.apis.registry import (
    api_key_of,
    build_response,
    decode_response,
    encode_request,
    error_response,
    request_data,
)
from cluster.kafka.codec import as_millis, encode_body, request_schema
from cluster.kafka.framing import (
    API_VERSIONS_KEY,
    KafkaRequest,
    UnsupportedApiError,
    decode_header_only,
    decode_request,
    encode_response,
    header_v0_frame,
    response_frame,
)
from protocol.codec import FrameReader
from protocol.errors import ErrorCode, FrameError, NetworkError, NodeStoppedError
from protocol.kafka_api import (
    ClientApiKey,
    KafkaApiResponseData,
    MetadataResponseData,
)
from protocol.kafka_data import ProduceResponseData
from protocol.trace import TraceKind

__all__ = [
    "ACCEPT_BACKOFF",
    "API_VERSIONS_RANGE",
    "DEFAULT_HOST",
    "DEFAULT_MAX_FRAME_BYTES",
    "KAFKA_2_7_API_VERSIONS",
    "MAX_IN_FLIGHT",
    "METADATA_CACHE_SIZE",
    "ApiVersionsAnswer",
    "KafkaApiHandler",
    "KafkaRequest",
    "KafkaWireServer",
    "UnsupportedApiError",
    "advertised_api_versions",
    "api_key_of",
    "build_response",
    "codec_api_versions",
    "decode_api_versions_response",
    "decode_request",
    "decode_response",
    "encode_api_versions_request",
    "encode_request",
    "encode_response",
    "error_response",
    "request_data",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
MAX_IN_FLIGHT: Final = 64  # requests read ahead on one connection before reading pauses
METADATA_CACHE_SIZE: Final = 16  # encoded Metadata bodies kept per listener (LRU)
ACCEPT_BACKOFF: Final = 0.1  # seconds between accept() tries while they fail (EMFILE)
log = structlog.get_logger("kemu.kafka_listener")


class KafkaApiHandler(Protocol):
    """What a listener asks of the broker behind it."""

    @property
    def supported(self) -> Mapping[int, tuple[int, int]]:
        """API key -> (min, max) version the handler serves, read once when the listener
        is made. Advertised within Kafka 2.7.2's ranges (it must lie within what the codec
        can decode); ApiVersions is the listener's own."""
        ...

    async def handle(self, request: KafkaRequest) -> Any:
        """The answer: the codec's response object for the request's API and version
        (``build_response`` or ``error_response`` make one), or the plain response values
        (``KafkaApiResponseData``; the listener builds the response, and keeps the encoded
        Metadata answers for reuse), or ``None`` for an API it does not implement."""
        ...


class _Slot:
    """One request's place in its connection's response order. ``frame`` stays ``None``
    when the connection must close instead of answering (``close_reason`` says why)."""

    __slots__ = ("close_reason", "done", "final", "frame")

    def __init__(self, frame: bytes | None = None) -> None:
        self.done = anyio.Event()
        self.frame = frame
        self.close_reason = ""
        self.final = False  # the last slot of its connection: nothing is read after it
        if frame is not None:
            self.done.set()

    @classmethod
    def closing(cls, reason: str) -> _Slot:
        """The end of a connection, after the answers to every request before it."""
        slot = cls()
        slot.close_reason = reason
        slot.final = True
        slot.done.set()
        return slot


class _Connection:
    __slots__ = ("client_host", "close_reason", "peer", "stream")

    def __init__(self, stream: SocketStream, peer: str) -> None:
        self.stream = stream
        self.peer = peer
        self.client_host = "/" + peer.rsplit(":", 1)[0]  # InetAddress.toString, no name
        self.close_reason = "closed_by_client"


def _remote(stream: SocketStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)  # noqa: S610 - not Django
    except (OSError, anyio.TypedAttributeLookupError):
        return "?"
    return address if isinstance(address, str) else f"{address[0]}:{address[1]}"


def _unacknowledged(request: KafkaRequest) -> bool:
    """A Produce with ``acks`` 0: the client expects no response."""
    return request.api_key == ClientApiKey.PRODUCE and int(request.body.acks) == 0


def _failed_partitions(response: Any) -> list[str]:
    """``topic-partition:ERROR`` for each partition of a Produce answer (plain values or
    the codec's response) that did not succeed."""
    if isinstance(response, ProduceResponseData):
        return [
            f"{t.name}-{p.index}:{p.error_code.name}"
            for t in response.responses
            for p in t.partition_responses
            if p.error_code is not ErrorCode.NONE
        ]
    return [
        f"{t.name}-{p.index}:{int(p.error_code)}"
        for t in response.responses
        for p in t.partition_responses
        if int(p.error_code) != 0
    ]


async def _receive(stream: SocketStream) -> bytes:
    try:
        return await stream.receive(256 * 1024)
    except anyio.EndOfStream:
        return b""
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc!r}") from exc


async def _send(stream: SocketStream, data: bytes) -> None:
    try:
        await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
        raise NetworkError(f"connection lost: {exc!r}") from exc


class KafkaWireServer:
    """One broker's Kafka listener. Start it with ``port = await tg.start(server.serve)``;
    cancel that task group to stop it and every connection."""

    def __init__(
        self,
        handler: KafkaApiHandler,
        *,
        node: str,
        host: str = DEFAULT_HOST,
        port: int = 0,
        tracer: Tracer | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Clock | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"not a TCP port: {port}")
        self._handler = handler
        self._node = node
        self._host = host
        self._port = port
        self._tracer = tracer
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max_in_flight
        self._clock = clock or RealClock()
        self._api_versions = advertised_api_versions(handler.supported)
        for key, (low, high) in self._api_versions.items():  # load what we serve now
            for version in range(low, high + 1):
                request_schema(key, version)
        self._api_versions_bodies: dict[tuple[int, ErrorCode], bytes] = {}
        # Encoding is pure Python (~15 ms for 1,000 partitions): Metadata answers, asked
        # for again and again with nothing changed, are encoded once per version.
        self._metadata_bodies: OrderedDict[tuple[int, MetadataResponseData], bytes] = OrderedDict()
        self._bound: int | None = None

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """The table this listener advertises."""
        return types.MappingProxyType(self._api_versions)

    @property
    def cached_metadata_responses(self) -> int:
        """How many encoded Metadata bodies the listener keeps (for metrics and tests)."""
        return len(self._metadata_bodies)

    @property
    def port(self) -> int:
        """The bound port, once serving."""
        if self._bound is None:
            raise NetworkError(f"the Kafka listener of {self._node} is not serving")
        return self._bound

    async def serve(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; reports the bound port when listening."""
        try:
            listener = await anyio.create_tcp_listener(  # "": every interface, as in Kafka
                local_host=self._host or None, local_port=self._port
            )
        except OSError as exc:
            raise NetworkError(
                f"{self._node} cannot listen on {self._host}:{self._port}: {exc}"
            ) from exc
        port = int(listener.extra(SocketAttribute.local_port))  # noqa: S610 - not Django
        self._bound = port
        try:
            async with listener, anyio.create_task_group() as connections:
                self._trace(TraceKind.EVENT, "kafka_listening", host=self._host, port=port)
                for one in listener.listeners:
                    assert isinstance(one, SocketListener)  # a TCP listener's, one per address
                    connections.start_soon(self._accept_connections, one, connections)
                task_status.started(port)
        finally:
            self._bound = None

    async def _accept_connections(self, listener: SocketListener, connections: TaskGroup) -> None:
        """Accept connections until cancelled. An ``accept()`` that fails (EMFILE when the
        process is out of file descriptors, ENFILE, ENOBUFS, ECONNABORTED) costs nothing
        but a pause of ``ACCEPT_BACKOFF``: as Kafka's ``SocketServer.Acceptor``, the
        listener logs and carries on. A run of failures is logged and traced once when
        it starts (``kafka_accept_failed``) and once when a connection is accepted again
        (``kafka_accept_recovered``, with how many tries failed), not once per try."""
        failures = 0
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if not failures:
                    log.warning("kafka_accept_failed", node=self._node, error=repr(exc))
                    self._trace(TraceKind.ERROR, "kafka_accept_failed", detail=repr(exc))
                failures += 1
                await self._clock.sleep(ACCEPT_BACKOFF)
                continue
            if failures:
                log.warning("kafka_accept_recovered", node=self._node, failures=failures)
                self._trace(TraceKind.EVENT, "kafka_accept_recovered", failures=failures)
                failures = 0
            connections.start_soon(self._serve_connection, stream)

    # -------------------------------------------------------------- one connection

    async def _serve_connection(self, stream: SocketStream) -> None:
        conn = _Connection(stream, _remote(stream))
        self._trace(TraceKind.EVENT, "kafka_connection_opened", peer=conn.peer)
        try:
            async with stream, anyio.create_task_group() as tg:
                send, receive = anyio.create_memory_object_stream[_Slot](self._max_in_flight)
                tg.start_soon(self._write_responses, conn, receive, tg)
                async with send:
                    closing = await self._read_requests(conn, send, tg)
                if not closing:  # the client is gone: its answers have nowhere to go
                    tg.cancel_scope.cancel()
                # else the writer answers what came before the closing request, then closes
        except anyio.get_cancelled_exc_class():
            conn.close_reason = "listener_stopped"
            raise
        except Exception as exc:  # a bug must cost this connection only, not the listener
            conn.close_reason = "failed"
            self._trace(TraceKind.ERROR, "connection_failed", peer=conn.peer, detail=repr(exc))
        finally:
            self._trace(
                TraceKind.EVENT, "kafka_connection_closed", peer=conn.peer, reason=conn.close_reason
            )

    async def _read_requests(
        self, conn: _Connection, send: ObjectSendStream[_Slot], tg: TaskGroup
    ) -> bool:
        """Until the end of the stream (False) or a request that closes the connection
        (True): its closing slot is queued behind the requests before it, which are
        answered first, as Kafka's ``SocketServer.Processor`` sends the responses it has
        before closing a connection."""
        reader = FrameReader(max_bytes=self._max_frame_bytes)
        while True:
            try:
                chunk = await _receive(conn.stream)
            except NetworkError:
                conn.close_reason = "connection_lost"
                return False
            if not chunk:
                if reader.pending:
                    self._bad_frame(conn, f"truncated: closed {reader.pending} bytes into a frame")
                return False
            try:
                frames = reader.feed(chunk)
            except FrameError as exc:
                await send.send(self._bad_frame(conn, str(exc)))
                return True
            for frame in frames:
                slot = self._accept(conn, frame, tg)
                await send.send(slot)
                if slot.final:
                    return True
            if reader.error is not None:  # a length over the limit after these frames
                await send.send(self._bad_frame(conn, str(reader.error)))
                return True

    def _accept(self, conn: _Connection, frame: bytes, tg: TaskGroup) -> _Slot:
        """Decode one request and give it its slot (a closing one if it ends the
        connection)."""
        try:
            request = dataclasses.replace(
                decode_request(frame, self._api_versions), client_host=conn.client_host
            )
        except FrameError as exc:
            return self._bad_frame(conn, str(exc))
        except UnsupportedApiError as unsupported:
            if unsupported.api_key == API_VERSIONS_KEY:
                return self._api_versions_unsupported(conn, frame)
            self._trace(
                TraceKind.ERROR,
                "unsupported_request",
                corr=unsupported.correlation_id,
                peer=conn.peer,
                api_key=unsupported.api_key,
                api_version=unsupported.api_version,
            )
            return _Slot.closing("unsupported_request")
        if self._tracer is not None and self._tracer.enabled:
            produce_fields = (
                {"timeout_ms": as_millis(request.body.timeout)}
                if request.api_key == ClientApiKey.PRODUCE
                else {}
            )
            self._trace_request(
                TraceKind.EVENT,
                "kafka_request",
                conn,
                request,
                api_version=request.api_version,
                client_id=request.client_id,
                **produce_fields,
            )
        if request.api_key == API_VERSIONS_KEY:
            error = ErrorCode.NONE
            if not valid_api_versions_request(request.api_version, request.body):
                error = ErrorCode.INVALID_REQUEST
            return _Slot(
                self._api_versions_frame(request.api_version, request.correlation_id, error)
            )
        slot = _Slot()
        tg.start_soon(self._handle, conn, request, slot)
        return slot

    def _api_versions_unsupported(self, conn: _Connection, frame: bytes) -> _Slot:
        try:
            request = decode_header_only(frame)
        except FrameError as exc:
            return self._bad_frame(conn, str(exc))
        self._trace(
            TraceKind.EVENT,
            "kafka_api_versions_too_new",
            corr=request.correlation_id,
            peer=conn.peer,
            api_version=request.api_version,
            client_id=request.client_id,
        )
        return _Slot(
            self._api_versions_frame(0, request.correlation_id, ErrorCode.UNSUPPORTED_VERSION)
        )

    def _api_versions_frame(
        self, version: int, correlation_id: int, error: ErrorCode = ErrorCode.NONE
    ) -> bytes:
        """ApiVersions bodies are encoded once per version and error (header v0: the
        correlation id). With an error the table is ``ApiVersionsRequest.getErrorResponse``'s:
        ApiVersions' own range for UNSUPPORTED_VERSION, nothing otherwise."""
        body = self._api_versions_bodies.get((version, error))
        if body is None:
            table: Mapping[int, tuple[int, int]] = self._api_versions
            if error is ErrorCode.UNSUPPORTED_VERSION:
                table = {API_VERSIONS_KEY: API_VERSIONS_RANGE}
            elif error is not ErrorCode.NONE:
                table = {}
            body = encode_api_versions_body(version, table, error)
            self._api_versions_bodies[(version, error)] = body
        return header_v0_frame(correlation_id, body)

    async def _produce(self, request: KafkaRequest) -> Any:
        """A Produce: partitions whose records ``ProduceRequest.validateRecords`` refuses
        (v3+), or whose legacy messages cannot be up-converted (v0-v2, ``LogValidator``'s
        checks), are answered here with its code; the handler gets the rest, if any."""
        if request.api_version < 3:
            converted, refused = produce.up_converted(request.body)
            request = dataclasses.replace(request, body=converted)
        else:
            refused = produce.invalid_partitions(request.body, request.api_version)
        if not refused:
            return await self._handler.handle(request)
        rest = produce.without_partitions(request.body, refused)
        answer = None
        if rest is not None:
            answer = await self._handler.handle(dataclasses.replace(request, body=rest))
            if not isinstance(answer, ProduceResponseData):
                return answer  # a codec object or nothing: the handler's own business
        return produce.with_refused(answer, refused)

    async def _handle(self, conn: _Connection, request: KafkaRequest, slot: _Slot) -> None:
        """Run the handler for one request and fill its slot; never raises (but cancels)."""
        try:
            if request.api_key == ClientApiKey.PRODUCE:
                response = await self._produce(request)
            else:
                response = await self._handler.handle(request)
        except NodeStoppedError:
            # The broker went down while the request waited: its connections drop, as a
            # stopped Kafka broker's do, and the client retries elsewhere.
            slot.close_reason = "broker_stopped"
            slot.done.set()
            return
        except Exception as exc:  # the handler's bug: answer as Kafka would, and trace it
            self._trace_request(TraceKind.ERROR, "handler_failed", conn, request, detail=repr(exc))
            response = self._error_response(conn, request, ErrorCode.UNKNOWN_SERVER_ERROR)
        if response is None:
            self._trace_request(
                TraceKind.EVENT,
                "kafka_unimplemented_api",
                conn,
                request,
                api_version=request.api_version,
            )
            response = self._error_response(conn, request, ErrorCode.UNSUPPORTED_VERSION)
        if response is not None and _unacknowledged(request):
            # Produce with acks=0: no answer at all; a failed partition closes the
            # connection instead, so that the producer notices (``KafkaApis.handleProduceRequest``).
            failed = _failed_partitions(response)
            if failed:
                slot.close_reason = "produce_failed_without_acks"
                self._trace_request(
                    TraceKind.EVENT,
                    "kafka_produce_failed_without_acks",
                    conn,
                    request,
                    errors=failed,
                )
            else:
                slot.frame = b""
            slot.done.set()
            return
        if response is None:
            slot.close_reason = "unanswerable_request"
            self._trace_request(
                TraceKind.ERROR,
                "unanswerable_request",
                conn,
                request,
                api_version=request.api_version,
            )
        else:
            try:
                slot.frame = self._encode(request, response)
            except Exception as exc:  # a response the codec refuses: a handler bug
                slot.close_reason = "bad_response"
                self._trace_request(
                    TraceKind.ERROR, "bad_response", conn, request, detail=repr(exc)
                )
        slot.done.set()

    def _error_response(self, conn: _Connection, request: KafkaRequest, code: ErrorCode) -> Any:
        """``error_response``, or ``None`` (the connection closes) when even that fails: a
        request the handler could not read may not be readable here either."""
        try:
            return error_response(request, code)
        except Exception as exc:
            self._trace_request(
                TraceKind.ERROR, "error_response_failed", conn, request, detail=repr(exc)
            )
            return None

    def _encode(self, request: KafkaRequest, response: Any) -> bytes:
        if not isinstance(response, KafkaApiResponseData):
            return encode_response(request, response)
        if not isinstance(response, MetadataResponseData):
            return encode_response(request, build_response(request, response))
        key = (request.api_version, response)
        body = self._metadata_bodies.get(key)
        if body is None:
            body = encode_body(build_response(request, response))
            self._metadata_bodies[key] = body
            if len(self._metadata_bodies) > METADATA_CACHE_SIZE:
                self._metadata_bodies.popitem(last=False)
        else:
            self._metadata_bodies.move_to_end(key)
        return response_frame(request, body)

    async def _write_responses(
        self, conn: _Connection, receive: ObjectReceiveStream[_Slot], tg: TaskGroup
    ) -> None:
        """Write responses in request order; close the connection when one cannot be."""
        async with receive:
            async for slot in receive:
                await slot.done.wait()
                if slot.frame is None:
                    conn.close_reason = slot.close_reason
                    tg.cancel_scope.cancel()
                    return
                if not slot.frame:  # a request answered with nothing (Produce, acks=0)
                    continue
                try:
                    await _send(conn.stream, slot.frame)
                except NetworkError:
                    conn.close_reason = "connection_lost"
                    tg.cancel_scope.cancel()
                    return

    # -------------------------------------------------------------- tracing

    def _bad_frame(self, conn: _Connection, detail: str) -> _Slot:
        """Trace a frame that closes its connection; the slot that closes it."""
        conn.close_reason = "bad_frame"
        self._trace(TraceKind.ERROR, "bad_frame", peer=conn.peer, detail=detail)
        return _Slot.closing("bad_frame")

    def _trace_request(
        self, kind: TraceKind, type: str, conn: _Connection, request: KafkaRequest, **fields: Any
    ) -> None:
        """Trace an event of one request: its correlation id, peer and API key, and more."""
        self._trace(
            kind,
            type,
            corr=request.correlation_id,
            peer=conn.peer,
            api_key=request.api_key,
            **fields,
        )

    def _trace(self, kind: TraceKind, type: str, corr: int | None = None, **fields: Any) -> None:
        if self._tracer is not None:
            self._tracer.emit(
                kind, node=self._node, actor="kafka_listener", type=type, corr=corr, **fields
            )
