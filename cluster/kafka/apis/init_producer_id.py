"""InitProducerId (API key 22): a producer id for an idempotent producer (null
``transactional_id``), which any broker grants (``KafkaApis.handleInitProducerIdRequest``,
``TransactionCoordinator.handleInitProducerId``). kemu serves Kafka 2.7's v0-v4."""

from __future__ import annotations

from typing import Any

from cluster.kafka.apis.api_codec import ApiCodec, Values
from cluster.kafka.codec import as_error_code, as_millis
from cluster.kafka.framing import KafkaRequest
from protocol.errors import ErrorCode
from protocol.kafka_api import ClientApiKey
from protocol.kafka_data import InitProducerIdRequestData, InitProducerIdResponseData


def request_data(body: Any, version: int) -> InitProducerIdRequestData:
    del version
    return InitProducerIdRequestData(
        transactional_id=body.transactional_id,
        transaction_timeout_ms=as_millis(body.transaction_timeout),
        producer_id=int(getattr(body, "producer_id", -1)),
        producer_epoch=int(getattr(body, "producer_epoch", -1)),
    )


def response_values(data: InitProducerIdResponseData, request: KafkaRequest) -> Values:
    del request
    return {
        "throttle_time": data.throttle_time_ms,
        "error_code": data.error_code,
        "producer_id": data.producer_id,
        "producer_epoch": data.producer_epoch,
    }


def error_answer(
    data: InitProducerIdRequestData, code: ErrorCode, message: str | None
) -> InitProducerIdResponseData:
    """``InitProducerIdRequest.getErrorResponse``: the code, no producer id."""
    del data, message
    return InitProducerIdResponseData(error_code=code)


def request_values(data: InitProducerIdRequestData) -> Values:
    return {
        "transactional_id": data.transactional_id,
        "transaction_timeout": data.transaction_timeout_ms,
        "producer_id": data.producer_id,
        "producer_epoch": data.producer_epoch,
    }


def response_data(body: Any) -> InitProducerIdResponseData:
    return InitProducerIdResponseData(
        throttle_time_ms=as_millis(body.throttle_time),
        error_code=as_error_code(body.error_code),
        producer_id=int(body.producer_id),
        producer_epoch=int(body.producer_epoch),
    )


CODEC = ApiCodec(
    api_key=ClientApiKey.INIT_PRODUCER_ID,
    versions=(0, 4),
    client_version=4,
    request_type=InitProducerIdRequestData,
    response_type=InitProducerIdResponseData,
    request_data=request_data,
    response_values=response_values,
    error_answer=error_answer,
    request_values=request_values,
    response_data=response_data,
)
