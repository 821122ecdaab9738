"""StopReplica on one broker, as Kafka 2.7.2's ``ReplicaManager.stopReplicas`` sorts each
partition: in an offline log directory, KAFKA_STORAGE_ERROR; hosted, stopped when the
request's leader epoch is EPOCH_DURING_DELETE, NO_EPOCH or newer than the broker's, and
FENCED_LEADER_EPOCH when it is older or equal; not hosted, stopped.

The broker runs alone (the embedded store, its node on a ``DirectWire``, no controller):
the test sends LeaderAndIsr and StopReplica as the controller would. Its two log
directories are on a disk that fails on demand, so one directory can go offline while
the other stays (``handleLogDirFailure``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from actors.admin import BrokerConfig
from actors.broker.broker import BROKER_ACTOR, Broker, BrokerSettings, broker_ref
from actors.log.disk import DiskOp, FaultyDisk
from actors.runtime.actor import Node
from actors.runtime.tracer import MemorySink, Tracer
from cluster.store.embedded import EmbeddedStore
from protocol.control import (
    EPOCH_DURING_DELETE,
    NO_EPOCH,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, LeaderEpoch, TopicName
from tests.support.hosting import hosted_fixture
from tests.support.waiting import eventually
from tests.support.wire import DirectWire

pytestmark = pytest.mark.asyncio

ME = BrokerId(0)
WAIT = 10.0
TOPIC = TopicName("t")
EPOCH = 5  # the leader epoch every partition is led with


@dataclass
class LoneBroker:
    node: Node
    disk: FaultyDisk
    sink: MemorySink

    @property
    def broker(self) -> Broker:
        broker = self.node.actor(BROKER_ACTOR)
        assert isinstance(broker, Broker)
        return broker

    async def lead(self, partitions: int) -> None:
        """LeaderAndIsr: this broker leads partitions 0..n-1 of ``t`` at ``EPOCH``."""
        request = LeaderAndIsrRequest(
            controller_id=ME,
            controller_epoch=ControllerEpoch(1),
            broker_epoch=BrokerEpoch(-1),
            partition_states=tuple(
                LeaderAndIsrPartitionState(
                    topic=TOPIC,
                    partition=p,
                    controller_epoch=ControllerEpoch(1),
                    leader=ME,
                    leader_epoch=LeaderEpoch(EPOCH),
                    isr=(ME,),
                    zk_version=0,
                    replicas=(ME,),
                    is_new=True,
                )
                for p in range(partitions)
            ),
            live_leaders=(),
        )
        reply = await self.node.ask(broker_ref(ME), request, timeout=WAIT)
        assert isinstance(reply, LeaderAndIsrResponse)
        assert {e.error_code for e in reply.partition_errors} == {ErrorCode.NONE}

    async def stop(self, *partitions: tuple[int, int, bool]) -> list[ErrorCode]:
        """StopReplica of (partition, leader epoch, delete) each; each partition's error."""
        reply = await self.node.ask(broker_ref(ME), stop_request(*partitions), timeout=WAIT)
        assert isinstance(reply, StopReplicaResponse)
        assert reply.error_code is ErrorCode.NONE
        return [e.error_code for e in reply.partition_errors]

    def log_dir_of(self, partition: int) -> str:
        return self.broker.replica_manager.log_dirs[TopicPartition(TOPIC, partition)]


def stop_request(*partitions: tuple[int, int, bool], epoch: int = 1) -> StopReplicaRequest:
    """StopReplica from controller epoch ``epoch`` of (partition, leader epoch, delete)."""
    states = tuple(
        StopReplicaPartitionState(
            topic=TOPIC, partition=p, leader_epoch=LeaderEpoch(e), delete_partition=delete
        )
        for p, e, delete in partitions
    )
    return StopReplicaRequest(
        controller_id=ME,
        controller_epoch=ControllerEpoch(epoch),
        broker_epoch=BrokerEpoch(-1),
        partitions=states,
    )


@hosted_fixture()
async def lone(tmp_path: Path) -> AsyncIterator[LoneBroker]:
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    store = EmbeddedStore(tracer=tracer)
    disk = FaultyDisk()
    node = Node("broker-0", attach=DirectWire().attach, tracer=tracer)
    settings = BrokerSettings(
        broker_id=ME,
        log_dirs=(tmp_path / "a", tmp_path / "b"),
        host="127.0.0.1",
        port=9092,
        config=BrokerConfig.from_overrides({}),
        disk=disk,
    )
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Broker(settings, store, with_controller=False)])
            yield LoneBroker(node, disk, sink)
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


def codes(*names: str) -> Sequence[ErrorCode]:
    return [ErrorCode[name] for name in names]


async def test_the_leader_epoch_decides_as_stop_replicas_does(lone: LoneBroker) -> None:
    """Against a hosted partition led at epoch 5: 6, NO_EPOCH and EPOCH_DURING_DELETE stop
    it; 4 and 5 itself are FENCED_LEADER_EPOCH (Kafka 2.7.2 fences an equal epoch: "its
    associated leader epoch matches the current leader epoch"); a partition this broker
    does not host is stopped whatever its epoch."""
    await lone.lead(5)
    assert await lone.stop(
        (0, EPOCH + 1, False),
        (1, NO_EPOCH, False),
        (2, EPOCH_DURING_DELETE, False),
        (3, EPOCH - 1, False),
        (4, EPOCH, False),
        (9, 0, False),
    ) == codes("NONE", "NONE", "NONE", "FENCED_LEADER_EPOCH", "FENCED_LEADER_EPOCH", "NONE")
    # A fenced partition is left as it was: its log stays, and a newer epoch still works.
    assert await lone.stop((4, EPOCH + 1, True)) == codes("NONE")


async def test_an_older_controller_is_refused_whole(lone: LoneBroker) -> None:
    """testStopReplicaWithStaleControllerEpoch: a request from an older controller epoch
    than the broker has seen is STALE_CONTROLLER_EPOCH as a whole, nothing stopped."""
    await lone.lead(1)
    request = stop_request((0, EPOCH + 1, True), epoch=0)
    reply = await lone.node.ask(broker_ref(ME), request, timeout=WAIT)
    assert reply == StopReplicaResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    assert TopicPartition(TOPIC, 0) in lone.broker.replica_manager.log_dirs


async def test_a_partition_in_an_offline_log_dir_is_a_storage_error(lone: LoneBroker) -> None:
    """A failed rename (StopReplica with delete of partition 0) takes its log directory
    offline: that partition answers KAFKA_STORAGE_ERROR (it was no longer hosted when its
    deletion failed, as in ``stopPartitions``), and every other partition whose log is in
    that directory goes offline and answers it from then on, delete or not, whatever the
    epoch; a partition in the other directory is stopped as before."""
    await lone.lead(4)
    broken = lone.log_dir_of(0)
    same = [p for p in (1, 2, 3) if lone.log_dir_of(p) == broken]
    other = [p for p in (1, 2, 3) if lone.log_dir_of(p) != broken]
    assert same
    assert other
    lone.disk.fail(Path(broken), [DiskOp.RENAME])
    assert await lone.stop((0, EPOCH + 1, True)) == codes("KAFKA_STORAGE_ERROR")

    async def offline_event() -> list[object]:
        return [e.fields for e in lone.sink.of("event", "partitions_offline")]

    (event,) = await eventually(offline_event, until=bool, timeout=WAIT)
    assert event == {"log_dir": broken, "partitions": [f"t-{p}" for p in same]}
    assert await lone.stop(
        (same[0], EPOCH + 1, False), (same[0], NO_EPOCH, True), (other[0], EPOCH + 1, False)
    ) == codes("KAFKA_STORAGE_ERROR", "KAFKA_STORAGE_ERROR", "NONE")
