"""What reassignment, leader elections and controlled shutdown ask of the controller.

Kafka writes these as methods of ``KafkaController`` that reach into its ZooKeeper client,
its request batch and its event queue. kemu keeps their logic in modules of their own
(``reassignment``, ``leader_election``, ``controlled_shutdown``, ``alter_isr``); each
gets the controller's context and state machines, and this narrow interface for the rest
(the controller implements it with a small adapter), so that a test can watch what they
ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from actors.controller.events import ControllerEventUnion
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.zk.store import StoreSession
from protocol.control import TopicPartition
from protocol.ids import BrokerId


class ControllerOps(Protocol):
    def session(self) -> StoreSession:
        """The controller's current store session (every write on it is to be fenced)."""

    async def send_requests(self, fill: Callable[[ControllerBrokerRequestBatch], None]) -> None:
        """Start a request batch, let ``fill`` add to it, flush it. A batch left in an
        illegal state makes the controller resign (the error is re-raised)."""

    async def send_update_metadata(
        self, broker_ids: Iterable[BrokerId], partitions: Iterable[TopicPartition]
    ) -> None:
        """UpdateMetadata of ``partitions`` to ``broker_ids``."""

    async def watch_existence(self, path: str) -> bool:
        """Register the controller's handler of ``path`` (created: an event is queued) and
        say whether the znode exists now (Kafka's ``registerZNodeChangeHandlerAndCheck
        Existence``)."""

    def enqueue(self, event: ControllerEventUnion) -> None:
        """Queue an event for the controller (processed after the current one)."""

    def trace(self, kind: str, type_: str, **fields: Any) -> None:
        """Record a trace event as the controller actor."""
