"""Fakes for the controller tests: brokers that answer control requests, and a cluster of
them, each with a real controller, on the virtual clock with the embedded store.

A ``FakeBroker`` is the actor ``broker`` of node ``broker-<id>``: it answers LeaderAndIsr,
UpdateMetadata and StopReplica as a Kafka broker would at the protocol level (rejecting a
stale controller epoch or a stale broker epoch), records every request and keeps the
leadership and metadata it was told, so tests can assert what each broker believes.

Replication is modelled at the level the controller sees it: a follower that accepted a
LeaderAndIsr is caught up at once and says so to its leader (``FakeCaughtUp``, standing
for its fetches), unless its broker is shutting down (Kafka's ``makeFollowers`` adds no
fetcher then) or ``replicating`` is off; the leader then asks the active controller to add
it to the ISR with a real AlterIsr (``Partition.maybeExpandIsr``), one change per
partition at a time, again after a refused or unanswered one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import msgspec
from anyio.abc import TaskGroup

from actors.broker.controlled_shutdown import ControlledShutdownActor
from actors.controller import ControllerConfig, KafkaController
from actors.controller.request_batch import ControlRequest, ResponseToEvent
from actors.invariants.leadership import (
    controller_election_violations,
    leader_epoch_regressions,
    leadership_violations,
)
from actors.runtime.actor import Actor, Context, DeferredReply, Node
from actors.runtime.clock import VirtualClock
from actors.runtime.tracer import MemorySink, Tracer
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from actors.zk.watch import ZkConnection
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.base import ActorRef, Message
from protocol.control import (
    LEADER_DURING_DELETE,
    AlterIsrPartition,
    AlterIsrRequest,
    AlterIsrResponse,
    Endpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    SecurityProtocol,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.controller import ControllerStatus, ControllerStatusRequest
from protocol.errors import ErrorCode, KemuError
from protocol.ids import BrokerEpoch, BrokerId, TopicName
from protocol.trace import TraceEvent


class FakeCaughtUp(Message, frozen=True, kw_only=True):
    """Fake follower → its leader: ``replica`` has fetched up to the leader's log end in
    ``leader_epoch`` (what the leader learns from a follower's Fetch)."""

    topic: TopicName
    partition: int
    replica: BrokerId
    leader_epoch: int


class FakeAlterIsrDone(Message, frozen=True, kw_only=True):
    """A fake leader's AlterIsr came back (None: no answer, or no controller known)."""

    topic: TopicName
    partition: int
    response: AlterIsrResponse | None


class FakeBroker(Actor):
    """Answers control requests; ``broker_epoch`` is its registration's czxid."""

    def __init__(self, broker_id: BrokerId, broker_epoch: int) -> None:
        super().__init__("broker")
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.controller_epoch = -1
        self.requests: list[Message] = []
        self.partitions: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
        self.metadata: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        self.live_brokers: tuple[BrokerId, ...] = ()
        self.stopped: list[tuple[TopicPartition, bool]] = []
        self.fail_storage: set[TopicPartition] = set()
        self.fail_delete: set[TopicPartition] = set()
        self.hold_delete = False
        """Never answer a StopReplica with a delete=true partition (the broker hangs)."""
        self.held: list[DeferredReply] = []
        self.controller_id: BrokerId | None = None
        self.replicating = True
        """Followers report themselves caught up (off: a follower that never fetches)."""
        self.shutting_down = False
        self.joining: dict[TopicPartition, set[tuple[BrokerId, int]]] = {}
        """Caught-up followers a leader has yet to add to the ISR, with the leader epoch
        they follow (a report may come before the leader's own LeaderAndIsr)."""
        self.altering: dict[TopicPartition, tuple[int, int]] = {}
        """Partitions with an AlterIsr in flight: the leader epoch and zkVersion it used."""

    def of_type(self, kind: type[Message]) -> list[Message]:
        return [r for r in self.requests if isinstance(r, kind)]

    def leader_and_isr(self) -> list[LeaderAndIsrRequest]:
        return [r for r in self.requests if isinstance(r, LeaderAndIsrRequest)]

    def update_metadata(self) -> list[UpdateMetadataRequest]:
        return [r for r in self.requests if isinstance(r, UpdateMetadataRequest)]

    def _stale(self, controller_epoch: int, broker_epoch: int) -> ErrorCode | None:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        return None

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        self.requests.append(msg)
        self.trace("event", "fake_broker_request", request=type(msg).__name__)
        match msg:
            case LeaderAndIsrRequest():
                stale = self._stale(msg.controller_epoch, msg.broker_epoch)
                if stale is not None:
                    return LeaderAndIsrResponse(error_code=stale)
                self.controller_epoch = msg.controller_epoch
                self.controller_id = msg.controller_id
                errors = []
                for ps in msg.partition_states:
                    tp = ps.topic_partition
                    current = self.partitions.get(tp)
                    if tp in self.fail_storage:
                        code = ErrorCode.KAFKA_STORAGE_ERROR
                    elif current is not None and ps.leader_epoch <= current.leader_epoch:
                        code = ErrorCode.STALE_CONTROLLER_EPOCH
                    elif self.broker_id not in ps.replicas:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    else:
                        self.partitions[tp] = ps
                        code = ErrorCode.NONE
                        self._follow(ps)
                        self._maybe_expand(tp)
                    errors.append(
                        PartitionError(topic=ps.topic, partition=ps.partition, error_code=code)
                    )
                return LeaderAndIsrResponse(
                    error_code=ErrorCode.NONE, partition_errors=tuple(errors)
                )
            case UpdateMetadataRequest():
                stale = self._stale(msg.controller_epoch, msg.broker_epoch)
                if stale is not None:
                    return UpdateMetadataResponse(error_code=stale)
                self.controller_epoch = msg.controller_epoch
                self.controller_id = msg.controller_id
                self.live_brokers = tuple(b.id for b in msg.live_brokers)
                for um in msg.partition_states:
                    if um.leader == LEADER_DURING_DELETE:
                        self.metadata.pop(um.topic_partition, None)
                    else:
                        self.metadata[um.topic_partition] = um
                return UpdateMetadataResponse(error_code=ErrorCode.NONE)
            case StopReplicaRequest():
                stale = self._stale(msg.controller_epoch, msg.broker_epoch)
                if stale is not None:
                    return StopReplicaResponse(error_code=stale)
                self.controller_epoch = msg.controller_epoch
                if self.hold_delete and any(sp.delete_partition for sp in msg.partitions):
                    self.stopped.extend((sp.topic_partition, True) for sp in msg.partitions)
                    self.trace("event", "fake_broker_holds_stop_replica")
                    self.held.append(ctx.defer())
                    return None
                stop_errors = []
                for sp in msg.partitions:
                    self.stopped.append((sp.topic_partition, sp.delete_partition))
                    code = ErrorCode.NONE
                    if sp.delete_partition:
                        if sp.topic_partition in self.fail_delete:
                            code = ErrorCode.KAFKA_STORAGE_ERROR
                        else:
                            self.partitions.pop(sp.topic_partition, None)
                    stop_errors.append(
                        PartitionError(topic=sp.topic, partition=sp.partition, error_code=code)
                    )
                return StopReplicaResponse(
                    error_code=ErrorCode.NONE, partition_errors=tuple(stop_errors)
                )
            case FakeCaughtUp():
                tp = TopicPartition(msg.topic, msg.partition)
                self.joining.setdefault(tp, set()).add((msg.replica, msg.leader_epoch))
                self._maybe_expand(tp)
                return None
            case FakeAlterIsrDone(response=response):
                self._on_alter_isr_done(TopicPartition(msg.topic, msg.partition), response)
                return None
            case _:
                return None

    # -- replication as the controller sees it

    def _follow(self, ps: LeaderAndIsrPartitionState) -> None:
        """A follower that took a LeaderAndIsr tells its leader it caught up."""
        if ps.leader in (self.broker_id, -1) or self.shutting_down or not self.replicating:
            return
        self.tell(
            ActorRef(f"broker-{ps.leader}", "broker"),
            FakeCaughtUp(
                topic=ps.topic,
                partition=ps.partition,
                replica=self.broker_id,
                leader_epoch=ps.leader_epoch,
            ),
        )

    def _maybe_expand(self, tp: TopicPartition) -> None:
        ps = self.partitions.get(tp)
        if ps is None or ps.leader != self.broker_id or tp in self.altering:
            return
        joining = self.joining.get(tp, set())
        joining -= {(r, e) for r, e in joining if e < ps.leader_epoch}
        wanted = sorted(
            r for r, e in joining if e == ps.leader_epoch and r in ps.replicas and r not in ps.isr
        )
        if not wanted or self.controller_id is None:
            return
        self.altering[tp] = (ps.leader_epoch, ps.zk_version)
        item = AlterIsrPartition(
            topic=ps.topic,
            partition=ps.partition,
            leader_epoch=ps.leader_epoch,
            new_isr=(*ps.isr, wanted[0]),
            current_isr_version=ps.zk_version,
        )
        request = AlterIsrRequest(
            broker_id=self.broker_id,
            broker_epoch=BrokerEpoch(self.broker_epoch),
            partitions=(item,),
        )
        self.start_soon(
            self._send_alter_isr,
            tp,
            ActorRef(f"broker-{self.controller_id}", "controller"),
            request,
        )

    async def _send_alter_isr(
        self, tp: TopicPartition, controller: ActorRef, request: AlterIsrRequest
    ) -> None:
        response: AlterIsrResponse | None = None
        try:
            reply = await self.ask(controller, request, timeout=5.0)
            if isinstance(reply, AlterIsrResponse):
                response = reply
        except KemuError:
            pass
        if response is None or response.error_code is not ErrorCode.NONE:
            await self.clock.sleep(0.05)  # AlterIsrManager's send period before a retry
        self.send_self(FakeAlterIsrDone(topic=tp.topic, partition=tp.partition, response=response))

    def _on_alter_isr_done(self, tp: TopicPartition, response: AlterIsrResponse | None) -> None:
        sent = self.altering.pop(tp, None)
        ps = self.partitions.get(tp)
        if ps is None or ps.leader != self.broker_id:
            return
        if response is not None and response.error_code is ErrorCode.NONE:
            for result in response.partitions:
                refused = result.error_code is not ErrorCode.NONE
                if refused and sent == (ps.leader_epoch, ps.zk_version):
                    return  # fatal for this change: wait for the next LeaderAndIsr
                if result.leader_epoch == ps.leader_epoch and result.current_isr_version >= (
                    ps.zk_version
                ):
                    self.partitions[tp] = msgspec.structs.replace(
                        ps, isr=result.isr, zk_version=result.current_isr_version
                    )
        self._maybe_expand(tp)


class RecordingSender:
    def __init__(self) -> None:
        self.sent: list[tuple[BrokerId, ControlRequest, ResponseToEvent | None]] = []

    def send_request(
        self, broker_id: BrokerId, request: ControlRequest, on_response: ResponseToEvent | None
    ) -> None:
        self.sent.append((broker_id, request, on_response))

    def kinds(self) -> list[tuple[int, str]]:
        return [(b, type(r).__name__) for b, r, _ in self.sent]


def registration(broker_id: int, timestamp: int) -> zkdata.BrokerRegistration:
    return zkdata.BrokerRegistration(
        endpoints=(
            Endpoint(
                host="127.0.0.1",
                port=9092 + broker_id,
                listener="PLAINTEXT",
                security_protocol=SecurityProtocol.PLAINTEXT,
            ),
        ),
        timestamp=timestamp,
    )


@dataclass
class BrokerHandle:
    broker_id: BrokerId
    node: Node
    zk: ZkConnection
    broker: FakeBroker
    controller: KafkaController
    epochs: list[BrokerEpoch] = field(default_factory=list)

    @property
    def session_id(self) -> int:
        return self.zk.session.session_id


class ControllerCluster:
    """N brokers (fake broker + real controller each) sharing one embedded store."""

    def __init__(
        self,
        tg: TaskGroup,
        *,
        unclean_leader_election_enable: bool = False,
        delete_topic_enable: bool = True,
        auto_leader_rebalance_enable: bool = False,
        leader_imbalance_check_interval_seconds: int = 1,
        controlled_shutdown: bool = False,
    ) -> None:
        """As Kafka's ControllerIntegrationTest harness: auto leader rebalance off unless
        asked for, checked every second when on. With ``controlled_shutdown`` each broker
        runs the real broker-side controlled shutdown when stopped (``stop_broker``)."""
        from tests.support.wire import DirectWire

        self.tg = tg
        self.sink = MemorySink()
        self.tracer = Tracer()
        self.tracer.add_sink(self.sink)
        self.clock = VirtualClock()
        self.wire = DirectWire()
        self.store = EmbeddedStore(tracer=self.tracer, clock=self.clock)
        self.unclean = unclean_leader_election_enable
        self.delete_topic_enable = delete_topic_enable
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_check_interval_seconds = leader_imbalance_check_interval_seconds
        self.controlled_shutdown = controlled_shutdown
        self.fail_storage: dict[int, set[TopicPartition]] = {}
        """Partitions whose StopReplica(delete=true) fails on a broker (a disk fault),
        kept across restarts of that broker."""
        self.brokers: dict[int, BrokerHandle] = {}
        self._admin: StoreSession | None = None
        self._client: Node | None = None

    async def admin(self) -> StoreSession:
        """A session of our own, to write topics as an admin tool would."""
        if self._admin is None:
            self._admin = await self.store.open_session(name="admin")
            await kafka_zk.create_top_level_paths(self._admin)
        return self._admin

    async def client(self) -> Node:
        """A node to ask controllers from."""
        if self._client is None:
            self._client = Node(
                "client", attach=self.wire.attach, clock=self.clock, tracer=self.tracer
            )
            await self.tg.start(self._client.run)
        return self._client

    async def start_broker(self, broker_id: int, *, raw_session: bool = False) -> BrokerHandle:
        """KafkaServer.startup's relevant order: store session, top-level paths, register
        ``/brokers/ids/<id>``, then the broker's request handler and the controller. With
        ``raw_session`` the broker opens a plain session and the controller starts the
        watch dispatcher itself."""
        bid = BrokerId(broker_id)
        node = Node(
            f"broker-{broker_id}", attach=self.wire.attach, clock=self.clock, tracer=self.tracer
        )
        await self.tg.start(node.run)
        if raw_session:
            session = await self.store.open_session(name=f"broker-{broker_id}")
            zk = ZkConnection(self.store, name=f"broker-{broker_id}", session=session)
        else:
            zk = ZkConnection(self.store, name=f"broker-{broker_id}", clock=self.clock)
            await node.task_group.start(zk.run)
        await kafka_zk.create_top_level_paths(zk.session)
        reg = registration(broker_id, self.clock.wall_ms())
        epoch = await kafka_zk.register_broker(zk.session, bid, reg)
        broker = FakeBroker(bid, epoch)
        broker.fail_delete = self.fail_storage.setdefault(broker_id, set())
        await node.spawn(broker)
        handle = BrokerHandle(bid, node, zk, broker, None)  # type: ignore[arg-type]

        def on_epoch(new_epoch: BrokerEpoch) -> None:
            handle.epochs.append(new_epoch)
            broker.broker_epoch = new_epoch

        controller = KafkaController(
            ControllerConfig(
                broker_id=bid,
                unclean_leader_election_enable=self.unclean,
                delete_topic_enable=self.delete_topic_enable,
                auto_leader_rebalance_enable=self.auto_leader_rebalance_enable,
                leader_imbalance_check_interval_seconds=self.leader_imbalance_check_interval_seconds,
            ),
            zk,
            registration=reg,
            broker_epoch=epoch,
            on_broker_epoch=on_epoch,
        )
        handle.controller = controller
        await node.spawn(controller)
        if self.controlled_shutdown:  # last, so that it runs first on a graceful stop
            await node.spawn(
                ControlledShutdownActor(
                    bid,
                    session=lambda: zk.session,
                    broker_epoch=lambda: broker.broker_epoch,
                    controller_ref=lambda c: ActorRef(f"broker-{c}", "controller"),
                )
            )
        self.brokers[broker_id] = handle
        return handle

    async def crash_broker(self, broker_id: int) -> None:
        """Kill the node and let its session time out (its ephemerals vanish)."""
        handle = self.brokers.pop(broker_id)
        session_id = handle.session_id
        handle.node.crash()
        await self.store.expire_session(session_id)

    async def stop_broker(self, broker_id: int) -> None:
        """Stop gracefully (controller resigns locally) and close the session."""
        handle = self.brokers.pop(broker_id)
        handle.broker.shutting_down = True
        handle.node.stop()
        with anyio.fail_after(30):
            await handle.node.ended.wait()
        await handle.zk.session.close()

    async def expire_session(self, broker_id: int) -> None:
        await self.store.expire_session(self.brokers[broker_id].session_id)

    async def status(self, broker_id: int) -> ControllerStatus:
        client = await self.client()
        handle = self.brokers[broker_id]
        reply = await client.ask(handle.controller.ref, ControllerStatusRequest(), timeout=5.0)
        assert isinstance(reply, ControllerStatus)
        return reply

    async def active_controller(self, timeout: float = 30.0) -> BrokerHandle:
        """Wait until exactly one live broker's controller is active and ready."""
        with anyio.fail_after(timeout):
            while True:
                active = [h for h in self.brokers.values() if h.controller.is_active]
                if len(active) == 1 and await self.idle():
                    return active[0]
                await anyio.sleep(0.01)

    async def idle(self) -> bool:
        """No controller event queued or running, no control request in flight, and no
        fake broker with a message waiting or an AlterIsr out."""
        for h in self.brokers.values():
            if h.broker.altering or h.broker.mailbox_depth:
                return False
            c = h.controller
            if c.events.depth or c.events.state != 0:
                return False
            if any(c.channel.queue_depth(b) for b in c.channel.brokers):
                return False
        return True

    async def settle(self, timeout: float = 30.0) -> None:
        """Wait (on virtual time) until every controller is idle twice in a row."""
        with anyio.fail_after(timeout):
            quiet = 0
            while quiet < 2:
                await anyio.sleep(0.01)
                quiet = quiet + 1 if await self.idle() else 0

    async def wait_for(
        self, pred: Callable[[TraceEvent], bool], timeout: float = 30.0
    ) -> TraceEvent:
        return await self.sink.wait_for(pred, timeout)

    async def create_topic(
        self, topic: str, assignment: dict[int, list[int]], config: dict[str, str] | None = None
    ) -> None:
        await kafka_zk.write_topic(await self.admin(), TopicName(topic), assignment, config or {})

    async def partition_state(self, topic: str, partition: int) -> kafka_zk.PartitionState | None:
        return await kafka_zk.get_partition_state(
            await self.admin(), TopicPartition(TopicName(topic), partition)
        )

    async def invariant_violations(self) -> list[str]:
        """The invariants of docs/chaos.md over the store and the trace: every state
        znode's leader is in its non-empty ISR within the replicas; leader epochs never go
        down; one controller per epoch, epochs increasing."""
        admin = await self.admin()
        problems: list[str] = []
        for topic in await kafka_zk.get_all_topics(admin):
            assignment = await kafka_zk.get_topic_assignment(admin, topic) or {}
            for partition, replicas in assignment.items():
                state = await kafka_zk.get_partition_state(admin, TopicPartition(topic, partition))
                if state is not None:
                    problems += leadership_violations(
                        f"{topic}-{partition}",
                        replicas.replicas,
                        state.state.leader,
                        state.state.isr,
                    )
        problems += leader_epoch_regressions(
            e.fields for e in self.sink.of("transition", "partition")
        )
        problems += controller_election_violations(
            (e.node, int(e.fields["epoch"])) for e in self.sink.of("event", "controller_elected")
        )
        return problems

    async def aclose(self) -> None:
        for handle in list(self.brokers.values()):
            handle.node.crash()
        if self._client is not None:
            self._client.crash()
        await self.store.aclose()
