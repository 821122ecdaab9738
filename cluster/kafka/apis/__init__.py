"""One module per Kafka API, each declaring an ``ApiCodec`` (its key, the versions served,
its translations between the codec and kemu's plain values for both sides of the wire,
and its error answer), gathered in one table (``registry.CODECS``). ApiVersions, which the
listener answers itself, has its own module. Adding an API: docs/kafka-wire.md."""

from cluster.kafka.apis.api_codec import ApiCodec
from cluster.kafka.apis.api_versions import (
    API_VERSIONS_RANGE,
    KAFKA_2_7_API_NAMES,
    KAFKA_2_7_API_VERSIONS,
    ApiVersionsAnswer,
    advertised_api_versions,
    codec_api_versions,
    decode_api_versions_response,
    encode_api_versions_request,
)
from cluster.kafka.apis.registry import (
    CODECS,
    SERVED_API_VERSIONS,
    api_key_of,
    build_response,
    codec_of,
    decode_response,
    encode_request,
    error_response,
    request_data,
)

__all__ = [
    "API_VERSIONS_RANGE",
    "CODECS",
    "KAFKA_2_7_API_NAMES",
    "KAFKA_2_7_API_VERSIONS",
    "SERVED_API_VERSIONS",
    "ApiCodec",
    "ApiVersionsAnswer",
    "advertised_api_versions",
    "api_key_of",
    "build_response",
    "codec_api_versions",
    "codec_of",
    "decode_api_versions_response",
    "decode_response",
    "encode_api_versions_request",
    "encode_request",
    "error_response",
    "request_data",
]
