"""The table of the Kafka APIs kemu speaks, and the functions that go through it.

``CODECS`` maps each API key to its ``ApiCodec`` (one module of ``cluster.kafka.apis``
each); everything API-specific the listener, the broker handler and the admin client need
is looked up here, so adding an API is writing its module and adding it to ``_APIS``.
ApiVersions is not in the table: the listener answers it itself
(``cluster.kafka.apis.api_versions``).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Final

from cluster.kafka.apis import (
    alter_configs,
    alter_partition_reassignments,
    create_partitions,
    create_topics,
    delete_groups,
    delete_topics,
    describe_configs,
    describe_groups,
    describe_log_dirs,
    elect_leaders,
    fetch,
    find_coordinator,
    heartbeat,
    incremental_alter_configs,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    list_partition_reassignments,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from cluster.kafka.apis.api_codec import ApiCodec
from cluster.kafka.codec import build, generic_error_response, response_schema
from cluster.kafka.framing import KafkaRequest, read_response, request_frame
from protocol.errors import ErrorCode, FrameError
from protocol.kafka_api import ClientApiKey, KafkaApiRequestData, KafkaApiResponseData

_APIS: Final[tuple[ApiCodec[Any, Any], ...]] = (
    metadata.CODEC,
    create_topics.CODEC,
    delete_topics.CODEC,
    describe_configs.CODEC,
    describe_log_dirs.CODEC,
    alter_configs.CODEC,
    incremental_alter_configs.CODEC,
    create_partitions.CODEC,
    produce.CODEC,
    fetch.CODEC,
    list_offsets.CODEC,
    init_producer_id.CODEC,
    offset_for_leader_epoch.CODEC,
    find_coordinator.CODEC,
    join_group.CODEC,
    sync_group.CODEC,
    heartbeat.CODEC,
    leave_group.CODEC,
    offset_commit.CODEC,
    offset_fetch.CODEC,
    list_groups.CODEC,
    describe_groups.CODEC,
    delete_groups.CODEC,
    elect_leaders.CODEC,
    alter_partition_reassignments.CODEC,
    list_partition_reassignments.CODEC,
    offset_delete.CODEC,
)

CODECS: Final[Mapping[int, ApiCodec[Any, Any]]] = types.MappingProxyType(
    {int(codec.api_key): codec for codec in _APIS}
)
"""API key -> its codec."""

SERVED_API_VERSIONS: Final[Mapping[int, tuple[int, int]]] = types.MappingProxyType(
    {int(codec.api_key): codec.versions for codec in _APIS}
)
"""API key -> the versions a kemu broker answers (what its handler's ``supported`` says)."""

_BY_REQUEST_TYPE: Final[Mapping[type, ApiCodec[Any, Any]]] = {
    codec.request_type: codec for codec in _APIS
}


def codec_of(data: KafkaApiRequestData) -> ApiCodec[Any, Any]:
    """The codec of a plain request value's API."""
    return _BY_REQUEST_TYPE[type(data)]


def api_key_of(data: KafkaApiRequestData) -> ClientApiKey:
    """The API a plain request value belongs to."""
    return codec_of(data).api_key


# ---------------------------------------------------------------------- the server side


def request_data(request: KafkaRequest) -> KafkaApiRequestData:
    """kemu's plain value for a client request. Raises ``ValueError`` for an API the table
    has no codec for."""
    codec = CODECS.get(request.api_key)
    if codec is None:
        raise ValueError(f"API {request.api_key} has no plain request values")
    data: KafkaApiRequestData = codec.request_data(request.body, request.api_version)
    if codec.with_client is not None:
        data = codec.with_client(data, request.client_id or "", request.client_host)
    return data


def build_response(request: KafkaRequest, data: KafkaApiResponseData) -> Any:
    """The response object answering ``request`` (of its API and version) with ``data``.
    What the version cannot carry is dropped. Raises ``TypeError`` when ``data`` answers
    another API."""
    codec = CODECS.get(request.api_key)
    if codec is None or not isinstance(data, codec.response_type):
        raise TypeError(f"{type(data).__name__} does not answer API {request.api_key}")
    cls = response_schema(request.api_key, request.api_version)
    return build(cls, codec.response_values(data, request))


def error_response(
    request: KafkaRequest, code: ErrorCode, message: str | None = None
) -> Any | None:
    """The response Kafka's ``AbstractRequest.getErrorResponse`` gives: for an API of the
    table every topic or resource of the request gets ``code``; for other APIs, where the
    response schema has a top-level error code, that. ``None`` when the schema cannot
    carry an error."""
    codec = CODECS.get(request.api_key)
    if codec is None:
        cls = response_schema(request.api_key, request.api_version)
        return generic_error_response(cls, code, message)
    data = codec.request_data(request.body, request.api_version)
    return build_response(request, codec.error_answer(data, code, message))


# ---------------------------------------------------------------------- the client side


def encode_request(
    data: KafkaApiRequestData, *, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """A whole request frame (size prefix included) carrying ``data`` as ``api_version``
    of its API. What the version cannot carry is dropped; raises ``TypeError`` when the
    version lacks something the request needs."""
    codec = codec_of(data)
    values = codec.request_values(data)
    return request_frame(int(codec.api_key), api_version, correlation_id, client_id, values)


def decode_response(
    api_key: int, api_version: int, frame: bytes
) -> tuple[int, KafkaApiResponseData]:
    """The correlation id and plain values of a response frame (no size prefix) to a
    request of ``api_key`` and ``api_version``; raises ``FrameError`` if it cannot be read."""
    codec = CODECS.get(api_key)
    if codec is None:
        raise FrameError(f"API {api_key} has no plain response values")
    correlation_id, body = read_response(api_key, api_version, frame)
    try:
        data: KafkaApiResponseData = codec.response_data(body)
    except (TypeError, ValueError) as exc:
        raise FrameError(f"unexpected response of API {api_key} v{api_version}: {exc!r}") from exc
    return correlation_id, data
