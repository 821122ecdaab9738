"""A leader's ISR changes end to end on the controller side: ``actors.broker.replication``
(the ISR-expiration timer, expansion on a follower's fetch, the AlterIsrManager) against
real controllers and the embedded store, on the virtual clock. The leader's partition
state is ``LeaderIsr`` as the broker keeps it; follower fetches are fed to it as the
broker's fetch path does."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from actors.broker.isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS, IsrUpdate, LeaderIsr
from actors.broker.replication import Replication
from actors.runtime.actor import Actor, Context
from protocol.base import ActorRef, Message
from protocol.broker import BrokerStatus, BrokerStatusRequest
from protocol.control import TopicPartition
from protocol.ids import BrokerId, LeaderEpoch
from tests.support.controller_cluster import ids, run_cluster, start, state_of, tp
from tests.support.fake_brokers import ControllerCluster

LAG_S = DEFAULT_REPLICA_LAG_TIME_MAX_MS / 1000


@dataclass
class LedPartition:
    """The part of the broker's ``Partition`` that replication reads."""

    tp: TopicPartition
    leader: BrokerId
    leader_epoch: int
    high_watermark: int
    log_end_offset: int
    isr_state: LeaderIsr | None


class Leader(Actor):
    """Stands for broker 0's broker actor: its led partitions, its replication component,
    its answers about the controller and its epoch."""

    def __init__(self, broker_epoch: int) -> None:
        super().__init__("leader")
        self.broker_epoch = broker_epoch
        self.partitions: dict[TopicPartition, LedPartition] = {}
        self.replication = Replication(
            self, BrokerId(0), log_manager=ActorRef("broker-0", "log_manager")
        )
        self.changed = anyio.Event()
        self.isr_updates: list[IsrUpdate] = []

    async def on_start(self) -> None:
        await self.replication.start(self)

    def now_ms(self) -> int:
        """The broker's one time source for fetch stamps and the expiration timer."""
        return int(self.clock.now() * 1000)

    def apply_isr_state(self, tp: TopicPartition, state: LeaderIsr) -> None:
        self.partitions[tp].isr_state = state
        self.changed.set()
        self.changed = anyio.Event()

    def mark_isr_update(self, outcome: IsrUpdate) -> None:
        self.isr_updates.append(outcome)

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        if self.replication.handle(msg):
            return None
        if isinstance(msg, BrokerStatusRequest):
            return BrokerStatus(
                broker_id=BrokerId(0),
                registered=True,
                broker_epoch=self.broker_epoch,
                session_id=0,
                cluster_id="c",
                controller_id=BrokerId(0),
                live_brokers=(),
                topics=(),
            )
        return None

    def fetch(self, follower: int, offset: int) -> None:
        """A follower's fetch at ``offset`` as the broker's fetch path records it."""
        p = self.partitions[tp("t")]
        assert p.isr_state is not None
        p.isr_state = p.isr_state.on_follower_fetch(
            BrokerId(follower),
            fetch_offset=offset,
            follower_log_start_offset=0,
            fetch_time_ms=self.now_ms(),
            leader_log_end_offset=p.log_end_offset,
        )
        self.replication.follower_fetched(p, BrokerId(follower))

    async def until_isr(self, isr: tuple[BrokerId, ...], timeout: float) -> None:
        with anyio.fail_after(timeout):
            while True:
                state = self.partitions[tp("t")].isr_state
                if state is not None and state.isr == isr and state.pending_isr is None:
                    return
                await self.changed.wait()


def test_a_silent_follower_leaves_the_isr_after_the_lag_and_rejoins_once_caught_up() -> None:
    """The follower that stops fetching is proposed out of the ISR by the expiration timer
    after replica.lag.time.max.ms (and before 1.5 times it), the controller writes it, the
    leader commits; when it fetches up to the log end again it is proposed back in and
    the state znode holds the full ISR, all at the leader epoch the partition had. Each
    committed change is metered as Kafka's ReplicaManager meters it (IsrShrinksPerSec, then
    IsrExpandsPerSec), once."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        state = await cluster.partition_state("t", 0)
        assert state is not None
        node = cluster.brokers[0].node
        leader = Leader(cluster.brokers[0].broker.broker_epoch)
        await node.spawn(leader)
        now_ms = leader.now_ms()
        leader.partitions[tp("t")] = LedPartition(
            tp=tp("t"),
            leader=BrokerId(0),
            leader_epoch=state.state.leader_epoch,
            high_watermark=10,
            log_end_offset=10,
            isr_state=LeaderIsr.become_leader(
                tp("t"),
                leader=BrokerId(0),
                leader_epoch=LeaderEpoch(state.state.leader_epoch),
                replicas=ids(0, 1, 2),
                isr=state.state.isr,
                zk_version=state.zk_version,
                log_end_offset=10,
                now_ms=now_ms,
            ),
        )
        started = cluster.clock.now()
        leader.fetch(1, 10)
        leader.fetch(2, 10)
        partition = leader.partitions[tp("t")]
        partition.log_end_offset = 12  # an append only follower 1 fetches from now on

        async def follower_1() -> None:
            while True:
                await cluster.clock.sleep(1)
                leader.fetch(1, partition.log_end_offset)

        async with anyio.create_task_group() as fetching:
            fetching.start_soon(follower_1)
            await leader.until_isr(ids(0, 1), timeout=3 * LAG_S)
            assert leader.isr_updates == [IsrUpdate.SHRINK]
            left_after = cluster.clock.now() - started
            assert LAG_S < left_after <= 1.5 * LAG_S + 1
            assert (await state_of(cluster, "t"))[:3] == (0, state.state.leader_epoch, ids(0, 1))
            partition.high_watermark = 12
            leader.fetch(2, 12)
            await leader.until_isr(ids(0, 1, 2), timeout=10)
            fetching.cancel_scope.cancel()
        assert (await state_of(cluster, "t"))[:3] == (0, state.state.leader_epoch, ids(0, 1, 2))
        assert leader.isr_updates == [IsrUpdate.SHRINK, IsrUpdate.EXPAND]
        proposals = cluster.sink.of("event", "isr_change_proposed")
        assert [e.fields["isr"] for e in proposals] == [[0, 1], [0, 1, 2]]
        altered = cluster.sink.of("event", "isr_altered")
        assert [e.fields["to_isr"] for e in altered] == [[0, 1], [0, 1, 2]]

    run_cluster(body)
