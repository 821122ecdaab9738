"""The channel manager: one FIFO sender per broker, retries until answered or removed."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors.controller.channel import ControllerChannelManager
from actors.controller.events import ControllerEvent, UpdateMetadataResponseReceived
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import VirtualClock, run_virtual
from actors.runtime.tracer import MemorySink, Tracer
from protocol.base import ActorRef, Message
from protocol.control import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch
from tests.support.waiting import until
from tests.support.wire import DirectWire


class FlakyBroker(Actor):
    """Fails its first ``failures`` requests, then answers; records what it served."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__("broker")
        self.failures = failures
        self.served: list[int] = []

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        assert isinstance(msg, UpdateMetadataRequest)
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("not ready")
        self.served.append(msg.controller_epoch)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)


def request(n: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=BrokerId(0),
        controller_epoch=ControllerEpoch(n),
        broker_epoch=BrokerEpoch(1),
        live_brokers=(),
    )


def to_event(response: Message) -> ControllerEvent | None:
    assert isinstance(response, UpdateMetadataResponse)
    return UpdateMetadataResponseReceived(broker_id=BrokerId(1), response=response)


async def _setup(
    tg: anyio.abc.TaskGroup, broker: FlakyBroker
) -> tuple[ControllerChannelManager, list[ControllerEvent], MemorySink]:
    wire = DirectWire()
    tracer = Tracer()
    sink = MemorySink()
    tracer.add_sink(sink)
    clock = VirtualClock()
    controller_node = Node("broker-0", attach=wire.attach, clock=clock, tracer=tracer)
    broker_node = Node("broker-1", attach=wire.attach, clock=clock, tracer=tracer)
    await tg.start(controller_node.run)
    await tg.start(broker_node.run, [broker])
    events: list[ControllerEvent] = []

    def trace(kind: str, type_: str, **fields: Any) -> None:
        tracer.emit(kind, node="broker-0", actor="controller", type=type_, **fields)

    channel = ControllerChannelManager(
        controller_node,
        source=ActorRef("broker-0", "controller"),
        emit=events.append,
        request_timeout=30.0,
        trace=trace,
    )
    return channel, events, sink


def test_requests_are_delivered_in_order_and_answered_as_events() -> None:
    """Requests to one broker go one at a time, in order; each answer becomes an event."""

    async def body() -> None:
        broker = FlakyBroker()
        async with anyio.create_task_group() as tg:
            channel, events, _ = await _setup(tg, broker)
            channel.add_broker(BrokerId(1))
            for n in (1, 2, 3):
                channel.send_request(BrokerId(1), request(n), to_event)
            assert channel.queue_depth(BrokerId(1)) == 3
            await until(lambda: len(broker.served) == 3)
            assert broker.served == [1, 2, 3]
            assert len(events) == 3
            assert channel.queue_depth(BrokerId(1)) == 0
            tg.cancel_scope.cancel()

    run_virtual(body)


def test_a_failing_request_is_retried_every_100ms_until_answered() -> None:
    """Two failures then success: delivered at t=0.2 s, in order, later requests waiting."""

    async def body() -> None:
        broker = FlakyBroker(failures=2)
        async with anyio.create_task_group() as tg:
            channel, events, sink = await _setup(tg, broker)
            channel.add_broker(BrokerId(1))
            channel.send_request(BrokerId(1), request(1), to_event)
            channel.send_request(BrokerId(1), request(2), None)
            # Virtual time is the behaviour here: failed at t=0 and t=0.1, delivered at 0.2.
            await anyio.sleep(0.15)
            assert broker.served == []
            await anyio.sleep(0.1)
            assert broker.served == [1, 2]
            assert anyio.current_time() == pytest.approx(0.25)
            assert len(events) == 1
            assert [e.fields["attempt"] for e in sink.of("error", "controller_request_failed")] == [
                1,
                2,
            ]
            tg.cancel_scope.cancel()

    run_virtual(body)


def test_removing_a_broker_stops_its_sender_and_drops_its_queue() -> None:
    """A removed broker's queued requests are discarded (traced) and never delivered."""

    async def body() -> None:
        broker = FlakyBroker(failures=1000)
        async with anyio.create_task_group() as tg:
            channel, events, sink = await _setup(tg, broker)
            channel.add_broker(BrokerId(1))
            channel.send_request(BrokerId(1), request(1), to_event)
            channel.send_request(BrokerId(1), request(2), to_event)
            await anyio.sleep(1.05)  # between two attempts: nothing in flight
            channel.remove_broker(BrokerId(1))
            broker.failures = 0
            await anyio.sleep(1.0)  # ten retry intervals of virtual time: none comes
            assert broker.served == []
            assert events == []
            (dropped,) = sink.of("event", "channel_requests_dropped")
            assert dropped.fields["count"] == 2
            channel.send_request(BrokerId(1), request(3), to_event)  # unknown now: dropped
            assert sink.of("drop", "controller_request_dropped")
            channel.add_broker(BrokerId(1))  # a fresh queue after re-adding
            channel.send_request(BrokerId(1), request(4), to_event)
            await until(lambda: broker.served != [])
            assert broker.served == [4]
            tg.cancel_scope.cancel()

    run_virtual(body)
