"""Produce and Fetch requests a broker answers late: Kafka's ``DelayedProduce`` and
``DelayedFetch`` in their ``DelayedOperationPurgatory``.

A Produce with acks=all waits until the high watermark of every partition it appended
to passes its records (or its ``timeout_ms``); a Fetch waits until ``min_bytes`` can be
returned (or ``max_wait_ms``). Each operation is watched by its partitions: the
``ReplicaManager`` looks at the operations watching a partition when its high watermark
moves, when records are appended to it and when its leadership changes
(``checkAndComplete``), and answers them once they can complete; a timer answers them at
their deadline (``DelayedDataExpired`` in the broker's mailbox, then ``expire``).

The purgatory is a component of the ``Broker`` actor, not an actor: only the broker's
task touches the operations; the timers only enqueue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from actors.runtime.actor import Actor, DeferredReply
from protocol.broker import DelayedDataExpired
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.kafka_data import FetchRequestData, ProducePartitionResponse, ProduceRequestData

__all__ = ["DataPurgatory", "DelayedFetch", "DelayedProduce"]


@dataclass(slots=True)
class DelayedProduce:
    """An acks=all Produce whose appended partitions wait for the high watermark to pass
    ``required`` (the offset after each one's records). ``responses`` hold every
    partition's answer so far, by (topic, partition): a pending one says
    REQUEST_TIMED_OUT, as Kafka's initial status, until it completes."""

    reply: DeferredReply
    request: ProduceRequestData
    responses: dict[tuple[str, int], ProducePartitionResponse]
    required: dict[TopicPartition, int]
    min_insync: dict[TopicPartition, int]


@dataclass(slots=True)
class DelayedFetch:
    """A Fetch waiting for ``request.min_bytes`` of data."""

    reply: DeferredReply
    request: FetchRequestData
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)


DelayedData = DelayedProduce | DelayedFetch


class DataPurgatory:
    """The delayed Produce and Fetch requests of the actor ``owner`` (the broker)."""

    def __init__(self, owner: Actor) -> None:
        self._owner = owner
        self._operations: dict[int, DelayedData] = {}
        self._watchers: dict[TopicPartition, set[int]] = {}
        self._next = 0

    @property
    def delayed(self) -> int:
        """How many operations wait (``numDelayed``)."""
        return len(self._operations)

    def watch(self, operation: DelayedData, keys: Iterable[TopicPartition], timeout_ms: int) -> int:
        """Park ``operation``, watched by ``keys``, until it completes or ``timeout_ms``
        passes; its id."""
        self._next += 1
        op = self._next
        self._operations[op] = operation
        for key in keys:
            self._watchers.setdefault(key, set()).add(op)
        kind = "produce" if isinstance(operation, DelayedProduce) else "fetch"
        self._owner.trace("event", "data_request_parked", operation=op, request=kind)
        self._owner.start_soon(self._timer, op, max(timeout_ms, 0) / 1000)
        return op

    async def _timer(self, op: int, seconds: float) -> None:
        await self._owner.clock.sleep(seconds)
        self._owner.send_self(DelayedDataExpired(operation=op))

    def watching(self, keys: Iterable[TopicPartition]) -> list[tuple[int, DelayedData]]:
        """The operations watched by any of ``keys``, oldest first."""
        ids: set[int] = set()
        for key in keys:
            ids |= self._watchers.get(key, set())
        return [(op, self._operations[op]) for op in sorted(ids) if op in self._operations]

    def complete(self, op: int) -> DelayedData | None:
        """Take ``op`` out (answered now, or expired); None if it already was."""
        operation = self._operations.pop(op, None)
        if operation is None:
            return None
        keys = operation.required if isinstance(operation, DelayedProduce) else operation.partitions
        for key in keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(op)
                if not watchers:
                    del self._watchers[key]
        return operation


def timed_out(response: ProducePartitionResponse) -> ProducePartitionResponse:
    """A pending partition's answer until it completes (``DelayedProduce``'s initial
    status)."""
    return ProducePartitionResponse(
        index=response.index,
        error_code=ErrorCode.REQUEST_TIMED_OUT,
        base_offset=response.base_offset,
        log_append_time_ms=response.log_append_time_ms,
        log_start_offset=response.log_start_offset,
    )
