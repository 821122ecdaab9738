"""A rig for the partition and replica state machines: the embedded store on the virtual
clock with a controller's epoch written, a ``ControllerContext`` with live brokers, both state
machines sending into a ``RecordingSender``, and every traced state change kept.

``@rig_test()`` turns ``async def test_x(rig)`` into a plain test run by ``run_virtual``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from actors.controller.context import Broker, ControllerContext
from actors.controller.model import LeaderAndIsr, Leadership
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.state_change_log import StateChangeLogger
from actors.controller.states import PartitionState, ReplicaState
from actors.runtime.clock import VirtualClock, run_virtual
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.ids import BrokerId, LeaderEpoch, TopicName
from tests.support.controller_cluster import ids
from tests.support.fake_brokers import RecordingSender, registration

P = PartitionState
R = ReplicaState
T0 = TopicPartition(TopicName("t"), 0)


@dataclass
class Rig:
    store: EmbeddedStore
    session: StoreSession
    ctx: ControllerContext
    sender: RecordingSender
    psm: PartitionStateMachine
    rsm: ReplicaStateMachine
    traced: list[tuple[str, str, dict[str, Any]]]

    def errors(self, type_: str) -> list[dict[str, Any]]:
        return [f for k, t, f in self.traced if k == "error" and t == type_]

    def transitions(self) -> list[tuple[str, str, str]]:
        return [(t, f["from_state"], f["to_state"]) for k, t, f in self.traced if k == "transition"]

    def requests(self, kind: type) -> list[tuple[int, Any]]:
        return [(b, r) for b, r, _ in self.sender.sent if isinstance(r, kind)]

    async def create_topic(
        self, replicas: tuple[int, ...], partitions: int = 1, config: dict[str, str] | None = None
    ) -> None:
        await kafka_zk.write_topic(
            self.session,
            TopicName("t"),
            {p: list(replicas) for p in range(partitions)},
            config or {},
        )
        for p in range(partitions):
            self.ctx.update_partition_full_replica_assignment(
                TopicPartition(TopicName("t"), p), zkdata.ReplicaAssignment(replicas=ids(*replicas))
            )

    async def seed_leadership(
        self, tp: TopicPartition, leader: int, isr: tuple[int, ...], epoch: int = 0
    ) -> None:
        """Write a state znode (as a previous controller would) and cache it."""
        leadership = Leadership(
            leader_and_isr=LeaderAndIsr(
                leader=BrokerId(leader), leader_epoch=LeaderEpoch(epoch), isr=ids(*isr)
            ),
            controller_epoch=self.ctx.epoch,
        )
        await kafka_zk.create_partition_paths(self.session, self.ctx.epoch_zk_version, [tp])
        await kafka_zk.create_partition_state(
            self.session, self.ctx.epoch_zk_version, tp, leadership.to_znode()
        )
        self.ctx.put_leadership(tp, leadership)

    async def zk_state(self, tp: TopicPartition = T0) -> kafka_zk.PartitionState | None:
        return await kafka_zk.get_partition_state(self.session, tp)


def rig_test(
    live: tuple[int, ...] = (0, 1, 2), unclean: bool = False
) -> Callable[[Callable[[Rig], Awaitable[None]]], Callable[[], None]]:
    """Run a test body with a fresh rig on the virtual clock."""

    def wrap(fn: Callable[[Rig], Awaitable[None]]) -> Callable[[], None]:
        def test() -> None:
            async def body() -> None:
                store = EmbeddedStore(clock=VirtualClock())
                session = await store.open_session(name="controller")
                await kafka_zk.create_top_level_paths(session)
                epoch, zk_version = await kafka_zk.try_become_controller(session, BrokerId(0), 0)
                ctx = ControllerContext()
                ctx.epoch, ctx.epoch_zk_version = epoch, zk_version
                ctx.set_live_brokers(
                    {BrokerId(b): (Broker(BrokerId(b), registration(b, 0)), 10 + b) for b in live}
                )
                sender = RecordingSender()
                traced: list[tuple[str, str, dict[str, Any]]] = []

                def trace(kind: str, type_: str, **fields: Any) -> None:
                    traced.append((kind, type_, fields))

                log = StateChangeLogger(0, trace)
                psm = PartitionStateMachine(
                    BrokerId(0),
                    ctx,
                    lambda: session,
                    ControllerBrokerRequestBatch(BrokerId(0), ctx, sender),
                    log,
                    unclean_leader_election_enable=unclean,
                )
                rsm = ReplicaStateMachine(
                    BrokerId(0),
                    ctx,
                    lambda: session,
                    ControllerBrokerRequestBatch(BrokerId(0), ctx, sender),
                    log,
                )
                try:
                    await fn(Rig(store, session, ctx, sender, psm, rsm, traced))
                finally:
                    await store.aclose()

            run_virtual(body)

        test.__doc__ = fn.__doc__
        test.__name__ = fn.__name__
        return test

    return wrap
