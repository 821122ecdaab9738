"""Frames and headers: a request frame's header parsed and its body decoded (after the length
check of ``cluster.kafka.bounds``), response frames built with the header version the
API's schema says, and the request frames and response bodies of the client side."""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from cluster.kafka.bounds import check_lengths, without_unknown_tags
from cluster.kafka.codec import build, encode_body, request_schema, response_schema
from protocol.errors import FrameError, NetworkError
from protocol.kafka_api import (
    ClientApiKey,
)

API_VERSIONS_KEY = int(ClientApiKey.API_VERSIONS)
_FIXED_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
SIZE = struct.Struct(">i")


class UnsupportedApiError(NetworkError):
    """A request for an API key or version the listener does not advertise: Kafka closes
    the connection."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"API {api_key} v{api_version} is not advertised")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRequest:
    """A decoded client request. ``body`` is the codec's request object for this API and
    version; ``request_data`` turns it into kemu's plain values."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    client_host: str = ""
    """The client's address as Kafka's ``RequestContext.clientAddress`` prints it
    (``/127.0.0.1``), set by the listener: JoinGroup records it for each member."""


def decode_request(frame: bytes, advertised: Mapping[int, tuple[int, int]]) -> KafkaRequest:
    """The request in one frame (without its size prefix). Raises ``UnsupportedApiError``
    for an API or version not in ``advertised`` and ``FrameError`` for anything the codec
    cannot decode (a malformed frame). Tagged fields the schema does not know are skipped,
    as Kafka's readers do."""
    if len(frame) < _FIXED_HEADER.size:
        raise FrameError(f"a {len(frame)}-byte request has no room for a request header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame)
    versions = advertised.get(api_key)
    if versions is None or not versions[0] <= api_version <= versions[1]:
        raise UnsupportedApiError(api_key, api_version, correlation_id)
    schema = request_schema(api_key, api_version)
    try:
        frame = without_unknown_tags(schema, frame)
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, _ = entity_reader(schema)(frame, used)
    except FrameError as exc:
        raise FrameError(f"cannot decode API {api_key} v{api_version}: {exc}") from exc
    except Exception as exc:  # the codec's errors
        raise FrameError(f"cannot decode API {api_key} v{api_version}: {exc!r}") from exc
    return KafkaRequest(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=header.client_id,
        body=body,
    )


def decode_header_only(frame: bytes) -> KafkaRequest:
    """A request whose body we cannot read (ApiVersions newer than ours): its v1 header,
    which the v2 header starts with."""
    schema = request_schema(API_VERSIONS_KEY, 0)
    try:
        check_lengths(schema.__header_schema__, frame)
        header, _ = entity_reader(schema.__header_schema__)(frame, 0)
    except Exception as exc:
        raise FrameError(f"cannot decode a request header: {exc!r}") from exc
    return KafkaRequest(
        api_key=header.request_api_key,
        api_version=header.request_api_version,
        correlation_id=header.correlation_id,
        client_id=header.client_id,
        body=None,
    )


def encode_response(request: KafkaRequest, response: Any) -> bytes:
    """The whole response frame (size, header of the schema's version, body). Raises
    ``TypeError`` when ``response`` is not the response to ``request``'s API and version."""
    cls = type(response)
    if cls is not response_schema(request.api_key, request.api_version):
        raise TypeError(
            f"{cls.__name__} does not answer API {request.api_key} v{request.api_version}"
        )
    return response_frame(request, encode_body(response))


def response_frame(request: KafkaRequest, body: bytes) -> bytes:
    """Size prefix, the response header of the version the API's schema says, ``body``."""
    header_cls = response_schema(request.api_key, request.api_version).__header_schema__
    buffer = io.BytesIO()
    buffer.write(bytes(SIZE.size))
    entity_writer(header_cls)(buffer, header_cls(correlation_id=request.correlation_id))
    buffer.write(body)
    data = bytearray(buffer.getvalue())
    SIZE.pack_into(data, 0, len(data) - SIZE.size)
    return bytes(data)


def header_v0_frame(correlation_id: int, body: bytes) -> bytes:
    """A response frame with header v0 (the correlation id alone): ApiVersions' answers,
    whatever their version, so that a client can read them before it knows ours."""
    return SIZE.pack(SIZE.size + len(body)) + SIZE.pack(correlation_id) + body


def request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, values: Any
) -> bytes:
    """Size prefix, the request header of the version the API's schema says, the body."""
    cls = request_schema(api_key, api_version)
    header_cls = cls.__header_schema__
    header_values = {
        "request_api_key": api_key,
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    buffer = io.BytesIO()
    buffer.write(bytes(SIZE.size))
    entity_writer(header_cls)(buffer, build(header_cls, header_values))
    entity_writer(cls)(buffer, build(cls, values))
    data = bytearray(buffer.getvalue())
    SIZE.pack_into(data, 0, len(data) - SIZE.size)
    return bytes(data)


def read_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """The correlation id and the codec's body of a response frame (no size prefix)."""
    cls = response_schema(api_key, api_version)
    try:
        frame = without_unknown_tags(cls, frame)
        header, used = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, used)
    except Exception as exc:  # the codec's errors
        raise FrameError(
            f"cannot decode a response of API {api_key} v{api_version}: {exc!r}"
        ) from exc
    return int(header.correlation_id), body
