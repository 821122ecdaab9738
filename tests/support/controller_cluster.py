"""Helpers shared by the reassignment, leader-election and controlled-shutdown tests: a
cluster of fake brokers with real controllers on the virtual clock, with the options of
Kafka's ControllerIntegrationTest harness, and the legacy admin znodes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio

from actors.runtime.clock import run_virtual
from actors.zk import kafka_zk
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.ids import BrokerId, ControllerEpoch, TopicName
from protocol.store import CreateOp, DeleteOp, SetDataOp
from tests.support.fake_brokers import BrokerHandle, ControllerCluster


def run_cluster(
    body: Callable[[ControllerCluster], Awaitable[None]],
    *,
    check_invariants: bool = True,
    **options: bool | int,
) -> None:
    """Run ``body`` with a fresh cluster (``ControllerCluster`` options) on the virtual
    clock; then settle, check the invariants (docs/chaos.md), and tear everything down."""

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            cluster = ControllerCluster(tg, **options)  # type: ignore[arg-type]
            try:
                await body(cluster)
                await cluster.settle()
                if check_invariants:
                    assert await cluster.invariant_violations() == []
            finally:
                await cluster.aclose()
                tg.cancel_scope.cancel()

    run_virtual(main)


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(TopicName(topic), partition)


def ids(*values: int) -> tuple[BrokerId, ...]:
    return tuple(BrokerId(v) for v in values)


async def start(cluster: ControllerCluster, n: int = 3) -> BrokerHandle:
    """Brokers 0..n-1 (three by default), started in order (broker 0 becomes the
    controller); settled."""
    for i in range(n):
        await cluster.start_broker(i)
    active = await cluster.active_controller()
    await cluster.settle()
    return active


async def stop_brokers(cluster: ControllerCluster, *broker_ids: int) -> None:
    """Stops the brokers one after the other, the cluster settled after each."""
    for broker_id in broker_ids:
        await cluster.stop_broker(broker_id)
        await cluster.settle()


async def restart_brokers(cluster: ControllerCluster, *broker_ids: int) -> None:
    """Starts the brokers again one after the other, the cluster settled after each."""
    for broker_id in broker_ids:
        await cluster.start_broker(broker_id)
        await cluster.settle()


async def move_controller_during(cluster: ControllerCluster, write: CreateOp) -> list[str]:
    """ControllerIntegrationTest's controller-move cases: ``write`` and, in the same
    transaction, another controller (broker 7) installed with the controller epoch bumped.
    Returns, once the old controller has resigned and the cluster settled, the events it
    reported it could not finish (``controller_moved``)."""
    admin = await cluster.admin()
    data, stat = await admin.get(zkdata.CONTROLLER_EPOCH_PATH)
    epoch = zkdata.decode_controller_epoch(data)
    usurper = zkdata.ControllerRegistration(broker_id=BrokerId(7), timestamp=0)
    await admin.multi(
        [
            write,
            DeleteOp(path=zkdata.CONTROLLER_PATH),
            CreateOp(path=zkdata.CONTROLLER_PATH, data=usurper.encode(), ephemeral=True),
            SetDataOp(
                path=zkdata.CONTROLLER_EPOCH_PATH,
                data=zkdata.encode_controller_epoch(ControllerEpoch(epoch + 1)),
                version=stat.version,
            ),
        ]
    )
    await cluster.wait_for(lambda e: e.type == "controller_resigned")
    await cluster.settle()
    return [e.fields["event"] for e in cluster.sink.of("event", "controller_moved")]


async def state_of(
    cluster: ControllerCluster, topic: str, partition: int = 0
) -> tuple[int, int, tuple[BrokerId, ...], int]:
    """(leader, leader epoch, ISR, controller epoch) of the state znode."""
    state = await cluster.partition_state(topic, partition)
    assert state is not None
    s = state.state
    return s.leader, s.leader_epoch, s.isr, s.controller_epoch


async def assignment_of(
    cluster: ControllerCluster, topic: str
) -> dict[int, zkdata.ReplicaAssignment]:
    found = await kafka_zk.get_topic_assignment(await cluster.admin(), TopicName(topic))
    assert found is not None
    return found


async def exists(cluster: ControllerCluster, path: str) -> bool:
    return await (await cluster.admin()).exists(path) is not None


async def write_reassignment(
    cluster: ControllerCluster, targets: Mapping[TopicPartition, Sequence[int]]
) -> None:
    """What ``kafka-reassign-partitions.sh --zookeeper --execute`` writes."""
    await kafka_zk.create_partition_reassignment(
        await cluster.admin(),
        zkdata.PartitionReassignment(
            partitions=tuple(
                zkdata.PartitionReplicas(
                    topic=TopicName(p.topic),
                    partition=p.partition,
                    replicas=tuple(BrokerId(b) for b in replicas),
                )
                for p, replicas in targets.items()
            )
        ),
    )


async def write_preferred_election(
    cluster: ControllerCluster, partitions: Sequence[TopicPartition]
) -> None:
    """What ``kafka-preferred-replica-election.sh --zookeeper`` writes."""
    await kafka_zk.create_preferred_replica_election(
        await cluster.admin(), zkdata.PreferredReplicaElection(partitions=tuple(partitions))
    )


async def mark_for_deletion(cluster: ControllerCluster, topic: str) -> None:
    await (await cluster.admin()).create(
        zkdata.delete_topic_path(TopicName(topic)), make_parents=True
    )
