"""One request queue and one sender task per broker (Kafka's ``ControllerChannelManager``).

Each broker the controller talks to gets a FIFO queue and a sender task owned by the
node's task group. The sender asks the broker's ``broker`` actor, one request at a time,
and retries every ``retry_backoff`` seconds of the injected clock until it gets an answer
or the broker is removed, which cancels the sender and discards its queue. The queue is
unbounded on purpose: the controller's event task enqueues and must never wait on a slow
broker; ``queue_depth`` exposes it. A response is handed back only as a controller event.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import anyio
import structlog

from actors.controller import recording
from actors.controller.events import ControllerEvent
from actors.controller.request_batch import ControlRequest, ResponseToEvent
from actors.runtime.actor import Node
from actors.runtime.clock import Clock
from actors.runtime.tracer import payload_fields
from protocol.base import ActorRef, Message
from protocol.errors import KemuError
from protocol.ids import BrokerId

log = structlog.get_logger("kemu.controller.channel")

RETRY_BACKOFF = 0.1
"""Seconds between attempts to deliver a request (Kafka's 100 ms)."""


def broker_actor_ref(broker_id: BrokerId) -> ActorRef:
    """Where a broker's control-plane requests go: actor ``broker`` on node ``broker-<id>``."""
    return ActorRef(f"broker-{broker_id}", "broker")


TraceFn = Callable[..., None]


@dataclass(slots=True)
class _QueueItem:
    request: ControlRequest
    on_response: ResponseToEvent | None
    enqueued_at: float


class _BrokerChannel:
    """A broker's queue and the cancel scope of its sender task."""

    def __init__(self, broker_id: BrokerId) -> None:
        self.broker_id = broker_id
        self.queue: deque[_QueueItem] = deque()
        self.scope = anyio.CancelScope()
        self.waiter: asyncio.Future[None] | None = None
        self.sent = 0

    def put(self, item: _QueueItem) -> None:
        self.queue.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def take(self) -> _QueueItem:
        while not self.queue:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        return self.queue[0]  # removed once answered, so depth counts the in-flight one


class ControllerChannelManager:
    """Per-broker senders. ``emit`` puts response events on the controller's queue."""

    def __init__(
        self,
        node: Node,
        *,
        source: ActorRef,
        emit: Callable[[ControllerEvent], None],
        request_timeout: float,
        retry_backoff: float = RETRY_BACKOFF,
        broker_ref: Callable[[BrokerId], ActorRef] = broker_actor_ref,
        clock: Clock | None = None,
        trace: TraceFn | None = None,
        record_requests: bool = False,
    ) -> None:
        """``record_requests``: trace each request handed over (``controller_request``,
        its type and payload) for a replay (``actors.controller.recording``)."""
        self._node = node
        self._record_requests = record_requests and trace is not None
        self._source = source
        self._emit = emit
        self._timeout = request_timeout
        self._backoff = retry_backoff
        self._broker_ref = broker_ref
        self._clock = clock or node.clock
        self._trace = trace
        self._channels: dict[BrokerId, _BrokerChannel] = {}

    # -- brokers

    @property
    def brokers(self) -> tuple[BrokerId, ...]:
        return tuple(sorted(self._channels))

    def startup(self, broker_ids: Iterable[BrokerId]) -> None:
        for broker_id in sorted(broker_ids):
            self.add_broker(broker_id)

    def add_broker(self, broker_id: BrokerId) -> None:
        """Start a queue and sender for ``broker_id`` (a no-op if it has one)."""
        if broker_id in self._channels:
            return
        channel = _BrokerChannel(broker_id)
        self._channels[broker_id] = channel
        self._start_sender(channel)

    def _start_sender(self, channel: _BrokerChannel) -> None:
        """Start the broker's sender task (a replay, which sends nothing, starts none)."""
        self._node.task_group.start_soon(self._send_loop, channel)

    def remove_broker(self, broker_id: BrokerId) -> None:
        """Stop the sender and discard whatever is still queued for ``broker_id``."""
        channel = self._channels.pop(broker_id, None)
        if channel is None:
            return
        dropped = len(channel.queue)
        channel.queue.clear()
        channel.scope.cancel()
        if dropped and self._trace is not None:
            self._trace("event", "channel_requests_dropped", broker=broker_id, count=dropped)

    def shutdown(self) -> None:
        for broker_id in list(self._channels):
            self.remove_broker(broker_id)

    def queue_depth(self, broker_id: BrokerId) -> int:
        channel = self._channels.get(broker_id)
        return len(channel.queue) if channel is not None else 0

    # -- sending

    def send_request(
        self, broker_id: BrokerId, request: ControlRequest, on_response: ResponseToEvent | None
    ) -> None:
        if self._record_requests and self._trace is not None:
            self._trace(
                "event",
                recording.REQUEST,
                broker=broker_id,
                request=type(request).__name__,
                payload=payload_fields(request),
            )
        channel = self._channels.get(broker_id)
        if channel is None:
            log.warning(
                "request_to_unknown_broker", broker=broker_id, request=type(request).__name__
            )
            if self._trace is not None:
                self._trace(
                    "drop",
                    "controller_request_dropped",
                    broker=broker_id,
                    request=type(request).__name__,
                    reason="unknown_broker",
                )
            return
        channel.put(_QueueItem(request, on_response, self._clock.now()))

    async def _send_loop(self, channel: _BrokerChannel) -> None:
        with channel.scope:
            dst = self._broker_ref(channel.broker_id)
            while True:
                item = await channel.take()
                response = await self._deliver(channel, dst, item)
                if channel.scope.cancel_called:
                    # Removed while the answer was on its way (the queue is cleared): the
                    # answer resumed this task before the cancellation could; drop it.
                    return
                channel.queue.popleft()
                channel.sent += 1
                if item.on_response is not None:
                    event = item.on_response(response)
                    if event is not None:
                        self._emit(event)

    async def _deliver(self, channel: _BrokerChannel, dst: ActorRef, item: _QueueItem) -> Message:
        """Ask until answered; only removing the broker (cancellation) ends the attempts."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._node.ask_from(
                    self._source, dst, item.request, timeout=self._timeout
                )
            except KemuError as exc:
                if self._trace is not None:
                    self._trace(
                        "error",
                        "controller_request_failed",
                        broker=channel.broker_id,
                        request=type(item.request).__name__,
                        attempt=attempt,
                        error=type(exc).__name__,
                    )
                await self._clock.sleep(self._backoff)
