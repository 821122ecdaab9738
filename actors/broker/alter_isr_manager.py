"""A broker's channel for ISR changes to the controller: Kafka 2.7's ``AlterIsrManager``.

The broker's partitions decide ISR changes as leaders (``actors.broker.isr``) and submit
them here (``SubmitAlterIsr``). Every ``send_interval_ms`` (50 ms, Kafka's
``send-alter-isr`` task) while changes wait and none is in flight, every waiting change is
sent in one AlterIsr request to the active controller, with this broker's id and
registration epoch; the controller and the epoch are asked of the broker
(``BrokerStatusRequest``: its metadata cache's controller, its current epoch). One
request is in flight at a time.

* A top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH, ...), no known controller, or no
  answer within ``request_timeout_ms``: the changes wait again and are re-sent at the next
  tick (unless the broker submitted a newer one or cleared them meanwhile).
* Otherwise the per-partition answers go to the broker (``AlterIsrAnswered``), which
  commits or keeps each change pending (``LeaderIsr.on_alter_isr_result``).

``ClearAlterIsr`` drops unsent changes (a LeaderAndIsr or StopReplica overtook them); an
answer for a change already sent still reaches the broker, which ignores it when its
partition has nothing pending any more.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from actors.broker.names import CONTROLLER_ACTOR, broker_node_id
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.control import AlterIsrPartition, AlterIsrRequest, AlterIsrResponse, TopicPartition
from protocol.controller import (
    AlterIsrAnswered,
    AlterIsrFlush,
    AlterIsrSent,
    ClearAlterIsr,
    SubmitAlterIsr,
)
from protocol.errors import ErrorCode, KemuError
from protocol.ids import BrokerEpoch, BrokerId

log = structlog.get_logger("kemu.broker.alter_isr")

ALTER_ISR_MANAGER_ACTOR = "alter_isr_manager"
SEND_INTERVAL_MS = 50
"""Kafka's ``send-alter-isr`` period."""


def controller_actor_ref(broker_id: BrokerId) -> ActorRef:
    """The controller actor of broker ``broker_id``."""
    return ActorRef(broker_node_id(broker_id), CONTROLLER_ACTOR)


class AlterIsrManager(Actor):
    """See the module docstring. ``owner`` is the broker actor: it answers
    ``BrokerStatusRequest`` and receives ``AlterIsrAnswered``."""

    def __init__(
        self,
        broker_id: BrokerId,
        *,
        owner: ActorRef,
        controller_ref: Callable[[BrokerId], ActorRef] = controller_actor_ref,
        send_interval_ms: int = SEND_INTERVAL_MS,
        request_timeout_ms: int = 30_000,
        name: str = ALTER_ISR_MANAGER_ACTOR,
    ) -> None:
        super().__init__(name)
        self.broker_id = broker_id
        self.owner = owner
        self._controller_ref = controller_ref
        self.send_interval = send_interval_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.unsent: dict[TopicPartition, AlterIsrPartition] = {}
        self.in_flight: dict[TopicPartition, AlterIsrPartition] | None = None
        self._alarm = False

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case SubmitAlterIsr(items=items):
                for item in items:
                    self.unsent[item.topic_partition] = item
                self._schedule()
            case ClearAlterIsr(partitions=partitions):
                for tp in partitions:
                    self.unsent.pop(tp, None)
                    if self.in_flight is not None:  # its answer still comes, but no retry
                        self.in_flight.pop(tp, None)
            case AlterIsrFlush():
                self._alarm = False
                self._flush()
            case AlterIsrSent(response=response):
                self._on_sent(response)
            case _:
                pass
        return None

    def _schedule(self) -> None:
        if self._alarm or not self.unsent:
            return
        self._alarm = True
        self.start_soon(self._tick)

    async def _tick(self) -> None:
        await self.clock.sleep(self.send_interval)
        self.send_self(AlterIsrFlush())

    def _flush(self) -> None:
        if self.in_flight is not None or not self.unsent:
            return
        batch, self.unsent = self.unsent, {}
        self.in_flight = dict(batch)
        self.start_soon(self._send, tuple(batch[tp] for tp in sorted(batch)))

    async def _send(self, items: tuple[AlterIsrPartition, ...]) -> None:
        """Helper task: ask the broker for the controller and epoch, then the controller."""
        response: AlterIsrResponse | None = None
        try:
            status = await self.ask(self.owner, BrokerStatusRequest(), timeout=self.request_timeout)
            if isinstance(status, BrokerStatus) and status.controller_id >= 0:
                request = AlterIsrRequest(
                    broker_id=self.broker_id,
                    broker_epoch=BrokerEpoch(status.broker_epoch),
                    partitions=items,
                )
                reply = await self.ask(
                    self._controller_ref(status.controller_id),
                    request,
                    timeout=self.request_timeout,
                )
                if isinstance(reply, AlterIsrResponse):
                    response = reply
        except KemuError as exc:  # no answer in time, unreachable, refused
            log.info("alter_isr_send_failed", error=repr(exc))
        self.send_self(AlterIsrSent(response=response))

    def _on_sent(self, response: AlterIsrResponse | None) -> None:
        batch, self.in_flight = self.in_flight or {}, None
        if response is None or response.error_code is not ErrorCode.NONE:
            error = "NO_ANSWER" if response is None else response.error_code.name
            log.info("alter_isr_retry", error=error, partitions=len(batch))
            self.trace("event", "alter_isr_retry", error=error, partitions=len(batch))
            for tp, item in batch.items():
                self.unsent.setdefault(tp, item)  # a newer submission wins
        else:
            self.tell(self.owner, AlterIsrAnswered(partitions=response.partitions))
        self._schedule()
