"""What one Kafka API declares to be served and spoken: ``ApiCodec``, one per module of
``cluster.kafka.apis``, gathered in the table of ``cluster.kafka.apis.registry``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.kafka_api import ClientApiKey

Req = TypeVar("Req")
Resp = TypeVar("Resp")

Values = dict[str, Any]
"""Field values of a codec entity keyed by the schema's field names (``codec.build`` turns
them into the entity of one version, dropping what that version lacks)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCodec(Generic[Req, Resp]):
    """One Kafka API: its key, the versions kemu brokers serve, the newest version a Kafka
    2.7 admin client sends, and its translations between the codec's objects (any version)
    and kemu's plain values (``protocol.kafka_api``), for both sides of the wire."""

    api_key: ClientApiKey
    versions: tuple[int, int]
    """The versions a kemu broker answers (within what the codec decodes)."""
    client_version: int
    """The newest version a Kafka 2.7 admin client sends (``kemu topics``' cap)."""
    request_type: type[Req]
    response_type: type[Resp]

    request_data: Callable[[Any, int], Req]
    """Server side: a decoded request body of a version -> the plain request."""
    response_values: Callable[[Resp, KafkaRequest], Values]
    """Server side: the plain answer -> the response's field values, for the request."""
    error_answer: Callable[[Req, ErrorCode, str | None], Resp]
    """Server side: the answer Kafka's ``AbstractRequest.getErrorResponse`` gives, every
    topic or resource of the request failing with the code."""

    request_values: Callable[[Req], Values]
    """Client side: the plain request -> the request's field values."""
    response_data: Callable[[Any], Resp]
    """Client side: a decoded response body of any version -> the plain answer (fields
    the version lacks take their defaults)."""
    with_client: Callable[[Req, str, str], Req] | None = None
    """Server side, for requests that record who sent them (JoinGroup): the plain
    request with the header's client id and the connection's client host."""
