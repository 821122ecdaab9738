"""The broker's AlterIsrManager against real controllers (fake brokers, virtual clock,
embedded store): batching, the answer handed back, and re-sending after a top-level error."""

from __future__ import annotations

import anyio

from actors.broker.alter_isr_manager import AlterIsrManager
from actors.runtime.actor import Actor, Context
from protocol.base import Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.control import AlterIsrPartition
from protocol.controller import AlterIsrAnswered, ClearAlterIsr, SubmitAlterIsr
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, LeaderEpoch, TopicName
from tests.support.controller_cluster import ids, run_cluster, start, state_of, tp
from tests.support.fake_brokers import ControllerCluster


class Owner(Actor):
    """Stands for the broker actor: says which controller and epoch to use, keeps answers."""

    def __init__(self, broker_id: int, controller_id: int, broker_epoch: int) -> None:
        super().__init__("owner")
        self.broker_id = BrokerId(broker_id)
        self.controller_id = BrokerId(controller_id)
        self.broker_epoch = broker_epoch
        self.answers: list[AlterIsrAnswered] = []
        self.changed = anyio.Event()

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case BrokerStatusRequest():
                return BrokerStatus(
                    broker_id=self.broker_id,
                    registered=True,
                    broker_epoch=self.broker_epoch,
                    session_id=0,
                    cluster_id="c",
                    controller_id=self.controller_id,
                    live_brokers=(),
                    topics=(),
                )
            case AlterIsrAnswered():
                self.answers.append(msg)
                self.changed.set()
                self.changed = anyio.Event()
        return None


def change(topic: str, partition: int, isr: tuple[int, ...], version: int) -> AlterIsrPartition:
    return AlterIsrPartition(
        topic=TopicName(topic),
        partition=partition,
        leader_epoch=LeaderEpoch(0),
        new_isr=ids(*isr),
        current_isr_version=version,
    )


async def manager_on(cluster: ControllerCluster, broker: int, controller: int) -> Owner:
    handle = cluster.brokers[broker]
    owner = Owner(broker, controller, handle.broker.broker_epoch)
    await handle.node.spawn(owner)
    await handle.node.spawn(AlterIsrManager(BrokerId(broker), owner=owner.ref))
    return owner


async def answered(owner: Owner, count: int) -> None:
    with anyio.fail_after(30):
        while len(owner.answers) < count:
            await owner.changed.wait()


async def version(cluster: ControllerCluster, partition: int) -> int:
    state = await cluster.partition_state("t", partition)
    assert state is not None
    return state.zk_version


def test_changes_submitted_together_go_in_one_request_and_come_back_answered() -> None:
    """Two partitions' changes submitted within one send interval reach the controller as
    one AlterIsr; the per-partition answers come back to the broker and the znodes hold
    the new ISRs."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2], 1: [0, 2, 1]})
        await cluster.settle()
        v0, v1 = await version(cluster, 0), await version(cluster, 1)
        owner = await manager_on(cluster, 0, controller=0)
        manager = cluster.brokers[0].node.actor("alter_isr_manager")
        manager.tell(manager.ref, SubmitAlterIsr(items=(change("t", 0, (0, 1), v0),)))
        manager.tell(manager.ref, SubmitAlterIsr(items=(change("t", 1, (0, 2), v1),)))
        await answered(owner, 1)
        (answer,) = owner.answers
        assert [(r.partition, r.error_code, r.isr) for r in answer.partitions] == [
            (0, ErrorCode.NONE, ids(0, 1)),
            (1, ErrorCode.NONE, ids(0, 2)),
        ]
        assert (await state_of(cluster, "t", 0))[2] == ids(0, 1)
        assert (await state_of(cluster, "t", 1))[2] == ids(0, 2)
        assert len(cluster.sink.of("event", "alter_isr_retry")) == 0

    run_cluster(body)


def test_a_top_level_error_is_retried_until_the_active_controller_answers() -> None:
    """Sent to a broker that is not the controller (NOT_CONTROLLER), the change waits and
    is sent again at the next tick; once the broker knows the active controller it lands.
    A change cleared before it was sent is never sent."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2], 1: [0, 1, 2]})
        await cluster.settle()
        v0 = await version(cluster, 0)
        owner = await manager_on(cluster, 0, controller=1)
        manager = cluster.brokers[0].node.actor("alter_isr_manager")
        manager.tell(manager.ref, SubmitAlterIsr(items=(change("t", 0, (0, 2), v0),)))
        manager.tell(manager.ref, SubmitAlterIsr(items=(change("t", 1, (0,), 0),)))
        manager.tell(manager.ref, ClearAlterIsr(partitions=(tp("t", 1),)))
        retry = await cluster.wait_for(lambda e: e.type == "alter_isr_retry")
        assert retry.fields == {"error": "NOT_CONTROLLER", "partitions": 1}
        assert (await state_of(cluster, "t", 0))[2] == ids(0, 1, 2)
        owner.controller_id = BrokerId(0)
        await answered(owner, 1)
        (result,) = owner.answers[0].partitions
        assert (result.partition, result.error_code, result.isr) == (0, ErrorCode.NONE, ids(0, 2))
        assert (await state_of(cluster, "t", 0))[2] == ids(0, 2)
        assert (await state_of(cluster, "t", 1))[2] == ids(0, 1, 2)

    run_cluster(body)
