"""Producer ids for idempotent producers: Kafka's ``ProducerIdManager``.

Any broker grants InitProducerId without a ``transactional_id`` (Kafka's
``TransactionCoordinator.handleInitProducerId``): a new producer id with epoch 0. Ids
are handed out in order from a block of ``PRODUCER_ID_BLOCK_SIZE`` this broker reserved
in ``/latest_producer_id_block`` (``kafka_zk.allocate_producer_id_block``); the next
block is reserved when one runs out, so no two brokers ever grant the same id.

A component of the ``Broker`` actor: its state is touched only on the broker's task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.zk import kafka_zk
from protocol.errors import ErrorCode, StoreError
from protocol.kafka_data import InitProducerIdRequestData, InitProducerIdResponseData

if TYPE_CHECKING:
    from actors.broker.broker import Broker

__all__ = ["ProducerIdManager"]


class ProducerIdManager:
    """The producer ids ``broker`` grants."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._next = 0
        self._end = -1  # the current block's last id (inclusive); none reserved yet

    async def generate_producer_id(self) -> int:
        """The next id, reserving a new block first when the current one is used up."""
        if self._next > self._end:
            block = await kafka_zk.allocate_producer_id_block(
                self._broker.session, self._broker.broker_id
            )
            self._next, self._end = block.block_start, block.block_end
            self._broker.trace(
                "event",
                "producer_id_block_reserved",
                broker=self._broker.broker_id,
                block_start=block.block_start,
                block_end=block.block_end,
            )
        producer_id = self._next
        self._next += 1
        return producer_id

    async def init_producer_id(self, req: InitProducerIdRequestData) -> InitProducerIdResponseData:
        """A new idempotent producer: a fresh id with epoch 0. kemu has no transaction
        coordinator: a ``transactional_id`` is refused with INVALID_REQUEST (its
        coordinator APIs are not advertised either); a store that cannot be reached is
        COORDINATOR_NOT_AVAILABLE, which clients retry."""
        if req.transactional_id is not None:
            return InitProducerIdResponseData(error_code=ErrorCode.INVALID_REQUEST)
        try:
            producer_id = await self.generate_producer_id()
        except StoreError:
            return InitProducerIdResponseData(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return InitProducerIdResponseData(producer_id=producer_id, producer_epoch=0)
