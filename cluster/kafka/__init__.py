"""The Kafka protocol side of kemu: the listener real clients talk to, the per-API codecs
behind it, and a minimal admin client (docs/kafka-wire.md). The only package that imports
the wire codec library (kio)."""

from cluster.kafka.apis import (
    CODECS,
    KAFKA_2_7_API_VERSIONS,
    SERVED_API_VERSIONS,
    ApiCodec,
    advertised_api_versions,
    api_key_of,
    build_response,
    decode_response,
    encode_request,
    error_response,
    request_data,
)
from cluster.kafka.bounds import check_lengths
from cluster.kafka.framing import (
    KafkaRequest,
    UnsupportedApiError,
    decode_request,
    encode_response,
)
from cluster.kafka.listener import (
    DEFAULT_MAX_FRAME_BYTES,
    KafkaApiHandler,
    KafkaWireServer,
)

__all__ = [
    "CODECS",
    "DEFAULT_MAX_FRAME_BYTES",
    "KAFKA_2_7_API_VERSIONS",
    "SERVED_API_VERSIONS",
    "ApiCodec",
    "KafkaApiHandler",
    "KafkaRequest",
    "KafkaWireServer",
    "UnsupportedApiError",
    "advertised_api_versions",
    "api_key_of",
    "build_response",
    "check_lengths",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "error_response",
    "request_data",
]
