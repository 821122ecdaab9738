"""The controller's AlterIsr processing (``KafkaController.processAlterIsr``), against fake
brokers with real controllers on the virtual clock and the embedded store."""

from __future__ import annotations

from actors.controller.model import Leadership
from actors.zk.kafka_zk import PartitionState
from protocol.control import (
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    UpdateMetadataRequest,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, LeaderEpoch, TopicName
from tests.support.controller_cluster import ids, run_cluster, start, state_of, tp
from tests.support.fake_brokers import BrokerHandle, ControllerCluster


def proposal(
    topic: str, isr: tuple[int, ...], *, epoch: int = 0, version: int = 0, partition: int = 0
) -> AlterIsrPartition:
    return AlterIsrPartition(
        topic=TopicName(topic),
        partition=partition,
        leader_epoch=LeaderEpoch(epoch),
        new_isr=ids(*isr),
        current_isr_version=version,
    )


async def znode(cluster: ControllerCluster, topic: str, partition: int = 0) -> PartitionState:
    state = await cluster.partition_state(topic, partition)
    assert state is not None
    return state


async def alter_isr(
    cluster: ControllerCluster,
    to: BrokerHandle,
    sender: int,
    *partitions: AlterIsrPartition,
    broker_epoch: int | None = None,
) -> AlterIsrResponse:
    """Send AlterIsr as broker ``sender`` (with its registered epoch unless told) to the
    controller of ``to``."""
    client = await cluster.client()
    epoch = cluster.brokers[sender].broker.broker_epoch if broker_epoch is None else broker_epoch
    request = AlterIsrRequest(
        broker_id=BrokerId(sender), broker_epoch=BrokerEpoch(epoch), partitions=partitions
    )
    reply = await client.ask(to.controller.ref, request, timeout=5.0)
    assert isinstance(reply, AlterIsrResponse)
    return reply


def test_a_shrink_is_written_with_the_same_leader_epoch_and_announced_by_update_metadata() -> None:
    """A leader's shrink is written to the state znode at the next zkVersion with its leader
    epoch unchanged and the controller's epoch, cached, answered, and sent to every broker
    as UpdateMetadata (not LeaderAndIsr)."""

    async def body(cluster: ControllerCluster) -> None:
        active = await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        before = await znode(cluster, "t")
        assert before.state.isr == ids(0, 1, 2)
        lai_counts = {b: len(h.broker.leader_and_isr()) for b, h in cluster.brokers.items()}
        um_counts = {b: len(h.broker.update_metadata()) for b, h in cluster.brokers.items()}

        reply = await alter_isr(
            cluster, active, 0, proposal("t", (0, 2), version=before.zk_version)
        )

        assert reply.error_code is ErrorCode.NONE
        assert reply.partitions == (
            AlterIsrPartitionResult(
                topic=TopicName("t"),
                partition=0,
                leader=BrokerId(0),
                leader_epoch=LeaderEpoch(0),
                isr=ids(0, 2),
                current_isr_version=before.zk_version + 1,
            ),
        )
        after = await znode(cluster, "t")
        assert after.zk_version == before.zk_version + 1
        assert await state_of(cluster, "t") == (0, 0, ids(0, 2), active.controller.context.epoch)
        cached = active.controller.context.leadership(tp("t"))
        assert isinstance(cached, Leadership)
        assert (cached.isr, cached.zk_version) == (ids(0, 2), after.zk_version)
        await cluster.settle()
        for b, h in cluster.brokers.items():
            assert len(h.broker.leader_and_isr()) == lai_counts[b]
            sent = h.broker.update_metadata()[um_counts[b] :]
            assert isinstance(sent[-1], UpdateMetadataRequest)
            (state,) = sent[-1].partition_states
            assert (state.leader, state.leader_epoch, state.isr, state.zk_version) == (
                0,
                0,
                ids(0, 2),
                after.zk_version,
            )
        (event,) = cluster.sink.of("event", "isr_altered")
        assert (event.fields["from_isr"], event.fields["to_isr"]) == ([0, 1, 2], [0, 2])

    run_cluster(body)


def test_a_request_from_an_unregistered_or_stale_broker_epoch_changes_nothing() -> None:
    """A broker epoch other than the registered one, or a broker that is not registered, is
    answered STALE_BROKER_EPOCH as a whole and nothing is written."""

    async def body(cluster: ControllerCluster) -> None:
        active = await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        before = await znode(cluster, "t")
        epoch = cluster.brokers[0].broker.broker_epoch
        stale = await alter_isr(cluster, active, 0, proposal("t", (0,)), broker_epoch=epoch - 1)
        assert stale == AlterIsrResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        current = await alter_isr(cluster, active, 0, proposal("t", (0,)), broker_epoch=epoch)
        assert current.error_code is ErrorCode.NONE  # the same request is fine from 0 ...
        client = await cluster.client()
        reply = await client.ask(
            active.controller.ref,
            AlterIsrRequest(
                broker_id=BrokerId(9),
                broker_epoch=BrokerEpoch(epoch),
                partitions=(proposal("t", (0, 1), version=before.zk_version + 1),),
            ),
            timeout=5.0,
        )
        # ... but not from a broker that is not registered.
        assert reply == AlterIsrResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        after = await znode(cluster, "t")
        assert (after.state.isr, after.zk_version) == (ids(0), before.zk_version + 1)

    run_cluster(body)


def test_a_broker_that_is_not_the_controller_answers_not_controller() -> None:
    """AlterIsr sent to an inactive controller is answered NOT_CONTROLLER, nothing written."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        inactive = cluster.brokers[1]
        assert not inactive.controller.is_active
        reply = await alter_isr(cluster, inactive, 0, proposal("t", (0,)))
        assert reply == AlterIsrResponse(error_code=ErrorCode.NOT_CONTROLLER)
        assert (await state_of(cluster, "t"))[2] == ids(0, 1, 2)

    run_cluster(body)


def test_partition_errors_are_answered_per_partition_beside_a_write() -> None:
    """In one request: an unknown partition is UNKNOWN_TOPIC_OR_PARTITION, an older leader
    epoch FENCED_LEADER_EPOCH, a stale zkVersion INVALID_UPDATE_VERSION, the current state
    is answered as it is without a write, and the valid change is written."""

    async def body(cluster: ControllerCluster) -> None:
        active = await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2], 1: [0, 1, 2], 2: [0, 1, 2], 3: [0, 2, 1]})
        await cluster.settle()
        # Partition 1 gets leader epoch 1 (a new election), so epoch 0 is fenced there.
        await cluster.stop_broker(1)
        await cluster.settle()
        await cluster.start_broker(1)
        await cluster.settle()
        s0, s1, s2, s3 = [await znode(cluster, "t", p) for p in range(4)]
        assert s1.state.leader_epoch >= 1

        altered_before = len(cluster.sink.of("event", "isr_altered"))
        reply = await alter_isr(
            cluster,
            active,
            0,
            proposal("t", (0, 1), epoch=s0.state.leader_epoch, version=s0.zk_version),
            proposal("gone", (0,)),
            proposal(
                "t", (0,), epoch=s1.state.leader_epoch - 1, version=s1.zk_version, partition=1
            ),
            proposal(
                "t", (0,), epoch=s2.state.leader_epoch, version=s2.zk_version - 1, partition=2
            ),
            proposal(
                "t",
                s3.state.isr,
                epoch=s3.state.leader_epoch,
                version=s3.zk_version + 5,
                partition=3,
            ),
        )

        assert reply.error_code is ErrorCode.NONE
        assert [r.error_code for r in reply.partitions] == [
            ErrorCode.NONE,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.INVALID_UPDATE_VERSION,
            ErrorCode.NONE,
        ]
        written, unknown, _, _, unchanged = reply.partitions
        assert (written.isr, written.current_isr_version) == (ids(0, 1), s0.zk_version + 1)
        assert (unknown.topic, unknown.leader, unknown.isr) == ("gone", -1, ())
        assert (unchanged.isr, unchanged.current_isr_version) == (s3.state.isr, s3.zk_version)
        expected = {0: s0.zk_version + 1, 1: s1.zk_version, 2: s2.zk_version, 3: s3.zk_version}
        for p, version in expected.items():
            assert (await znode(cluster, "t", p)).zk_version == version
        assert len(cluster.sink.of("event", "isr_altered")) == altered_before + 1

    run_cluster(body)
