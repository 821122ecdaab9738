"""DeleteTopics on one broker, over the Kafka wire: Kafka's checks in Kafka's order, the
marker it writes, and the wait (DelayedDeleteTopics) until the topics leave its metadata
cache, for every version Kafka 2.7.2 serves (v0-v5).

The broker runs alone: its node on a ``DirectWire``, the embedded store, a real Kafka
listener in front of it, and a stand-in controller actor that only says whether it is the
active one. The test plays the controller's part towards the broker's metadata cache
(UpdateMetadata; leader -2 once a deletion starts), so each behaviour is pinned without
the controller's TopicDeletionManager. Requests are encoded and responses decoded by
kafka-python's protocol classes, a second implementation of Kafka's schemas.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from actors.admin import BrokerConfig
from actors.broker.broker import BROKER_ACTOR, Broker, BrokerSettings, broker_ref
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.tracer import MemorySink, Tracer
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from cluster.kafka.listener import KafkaWireServer
from cluster.launch.cluster import SUPPORTED_APIS, BrokerWireHandler
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.base import Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.control import (
    LEADER_DURING_DELETE,
    Endpoint,
    SecurityProtocol,
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.controller import ControllerStatus, ControllerStatusRequest
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from tests.support.fake_kafka import kp_decode, kp_frame
from tests.support.hosting import hosted_fixture
from tests.support.raw_kafka import exchange
from tests.support.waiting import eventually
from tests.support.wire import DirectWire

pytestmark = pytest.mark.asyncio

ME = BrokerId(0)
HOST = "127.0.0.1"
WAIT = 10.0  # seconds any one step may take before the test fails
LONG = 30_000  # a DeleteTopics timeout no test waits out

NONE = ErrorCode.NONE
TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class StandInController(Actor):
    """The ``controller`` actor of the broker's node, reduced to the one question the
    broker asks it: is this broker the active controller?"""

    def __init__(self) -> None:
        super().__init__("controller")
        self.active = True

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        assert isinstance(msg, ControllerStatusRequest)
        return ControllerStatus(
            broker_id=ME,
            active=self.active,
            controller_id=ME if self.active else BrokerId(-1),
            epoch=ControllerEpoch(1 if self.active else 0),
        )


@dataclass
class LoneBroker:
    node: Node
    session: StoreSession
    port: int
    controller: StandInController
    sink: MemorySink
    partitions: dict[TopicName, int]

    # -- the controller's part

    async def update_metadata(self, states: Sequence[UpdateMetadataPartitionState]) -> None:
        """An UpdateMetadata as the controller sends it (this broker is the only one)."""
        me = UpdateMetadataBroker(
            id=ME,
            endpoints=(
                Endpoint(
                    host=HOST,
                    port=self.port,
                    listener="PLAINTEXT",
                    security_protocol=SecurityProtocol.PLAINTEXT,
                ),
            ),
        )
        request = UpdateMetadataRequest(
            controller_id=ME,
            controller_epoch=ControllerEpoch(1),
            broker_epoch=BrokerEpoch(-1),
            partition_states=tuple(states),
            live_brokers=(me,),
        )
        reply = await self.node.ask(broker_ref(ME), request, timeout=WAIT)
        assert reply == UpdateMetadataResponse(error_code=NONE)

    def _states(self, topic: str, leader: BrokerId) -> list[UpdateMetadataPartitionState]:
        return [
            UpdateMetadataPartitionState(
                topic=TopicName(topic),
                partition=p,
                controller_epoch=ControllerEpoch(1),
                leader=leader,
                leader_epoch=LeaderEpoch(0),
                isr=(ME,),
                zk_version=0,
                replicas=(ME,),
            )
            for p in range(self.partitions[TopicName(topic)])
        ]

    async def topic(self, name: str, partitions: int = 2, *, cached: bool = True) -> None:
        """A topic in the store and (if ``cached``) in the broker's metadata cache."""
        await kafka_zk.write_topic(
            self.session, TopicName(name), {p: (ME,) for p in range(partitions)}, {}
        )
        self.partitions[TopicName(name)] = partitions
        if cached:
            await self.update_metadata(self._states(name, ME))

    async def start_deletion(self, *names: str) -> None:
        """What the controller's "deletion started" UpdateMetadata does: leader -2 for every
        partition of the topics, which the cache then drops."""
        await self.update_metadata(
            [s for n in names for s in self._states(n, LEADER_DURING_DELETE)]
        )

    async def status(self) -> BrokerStatus:
        """A round trip through the broker's mailbox: everything sent before is handled."""
        reply = await self.node.ask(broker_ref(ME), BrokerStatusRequest(), timeout=WAIT)
        assert isinstance(reply, BrokerStatus)
        return reply

    # -- the client's part

    async def raw(self, frame: bytes) -> bytes:
        """One request frame over a new connection; its response frame (b"" if closed)."""
        return await exchange(HOST, self.port, frame, timeout=WAIT)

    async def errors(
        self, version: int, topics: Sequence[str], timeout_ms: int = LONG
    ) -> list[tuple[str, ErrorCode]]:
        """DeleteTopics of ``version``: each entry's (name, error) as kafka-python decodes
        the response."""
        request = DeleteTopicsRequest(version=version, topic_names=topics, timeout_ms=timeout_ms)
        frame = await self.raw(kp_frame(request, correlation_id=7))
        assert frame, "the broker closed the connection"
        correlation_id, body = kp_decode(DeleteTopicsResponse, version, frame)
        assert correlation_id == 7
        return [(r["name"], ErrorCode(r["error_code"])) for r in body["responses"]]

    # -- observation

    async def markers(self) -> tuple[str, ...]:
        return await self.session.children(zkdata.DELETE_TOPICS_PATH)

    def events(self, type: str) -> list[Any]:
        return [e for e in self.sink.of("event", type) if e.actor == BROKER_ACTOR]

    async def parked(self, count: int = 1) -> None:
        """Until ``count`` requests have been parked in the purgatory."""

        async def parked_so_far() -> int:
            return len(self.events("admin_request_parked"))

        await eventually(parked_so_far, until=lambda n: n >= count, timeout=WAIT)


async def _lone_broker(tmp_path: Path, **config: str) -> AsyncIterator[LoneBroker]:
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    store = EmbeddedStore(tracer=tracer)
    wire = DirectWire()
    node = Node("broker-0", attach=wire.attach, tracer=tracer)
    broker_config = BrokerConfig.from_overrides(config)
    controller = StandInController()
    try:
        async with anyio.create_task_group() as tg:
            server = KafkaWireServer(
                BrokerWireHandler(node, 0, 5.0), node=node.node_id, host=HOST, tracer=tracer
            )
            port = await tg.start(server.serve)
            settings = BrokerSettings(
                broker_id=ME,
                log_dirs=(tmp_path / "logs",),
                host=HOST,
                port=port,
                config=broker_config,
            )
            await tg.start(node.run, [Broker(settings, store, with_controller=False), controller])
            session = await store.open_session(timeout=10.0, name="test")
            lone = LoneBroker(node, session, port, controller, sink, {})
            await lone.update_metadata([])  # the controller announces itself and the broker
            try:
                yield lone
            finally:
                await session.close()
                session.events.close()
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()


@hosted_fixture()
async def broker(tmp_path: Path) -> AsyncIterator[LoneBroker]:
    async for lone in _lone_broker(tmp_path):
        yield lone


@hosted_fixture()
async def disabled_broker(tmp_path: Path) -> AsyncIterator[LoneBroker]:
    async for lone in _lone_broker(tmp_path, **{"delete.topic.enable": "false"}):
        yield lone


@dataclass
class Pending:
    """A call running in the background: ``value`` is its result once ``done`` is set."""

    done: anyio.Event = field(default_factory=anyio.Event)
    value: Any = None


def in_background(call: Callable[[], Awaitable[Any]], tg: TaskGroup) -> Pending:
    pending = Pending()

    async def run() -> None:
        pending.value = await call()
        pending.done.set()

    tg.start_soon(run)
    return pending


# ---------------------------------------------------------------------- the happy path


@pytest.mark.parametrize("version", range(6))
async def test_every_version_marks_the_topics_and_answers_once_they_leave_the_cache(
    broker: LoneBroker, version: int
) -> None:
    """Each topic gets its /admin/delete_topics/<t> marker at once; the answer waits until
    none of them is in the broker's metadata cache (one leaving is not enough), then says
    NONE for each."""
    await broker.topic("a")
    await broker.topic("b", partitions=1)
    await broker.topic("kept")
    async with anyio.create_task_group() as tg:
        answer = in_background(lambda: broker.errors(version, ["a", "b"]), tg)
        await broker.parked()
        assert await broker.markers() == ("a", "b")
        await broker.start_deletion("a")
        await broker.status()  # the UpdateMetadata has been handled
        assert not broker.events("admin_request_completed")
        assert not answer.done.is_set()
        await broker.start_deletion("b")
        with anyio.fail_after(WAIT):
            await answer.done.wait()
    assert answer.value == [("a", NONE), ("b", NONE)]
    assert (await broker.status()).topics == ("kept",)
    assert broker.events("topic_marked_for_deletion")[0].fields["topic"] == "a"


async def test_version_6_is_not_advertised_and_closes_the_connection(broker: LoneBroker) -> None:
    """DeleteTopics v6 (topic ids) came with Kafka 2.8: the broker advertises v0-v5 and,
    as a 2.7 broker does with a version it does not know, closes the connection."""
    await broker.topic("a")
    assert SUPPORTED_APIS[20] == (0, 5)
    state = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(version=6, topics=[state(name="a")], timeout_ms=LONG)
    assert await broker.raw(kp_frame(request)) == b""
    assert await broker.markers() == ()


# ---------------------------------------------------------------------- timeouts


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_timeout_zero_or_less_answers_request_timed_out_but_marks(
    broker: LoneBroker, timeout_ms: int
) -> None:
    """With timeout <= 0 the answer comes at once: marked topics are reported
    REQUEST_TIMED_OUT (the deletion goes on), errors are reported as such."""
    await broker.topic("a")
    await broker.topic("b")
    answer = await broker.errors(4, ["a", "nope", "b"], timeout_ms)
    assert answer == [("a", TIMED_OUT), ("nope", UNKNOWN), ("b", TIMED_OUT)]
    assert await broker.markers() == ("a", "b")
    assert not broker.events("admin_request_parked")


async def test_expiry_reports_request_timed_out_for_the_topics_still_cached(
    broker: LoneBroker,
) -> None:
    """When the wait times out, topics that left the cache are NONE and those still in it
    REQUEST_TIMED_OUT; both stay marked."""
    await broker.topic("a")
    await broker.topic("b")
    async with anyio.create_task_group() as tg:
        answer = in_background(lambda: broker.errors(0, ["a", "b"], timeout_ms=300), tg)
        await broker.parked()
        await broker.start_deletion("b")
        with anyio.fail_after(WAIT):
            await answer.done.wait()
    assert answer.value == [("a", TIMED_OUT), ("b", NONE)]
    assert len(broker.events("admin_request_expired")) == 1
    assert await broker.markers() == ("a", "b")


# ---------------------------------------------------------------------- per-topic errors


async def test_unknown_topics_get_unknown_topic_or_partition_and_no_marker(
    broker: LoneBroker,
) -> None:
    """A topic the cache does not know, even if the store has it, and a cached topic the
    store no longer has, are UNKNOWN_TOPIC_OR_PARTITION; nothing is marked; with nothing
    to wait for the answer is immediate."""
    await broker.topic("stored-only", cached=False)
    await broker.topic("cached-only")
    await broker.session.delete(zkdata.topic_path(TopicName("cached-only")), recursive=True)
    answer = await broker.errors(5, ["nope", "stored-only", "cached-only"])
    assert answer == [("nope", UNKNOWN), ("stored-only", UNKNOWN), ("cached-only", UNKNOWN)]
    assert await broker.markers() == ()
    assert not broker.events("admin_request_parked")


async def test_a_partial_batch_waits_for_the_marked_topics_only(broker: LoneBroker) -> None:
    """In a batch mixing known and unknown topics, the known one is marked and waited
    for; the unknown ones keep their error, in the request's order."""
    await broker.topic("a")
    async with anyio.create_task_group() as tg:
        answer = in_background(lambda: broker.errors(3, ["x", "a", "y"]), tg)
        await broker.parked()
        await broker.start_deletion("a")
        with anyio.fail_after(WAIT):
            await answer.done.wait()
    assert answer.value == [("x", UNKNOWN), ("a", NONE), ("y", UNKNOWN)]
    assert await broker.markers() == ("a",)


async def test_a_topic_already_marked_is_waited_for_by_every_caller(broker: LoneBroker) -> None:
    """An existing marker is success, not an error: two requests for the same topic (one
    finding the other's marker) both wait for it and both complete on the one
    UpdateMetadata that drops it."""
    await broker.topic("a")
    async with anyio.create_task_group() as tg:
        first = in_background(lambda: broker.errors(0, ["a"]), tg)
        await broker.parked()
        second = in_background(lambda: broker.errors(2, ["a"]), tg)
        await broker.parked(2)
        assert len(broker.events("topic_already_marked_for_deletion")) == 1
        await broker.start_deletion("a")
        with anyio.fail_after(WAIT):
            await first.done.wait()
            await second.done.wait()
    assert first.value == second.value == [("a", NONE)]
    assert await broker.markers() == ("a",)


async def test_a_topic_named_twice_is_marked_once_and_answered_on_its_first_entry(
    broker: LoneBroker,
) -> None:
    """Kafka 2.7 keeps duplicate entries and sets each topic's outcome on its first entry
    only: the later entry of a cached topic stays NONE, unknown ones all get the error."""
    await broker.topic("a")
    answer = await broker.errors(4, ["a", "nope", "a", "nope"], timeout_ms=0)
    assert answer == [("a", TIMED_OUT), ("nope", UNKNOWN), ("a", NONE), ("nope", UNKNOWN)]
    assert await broker.markers() == ("a",)
    assert len(broker.events("topic_marked_for_deletion")) == 1


async def test_internal_topics_may_be_deleted_through_the_api(broker: LoneBroker) -> None:
    """Unlike the --zookeeper command, the API refuses no internal topic."""
    await broker.topic("__consumer_offsets")
    answer = await broker.errors(5, ["__consumer_offsets"], timeout_ms=0)
    assert answer == [("__consumer_offsets", TIMED_OUT)]
    assert await broker.markers() == ("__consumer_offsets",)


async def test_a_store_failure_is_unknown_server_error(broker: LoneBroker) -> None:
    """A marker the store refuses to create (its parent is an ephemeral node) is
    UNKNOWN_SERVER_ERROR for that topic; nothing is waited for, nothing written."""
    await broker.topic("a")
    await broker.session.delete(zkdata.DELETE_TOPICS_PATH)
    await broker.session.create(zkdata.DELETE_TOPICS_PATH, ephemeral=True)
    answer = await broker.errors(5, ["a", "nope"])
    assert answer == [("a", ErrorCode.UNKNOWN_SERVER_ERROR), ("nope", UNKNOWN)]
    assert await broker.markers() == ()
    assert not broker.events("admin_request_parked")
    assert broker.sink.of("error", "topic_deletion_marking_failed")


# ---------------------------------------------------------------------- refusals


@pytest.mark.parametrize("version", range(6))
async def test_deletion_disabled_is_refused_by_version(
    disabled_broker: LoneBroker, version: int
) -> None:
    """With delete.topic.enable=false every topic gets TOPIC_DELETION_DISABLED (v3+) or
    INVALID_REQUEST (v0-v2, which do not know that code), known or not; nothing is
    written."""
    await disabled_broker.topic("a")
    before = await disabled_broker.markers()
    answer = await disabled_broker.errors(version, ["a", "nope"])
    code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
    assert answer == [("a", code), ("nope", code)]
    assert before == await disabled_broker.markers() == ()
    assert (await disabled_broker.status()).topics == ("a",)


async def test_a_broker_that_is_not_the_controller_and_knows_no_other_says_not_controller(
    broker: LoneBroker,
) -> None:
    """Not the active controller, and the only controller it knows of is itself: every
    topic gets NOT_CONTROLLER and nothing is written. (Knowing another controller, it
    forwards the request: see the cluster tests.)"""
    await broker.topic("a")
    broker.controller.active = False
    answer = await broker.errors(4, ["a", "nope"])
    assert answer == [("a", ErrorCode.NOT_CONTROLLER), ("nope", ErrorCode.NOT_CONTROLLER)]
    assert await broker.markers() == ()
