"""``KafkaController``: the controller module of one broker (Kafka's ``KafkaController``:
``process``, ``elect``, ``onControllerFailover``, ``onBrokerStartup``/``onBrokerFailure``,
``processTopicChange``, ``processPartitionModifications``, ``processTopicDeletion``).

Every broker runs one, as the actor ``controller`` on its node; only the one that wins the
``/controller`` election is *active*. All controller state lives in the event task of its
``ControllerEventManager``: store watches, broker responses and session changes only
enqueue events, and ``process`` is the one dispatch over the closed event union. The
actor's own mailbox only answers ``ControllerStatusRequest`` from a status snapshot that
the event task publishes, and ``ControllerQueueRequest`` from the queue's depth and the
state of the event being processed (both read, never written, outside the event task).

Construction, inside a broker node (after the broker registered itself)::

    zk = ZkConnection(store, name=f"broker-{id}", clock=node.clock)
    await node.task_group.start(zk.run)      # or let the controller start it (below)
    epoch = await kafka_zk.register_broker(zk.session, id, registration)
    controller = KafkaController(ControllerConfig(broker_id=id), zk,
                                 registration=registration, broker_epoch=epoch,
                                 on_broker_epoch=...)
    await node.spawn(controller)       # on_start queues Startup: the election attempt

A broker that already holds a session can wrap it: ``ZkConnection(store, session=s)``;
if that connection is not running yet, the controller's ``on_start`` starts its
dispatcher (the watches of the session must be read by someone). After a session expiry
the connection opens a new session (``zk.session``) and the controller re-registers the
broker on it, reporting the new broker epoch through ``on_broker_epoch`` (called on the
controller's event task: hand it to the broker as a message).

Every write to the store is fenced by the controller epoch's zkVersion; a failed fence
(``ControllerMovedError``) makes the controller re-read ``/controller`` and resign.
"""

from __future__ import annotations

import contextlib
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, assert_never

import structlog

from actors.controller import recording
from actors.controller.alter_isr import AlterIsrHandler
from actors.controller.channel import ControllerChannelManager, broker_actor_ref
from actors.controller.context import Broker, ControllerContext, is_being_reassigned
from actors.controller.controlled_shutdown import ControlledShutdowns
from actors.controller.election import OfflineElection
from actors.controller.errors import IllegalControllerStateError
from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ControllerEventUnion,
    ElectionTrigger,
    Expire,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    TopicUncleanLeaderElectionEnable,
    UncleanLeaderElectionEnable,
    UpdateMetadataResponseReceived,
    ZkPartitionReassignment,
)
from actors.controller.leader_election import AUTO_REBALANCE_FIRST_DELAY, LeaderElections
from actors.controller.model import Leadership, PartitionAndReplica
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.reassignment import PartitionReassignments
from actors.controller.recording import RecordingSession
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.scheduler import ControllerScheduler
from actors.controller.state_change_log import StateChangeLogger
from actors.controller.states import ControllerState, PartitionState, ReplicaState
from actors.controller.topic_deletion import REASON_REASSIGNMENT, TopicDeletionManager
from actors.runtime.actor import Actor, Context
from actors.zk import kafka_zk
from actors.zk.kafka_zk import ControllerMovedError
from actors.zk.store import StoreSession
from actors.zk.watch import ChildWatch, DataWatch, StateCallbacks, ZkConnection
from protocol import zkdata
from protocol.base import ActorRef, Message
from protocol.control import (
    AlterIsrRequest,
    AlterIsrResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataResponse,
)
from protocol.controller import (
    ControllerQueue,
    ControllerQueueRequest,
    ControllerStatus,
    ControllerStatusRequest,
    DefaultUncleanLeaderElection,
    ElectLeadersResults,
    ElectLeadersToController,
    EnableTopicUncleanLeaderElection,
    PartitionElectionResult,
)
from protocol.errors import ErrorCode, NoNodeError, StoreError
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, TopicName
from protocol.kafka_api import (
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
)

log = structlog.get_logger("kemu.controller")

_EVENT_TYPES: tuple[type[ControllerEvent], ...] = typing.get_args(ControllerEventUnion)
_STATE_HANDLER = "controller"
NO_CONTROLLER = BrokerId(-1)
"""``/controller`` names nobody (Kafka's ``activeControllerId = -1``)."""


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    """The broker configuration the controller reads (Kafka 2.7 defaults)."""

    broker_id: BrokerId
    unclean_leader_election_enable: bool = False
    controller_socket_timeout_ms: int = 30_000
    """How long one control request may wait for its answer before it is retried."""
    retry_backoff_ms: int = 100
    inter_broker_listener: str = "PLAINTEXT"
    delete_topic_enable: bool = True
    """Read by topic deletion (``TopicDeletionManager.isDeleteTopicEnabled``)."""
    auto_leader_rebalance_enable: bool = True
    """Read by the auto preferred-leader election (``AutoPreferredReplicaLeaderElection``)."""
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10


CONTROLLER_GAUGES: Final = (
    "ActiveControllerCount",
    "OfflinePartitionsCount",
    "PreferredReplicaImbalanceCount",
    "GlobalTopicCount",
    "GlobalPartitionCount",
    "TopicsToDeleteCount",
    "ReplicasToDeleteCount",
    "TopicsIneligibleToDeleteCount",
    "ReplicasIneligibleToDeleteCount",
    "ControllerState",
    "EventQueueSize",
)
"""The gauges of ``KafkaController.gauges`` (Kafka's names)."""
UNCLEAN_LEADER_ELECTIONS: Final = "UncleanLeaderElectionsPerSec"
"""``ControllerStats``' one meter."""
CONTROLLER_TIMERS: Final = tuple(
    name for state in ControllerState if (name := state.rate_and_time_metric_name) is not None
)
"""``ControllerStats``' timers, one per ``ControllerState`` that has one."""


class KafkaController(Actor):
    """The controller actor of one broker. See the module docstring for how to start it."""

    def __init__(
        self,
        config: ControllerConfig,
        zk: ZkConnection,
        *,
        registration: zkdata.BrokerRegistration,
        broker_epoch: int,
        on_broker_epoch: Callable[[BrokerEpoch], None] | None = None,
        broker_ref: Callable[[BrokerId], ActorRef] = broker_actor_ref,
        name: str = "controller",
    ) -> None:
        super().__init__(name)
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.registration = registration
        self.broker_epoch = BrokerEpoch(broker_epoch)
        self._on_broker_epoch = on_broker_epoch
        self._broker_ref = broker_ref
        self.context = ControllerContext()
        self._active_id: BrokerId = NO_CONTROLLER
        self._status = ControllerStatus(
            broker_id=self.broker_id,
            active=False,
            controller_id=NO_CONTROLLER,
            epoch=ControllerEpoch(0),
        )
        self._broker_modification_watches: set[BrokerId] = set()
        self._partition_modification_watches: set[TopicName] = set()
        self._gauges: dict[str, int] = {}
        self._scans_stale = False
        self._started = False
        self._recording = False
        """Recording inputs and outputs for replay (``actors.controller.recording``)."""
        self._recording_session: RecordingSession | None = None

    # ------------------------------------------------------------------ actor lifecycle

    async def on_start(self) -> None:
        self._build()
        if not self.zk.running:  # nobody dispatches this connection's watches yet: we do
            await self.node.task_group.start(self.zk.run)
        await self.node.task_group.start(self.events.run)
        self._started = True
        self.events.put(Startup())

    def _new_channel(self) -> ControllerChannelManager:
        return ControllerChannelManager(
            self.node,
            source=self.ref,
            emit=self._emit_event,
            request_timeout=self.config.controller_socket_timeout_ms / 1000,
            retry_backoff=self.config.retry_backoff_ms / 1000,
            broker_ref=self._broker_ref,
            trace=self.trace,
            record_requests=self._recording,
        )

    def _build(self) -> None:
        """The controller's parts (a replay builds them without starting the tasks)."""
        trace = self.trace
        self._recording = recording.CONTROLLER_INPUTS in self.tracer.details
        if self._recording:
            self.trace(
                "event",
                recording.INIT,
                config=recording.encode_config(self.config),
                registration=recording.plain(self.registration),
                broker_epoch=self.broker_epoch,
            )
        self.events: ControllerEventManager[ControllerEventUnion] = ControllerEventManager(
            self, clock=self.clock, trace=trace
        )
        self.channel = self._new_channel()

        def new_batch() -> ControllerBrokerRequestBatch:
            return ControllerBrokerRequestBatch(
                self.broker_id,
                self.context,
                self.channel,
                inter_broker_listener=self.config.inter_broker_listener,
                stop_replica_event=self._stop_replica_event,
            )

        # One batch each, as in Kafka: the state machines' batches are flushed by their
        # own state changes, this one by the controller's UpdateMetadata sends.
        self.request_batch = new_batch()
        state_log = StateChangeLogger(self.broker_id, trace, tracer=self.tracer)
        self.partition_state_machine = PartitionStateMachine(
            self.broker_id,
            self.context,
            self._session,
            new_batch(),
            state_log,
            unclean_leader_election_enable=self.config.unclean_leader_election_enable,
        )
        self.replica_state_machine = ReplicaStateMachine(
            self.broker_id, self.context, self._session, new_batch(), state_log
        )
        self.topic_deletion_manager = TopicDeletionManager(
            self.context,
            self.replica_state_machine,
            self.partition_state_machine,
            _ControllerDeletionClient(self),
            delete_topic_enable=self.config.delete_topic_enable,
            trace=trace,
        )
        # Reassignment, leader elections and controlled shutdown: see their modules.
        ops = _ControllerOps(self)
        self.scheduler = ControllerScheduler(self.node, self.clock)
        self.reassignments = PartitionReassignments(
            self.context,
            self.partition_state_machine,
            self.replica_state_machine,
            self.topic_deletion_manager,
            ops,
        )
        self.alter_isr = AlterIsrHandler(self.context, self.reassignments, ops)
        self.leader_elections = LeaderElections(
            self.context,
            self.partition_state_machine,
            self.topic_deletion_manager,
            self.scheduler,
            ops,
            imbalance_check_interval=self.config.leader_imbalance_check_interval_seconds,
            imbalance_percentage=self.config.leader_imbalance_per_broker_percentage,
        )
        self.controlled_shutdowns = ControlledShutdowns(
            self.context,
            self.partition_state_machine,
            self.replica_state_machine,
            self.topic_deletion_manager,
            ops,
        )
        self._admin_watches = {
            zkdata.REASSIGN_PARTITIONS_PATH: DataWatch(
                on_create=self._enqueuer(ZkPartitionReassignment())
            ),
            zkdata.PREFERRED_REPLICA_ELECTION_PATH: DataWatch(
                on_create=self._enqueuer(ReplicaLeaderElection())
            ),
        }
        self._controller_watch = DataWatch(
            on_create=self._enqueuer(ControllerChange()),
            on_change=self._enqueuer(ControllerChange()),
            on_delete=self._enqueuer(Reelect()),
        )
        self._broker_change_watch = ChildWatch(self._enqueuer(BrokerChange()))
        self._topic_change_watch = ChildWatch(self._enqueuer(TopicChange()))
        self._topic_deletion_watch = ChildWatch(self._enqueuer(TopicDeletion()))
        self._log_dir_event_watch = ChildWatch(self._enqueuer(LogDirEventNotification()))
        self.zk.register_state(
            _STATE_HANDLER,
            StateCallbacks(
                before=self._before_initializing_session,
                after=self._enqueuer(RegisterBrokerAndReelect()),
            ),
        )

    async def on_stop(self) -> None:
        """Kafka's ``shutdown``: close the event queue (pending events are preempted), then
        resign locally. ``/controller`` goes with the broker's session."""
        if not self._started:
            return
        self.zk.unregister_state(_STATE_HANDLER)
        await self.events.close()
        self._on_controller_resignation()
        self._set_active(NO_CONTROLLER)

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case ControllerStatusRequest():
                return self._status
            case ControllerQueueRequest():
                active = self.is_active
                return ControllerQueue(
                    broker_id=self.broker_id,
                    active=active,
                    epoch=self.context.epoch if active else ControllerEpoch(0),
                    depth=self.events.depth,
                    state=self.events.state.label,
                    gauges=tuple(self.gauges.items()),
                    timers=self._timers(),
                    meters=((UNCLEAN_LEADER_ELECTIONS, self.context.unclean_leader_elections),),
                )
            case ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch):
                # Answered once the event has run (or been preempted).
                reply = ctx.defer()

                def answer(response: ControlledShutdownResponse) -> None:
                    reply.send(self, response)

                self.events.put(
                    ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch, reply=answer)
                )
                return None
            case AlterIsrRequest(broker_id=broker_id, broker_epoch=broker_epoch):
                alter_reply = ctx.defer()

                def answer_alter_isr(response: AlterIsrResponse) -> None:
                    alter_reply.send(self, response)

                self.events.put(
                    AlterIsrReceived(
                        broker_id=broker_id,
                        broker_epoch=broker_epoch,
                        partitions=msg.partitions,
                        reply=answer_alter_isr,
                    )
                )
                return None
            case DefaultUncleanLeaderElection(enabled=enabled):
                self.events.put(UncleanLeaderElectionEnable(enabled=enabled))
                return None
            case EnableTopicUncleanLeaderElection(topic=topic):
                if self.is_active:  # enableTopicUncleanLeaderElection
                    self.events.put(TopicUncleanLeaderElectionEnable(topic=topic))
                return None
            case ListPartitionReassignmentsRequestData(topics=topics):
                list_reply = ctx.defer()

                def answer_list(response: ListPartitionReassignmentsResponseData) -> None:
                    list_reply.send(self, response)

                self.events.put(
                    ListPartitionReassignments(
                        partitions=None
                        if topics is None
                        else tuple(
                            dict.fromkeys(
                                TopicPartition(t.name, p)
                                for t in topics
                                for p in t.partition_indexes
                            )
                        ),
                        reply=answer_list,
                    )
                )
                return None
            case AlterPartitionReassignmentsRequestData(topics=alter_topics):
                alter_reply = ctx.defer()

                def answer_alter(response: AlterPartitionReassignmentsResponseData) -> None:
                    alter_reply.send(self, response)

                # KafkaApis builds a Map: a partition listed twice keeps its last target.
                targets = {
                    TopicPartition(t.name, p.partition_index): p.replicas
                    for t in alter_topics
                    for p in t.partitions
                }
                self.events.put(
                    ApiPartitionReassignment(
                        reassignments=tuple(targets.items()), reply=answer_alter
                    )
                )
                return None
            case ElectLeadersToController(partitions=partitions, election_type=election_type):
                elect_reply = ctx.defer()

                def answer_election(results: tuple[PartitionElectionResult, ...]) -> None:
                    elect_reply.send(self, ElectLeadersResults(results=results))

                self.events.put(
                    ReplicaLeaderElection(
                        partitions=partitions,
                        election_type=election_type,
                        trigger=ElectionTrigger.ADMIN_CLIENT,
                        on_result=answer_election,
                    )
                )
                return None
            case _:
                return None

    async def _before_initializing_session(self) -> None:
        """Before a new session: queue ``Expire`` ahead of everything (the rest is
        preempted) and wait until it starts, so every earlier event is done first."""
        queued = self.events.clear_and_put(Expire())
        await queued.await_processing()

    # ------------------------------------------------------------------ status

    @property
    def is_active(self) -> bool:
        return self._active_id == self.broker_id

    @property
    def status(self) -> ControllerStatus:
        return self._status

    def _set_active(self, controller_id: BrokerId) -> None:
        self._active_id = controller_id
        self._publish_status()

    def _publish_status(self) -> None:
        status = ControllerStatus(
            broker_id=self.broker_id,
            active=self.is_active,
            controller_id=self._active_id,
            epoch=self.context.epoch,
        )
        self._status = status

    @property
    def gauges(self) -> dict[str, int]:
        """The controller's gauges under Kafka's names (``KafkaController.updateMetrics``,
        and ``ControllerState`` and ``EventQueueSize`` of its event manager) as of its last
        event, all 0 but those two when it is not the active controller. The
        preferred-replica imbalance and the replicas still to delete, scans of every
        partition or of every replica being deleted, are counted when first read rather
        than after every event (a creation or deletion of thousands of partitions runs
        thousands of events)."""
        if self._scans_stale:
            self._scans_stale = False
            ctx = self.context
            self._gauges["PreferredReplicaImbalanceCount"] = ctx.preferred_replica_imbalance_count
            deleting = [r for t in ctx.topics_to_be_deleted for r in ctx.replicas_for_topic(t)]
            states = [ctx.replica_state(r) for r in deleting]
            self._gauges["ReplicasToDeleteCount"] = sum(
                1 for s in states if s is not ReplicaState.DELETION_SUCCESSFUL
            )
            self._gauges["ReplicasIneligibleToDeleteCount"] = sum(
                1 for s in states if s is ReplicaState.DELETION_INELIGIBLE
            )
        return self._gauges

    def _timers(self) -> tuple[tuple[str, int, float], ...]:
        """``ControllerStats.rateAndTimeMetrics``: each state's timer (every one Kafka
        registers, 0 until an event of that state ran), from its event manager's
        histograms of processing times."""
        times = self.events.event_time
        out: list[tuple[str, int, float]] = []
        for state in ControllerState:
            name = state.rate_and_time_metric_name
            if name is None:
                continue
            histogram = times.get(state)
            if histogram is None:
                out.append((name, 0, 0.0))
            else:
                out.append((name, histogram.count, histogram.total * 1000))
        return tuple(out)

    def _update_metrics(self) -> None:
        ctx = self.context
        active = self.is_active
        self._scans_stale = active
        self._gauges = {
            "ActiveControllerCount": 1 if active else 0,
            "OfflinePartitionsCount": ctx.offline_partition_count if active else 0,
            "PreferredReplicaImbalanceCount": 0,  # counted on demand when active
            "GlobalTopicCount": len(ctx.all_topics) if active else 0,
            "GlobalPartitionCount": len(ctx.leaderships) if active else 0,
            "TopicsToDeleteCount": len(ctx.topics_to_be_deleted) if active else 0,
            "ReplicasToDeleteCount": 0,  # counted on demand when active
            "TopicsIneligibleToDeleteCount": (
                len(ctx.topics_ineligible_for_deletion) if active else 0
            ),
            "ReplicasIneligibleToDeleteCount": 0,  # counted on demand when active
            "ControllerState": int(self.events.state),
            "EventQueueSize": self.events.depth,
        }
        self._publish_status()

    # ------------------------------------------------------------------ events

    def _session(self) -> StoreSession:
        """The current store session, wrapped to record every call when recording."""
        session = self.zk.session
        if not self._recording:
            return session
        wrapped = self._recording_session
        if wrapped is None or wrapped.inner is not session:
            wrapped = self._recording_session = RecordingSession(session, self.trace)
        return wrapped

    async def _watch_existence(self, path: str, handler: DataWatch) -> bool:
        """Kafka's ``registerZNodeChangeHandlerAndCheckExistence`` on our session (as
        ``ZkConnection.register_data_and_check_existence``, recorded when recording)."""
        self.zk.register_data(path, handler)
        return await self._session().exists(path) is not None

    def _wall_ms(self) -> int:
        wall = self.clock.wall_ms()
        if self._recording:
            self.trace("event", recording.CLOCK, wall_ms=wall)
        return wall

    def _enqueuer(self, event: ControllerEventUnion) -> Callable[[], None]:
        """A watch callback that only enqueues ``event`` (events are immutable values)."""

        def enqueue() -> None:
            self.events.put(event)

        return enqueue

    def _emit_event(self, event: ControllerEvent) -> None:
        """Put an event made outside the event task (a broker response) on the queue."""
        if not isinstance(event, _EVENT_TYPES):
            raise TypeError(f"not a controller event: {event!r}")
        self.events.put(typing.cast(ControllerEventUnion, event))

    def preempt(self, event: ControllerEventUnion) -> None:
        event.preempt()

    async def process(self, event: ControllerEventUnion) -> None:
        """Kafka's ``KafkaController.process``: one dispatch; a moved controller resigns;
        other errors go to the event manager's error boundary; gauges always updated."""
        if self._recording:
            self.trace("event", recording.INPUT, event=recording.encode_event(event))
        try:
            await self._dispatch(event)
        except ControllerMovedError:
            log.info("controller_moved", controller_event=event.name)
            self.trace("event", "controller_moved", event=event.name)
            await self._maybe_resign()
        finally:
            self._update_metrics()

    async def _dispatch(self, event: ControllerEventUnion) -> None:
        match event:
            case Startup():
                await self._process_startup()
            case ControllerChange():
                await self._maybe_resign()
            case Reelect():
                await self._process_reelect()
            case RegisterBrokerAndReelect():
                await self._process_register_broker_and_reelect()
            case Expire():
                self._process_expire()
            case BrokerChange():
                await self._process_broker_change()
            case BrokerModifications(broker_id=broker_id):
                await self._process_broker_modification(broker_id)
            case TopicChange():
                await self._process_topic_change()
            case PartitionModifications(topic=topic):
                await self._process_partition_modifications(topic)
            case LeaderAndIsrResponseReceived(broker_id=broker_id, response=response):
                await self._process_leader_and_isr_response(broker_id, response)
            case UpdateMetadataResponseReceived(broker_id=broker_id, response=response):
                self._process_update_metadata_response(broker_id, response)
            case TopicDeletion():
                await self._process_topic_deletion()
            case TopicDeletionStopReplicaResponseReceived():
                await self._process_topic_deletion_stop_replica_response(event)
            case LogDirEventNotification():
                await self._process_log_dir_event_notification()
            # Reassignment, leader elections, controlled shutdown.
            case ZkPartitionReassignment():
                if self.is_active:
                    await self.reassignments.process_zk_partition_reassignment()
            case ApiPartitionReassignment():
                event.reply(
                    await self.reassignments.process_api_partition_reassignment(
                        event, active=self.is_active
                    )
                )
            case ListPartitionReassignments():
                event.reply(
                    self.reassignments.list_partition_reassignments(event, active=self.is_active)
                )
            case ReplicaLeaderElection():
                await self.leader_elections.process_replica_leader_election(
                    event, active=self.is_active
                )
            case AutoPreferredReplicaLeaderElection():
                await self.leader_elections.process_auto_preferred_replica_leader_election(
                    active=self.is_active
                )
            case UncleanLeaderElectionEnable(enabled=enabled):
                await self._process_unclean_leader_election_enable(enabled)
            case TopicUncleanLeaderElectionEnable(topic=topic):
                await self._process_topic_unclean_leader_election_enable(topic)
            case ControlledShutdown():
                await self._process_controlled_shutdown(event)
            case AlterIsrReceived():
                await self.alter_isr.process(
                    event.broker_id,
                    event.broker_epoch,
                    event.partitions,
                    event.reply,
                    active=self.is_active,
                )
            case _:
                assert_never(event)

    async def _process_unclean_leader_election_enable(self, enabled: bool) -> None:
        """``processUncleanLeaderElectionEnable``: the default the offline election reads
        (on every controller, active or not, as each reads its broker's config), and, on
        the active controller when it became true, every offline partition online."""
        self.partition_state_machine.unclean_default = enabled
        self.trace("event", "unclean_leader_election_default", enabled=enabled)
        if enabled and self.is_active:
            log.info("unclean_leader_election_enabled")
            await self.partition_state_machine.trigger_online_partition_state_change()

    async def _process_topic_unclean_leader_election_enable(self, topic: TopicName) -> None:
        """``processTopicUncleanLeaderElectionEnable``: the topic's offline partitions go
        online with the offline election, which now reads unclean allowed."""
        if not self.is_active:
            return
        log.info("topic_unclean_leader_election_enabled", topic=topic)
        self.trace("event", "topic_unclean_leader_election_enabled", topic=topic)
        await self.partition_state_machine.trigger_online_partition_state_change(topic)

    async def _process_controlled_shutdown(self, event: ControlledShutdown) -> None:
        """Kafka's ``processControlledShutdown``: the broker is answered in every case, also
        when this fails."""
        try:
            response = await self.controlled_shutdowns.process(
                event.broker_id, event.broker_epoch, active=self.is_active
            )
        except ControllerMovedError:
            event.preempt()  # answered STALE_CONTROLLER_EPOCH, as Kafka's callback
            raise
        except Exception:
            event.reply(ControlledShutdownResponse(error_code=ErrorCode.UNKNOWN_SERVER_ERROR))
            raise
        event.reply(response)

    # ------------------------------------------------------------------ election, resignation

    async def _process_startup(self) -> None:
        await self._watch_existence(zkdata.CONTROLLER_PATH, self._controller_watch)
        await self._elect()

    async def _process_reelect(self) -> None:
        await self._maybe_resign()
        await self._elect()

    async def _process_register_broker_and_reelect(self) -> None:
        epoch = await kafka_zk.register_broker(self._session(), self.broker_id, self.registration)
        self.broker_epoch = BrokerEpoch(epoch)
        self.trace("event", "broker_reregistered", broker_epoch=epoch)
        if self._on_broker_epoch is not None:
            self._on_broker_epoch(self.broker_epoch)
        await self._process_reelect()

    def _process_expire(self) -> None:
        self._set_active(NO_CONTROLLER)
        self._on_controller_resignation()

    async def _read_controller_id(self) -> BrokerId:
        controller_id = await kafka_zk.get_controller_id(self._session())
        return NO_CONTROLLER if controller_id is None else controller_id

    async def _elect(self) -> None:
        self._set_active(await self._read_controller_id())
        if self._active_id != NO_CONTROLLER:
            return  # someone (maybe us) is already the controller
        try:
            epoch, epoch_zk_version = await kafka_zk.try_become_controller(
                self._session(), self.broker_id, self._wall_ms()
            )
            self.context.epoch = epoch
            self.context.epoch_zk_version = epoch_zk_version
            self._set_active(self.broker_id)
            log.info("controller_elected", epoch=epoch, epoch_zk_version=epoch_zk_version)
            self.trace(
                "event", "controller_elected", epoch=epoch, epoch_zk_version=epoch_zk_version
            )
            await self._on_controller_failover()
        except ControllerMovedError:
            await self._maybe_resign()
        except Exception as exc:
            log.exception("controller_failover_failed")
            self.trace(
                "error", "controller_failover_failed", error=type(exc).__name__, detail=str(exc)
            )
            await self._trigger_controller_move()

    async def _maybe_resign(self) -> None:
        was_active = self.is_active
        await self._watch_existence(zkdata.CONTROLLER_PATH, self._controller_watch)
        self._set_active(await self._read_controller_id())
        if was_active and not self.is_active:
            self._on_controller_resignation()

    async def _trigger_controller_move(self) -> None:
        """Resign and delete ``/controller`` (fenced) so that another election happens."""
        self._set_active(await self._read_controller_id())
        if not self.is_active:
            log.warning("controller_already_moved")
            return
        expected = self.context.epoch_zk_version
        self._set_active(NO_CONTROLLER)
        self._on_controller_resignation()
        try:
            await kafka_zk.delete_controller_fenced(self._session(), expected)
        except StoreError as exc:
            log.warning("delete_controller_failed", error=repr(exc))

    async def _handle_illegal_state(self, exc: IllegalControllerStateError) -> None:
        """Kafka's ``handleIllegalState``: a batch could not be built or flushed: clear it,
        resign, re-raise."""
        log.error("forcing_controller_resignation", detail=str(exc))
        self.request_batch.clear()
        await self._trigger_controller_move()
        raise exc

    def _on_controller_resignation(self) -> None:
        """``onControllerResignation``: unregister the controller's handlers, drop queued
        requests, forget all. The ``/controller`` handler stays: every broker watches it."""
        zk = self.zk
        # The ISR-change handler is never registered (IBP 2.7-IV2 uses AlterIsr);
        # unregistering it is harmless, as in Kafka.
        zk.unregister_children(zkdata.ISR_CHANGE_NOTIFICATION_PATH)
        zk.unregister_data(zkdata.REASSIGN_PARTITIONS_PATH)
        zk.unregister_data(zkdata.PREFERRED_REPLICA_ELECTION_PATH)
        zk.unregister_children(zkdata.LOG_DIR_EVENT_NOTIFICATION_PATH)
        self._unregister_broker_modifications(list(self._broker_modification_watches))
        self.scheduler.shutdown()  # the auto-rebalance task
        zk.unregister_children(zkdata.TOPICS_PATH)
        for topic in sorted(self._partition_modification_watches):
            zk.unregister_data(zkdata.topic_path(topic))
        self._partition_modification_watches.clear()
        zk.unregister_children(zkdata.DELETE_TOPICS_PATH)
        zk.unregister_children(zkdata.BROKER_IDS_PATH)
        self.channel.shutdown()
        self.request_batch.clear()
        self.partition_state_machine.batch.clear()
        self.replica_state_machine.batch.clear()
        was_epoch = self.context.epoch
        self.context.reset()
        self._publish_status()
        log.info("controller_resigned", epoch=was_epoch)
        self.trace("event", "controller_resigned", epoch=was_epoch)

    # ------------------------------------------------------------------ failover

    async def _on_controller_failover(self) -> None:
        """Kafka's ``onControllerFailover``; the numbered steps are its steps, in its order."""
        session = self._session()
        ctx = self.context
        # 1. Feature versioning (IBP 2.7-IV2: enabled).
        await kafka_zk.ensure_feature_versioning_enabled(session)
        # 2. Handlers, registered before the source of truth is read.
        self.zk.register_children(zkdata.BROKER_IDS_PATH, self._broker_change_watch)
        self.zk.register_children(zkdata.TOPICS_PATH, self._topic_change_watch)
        self.zk.register_children(zkdata.DELETE_TOPICS_PATH, self._topic_deletion_watch)
        self.zk.register_children(zkdata.LOG_DIR_EVENT_NOTIFICATION_PATH, self._log_dir_event_watch)
        # Existence handlers on /admin/preferred_replica_election and
        # /admin/reassign_partitions. ISR-change notifications are not emulated: IBP
        # 2.7-IV2 uses AlterIsr.
        for path in (zkdata.PREFERRED_REPLICA_ELECTION_PATH, zkdata.REASSIGN_PARTITIONS_PATH):
            await self._watch_existence(path, self._admin_watches[path])
        # 3. Stale notifications.
        await kafka_zk.delete_children_fenced(
            session, ctx.epoch_zk_version, zkdata.LOG_DIR_EVENT_NOTIFICATION_PATH
        )
        await kafka_zk.delete_children_fenced(
            session, ctx.epoch_zk_version, zkdata.ISR_CHANGE_NOTIFICATION_PATH
        )
        # 4. The context, from the store.
        await self._initialize_controller_context()
        # 5. Topic deletions in progress.
        to_delete, ineligible = await self._fetch_topic_deletions_in_progress()
        await self.topic_deletion_manager.init(to_delete, ineligible)
        # 6. Live brokers first, so that brokers know them before any LeaderAndIsr.
        await self._send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), ())
        # 7, 8. The state machines (resends LeaderAndIsr for every led partition).
        await self.replica_state_machine.startup()
        await self.partition_state_machine.startup()
        log.info("controller_ready", epoch=ctx.epoch)
        self.trace("event", "controller_ready", epoch=ctx.epoch)
        # 9. Resume reassignments: the ZK path first, then those in topic znodes.
        await self.reassignments.initialize()
        # 10. Restart the deletions that can progress.
        await self.topic_deletion_manager.try_topic_deletion()
        # 11. Pending preferred replica elections from the store.
        await self.leader_elections.resume_pending_preferred_replica_elections()
        # 12. The scheduler; the auto-rebalance task after 5 s if enabled.
        self.scheduler.startup()
        if self.config.auto_leader_rebalance_enable:
            self.leader_elections.schedule_auto_rebalance(AUTO_REBALANCE_FIRST_DELAY)

    async def _initialize_controller_context(self) -> None:
        session = self._session()
        ctx = self.context
        brokers = await kafka_zk.get_brokers(session)
        ctx.set_live_brokers({b: (Broker(b, r.registration), r.epoch) for b, r in brokers.items()})
        topics = await kafka_zk.get_all_topics(session)
        ctx.set_all_topics(topics)
        self._register_partition_modifications(topics)
        for topic, partitions in (await kafka_zk.get_assignments(session, sorted(topics))).items():
            for partition, assignment in partitions.items():
                tp = TopicPartition(topic, partition)
                ctx.update_partition_full_replica_assignment(tp, assignment)
                if is_being_reassigned(assignment):
                    ctx.partitions_being_reassigned.add(tp)
        ctx.clear_leadership()
        ctx.shutting_down_broker_ids.clear()
        await self._register_broker_modifications(sorted(ctx.live_or_shutting_down_broker_ids))
        await self._update_leader_and_isr_cache(ctx.all_partitions)
        self.channel.startup(ctx.live_or_shutting_down_broker_ids)
        log.info(
            "controller_context_initialized",
            live_brokers=sorted(ctx.live_broker_ids),
            topics=sorted(ctx.all_topics),
        )

    async def _update_leader_and_isr_cache(self, partitions: Iterable[TopicPartition]) -> None:
        states = await kafka_zk.get_partition_states(self._session(), partitions)
        for tp, state in states.items():
            self.context.put_leadership(tp, Leadership.from_znode(state))

    async def _register_broker_modifications(self, broker_ids: Iterable[BrokerId]) -> None:
        for broker_id in broker_ids:
            watch = DataWatch(on_change=self._enqueuer(BrokerModifications(broker_id=broker_id)))
            await self._watch_existence(zkdata.broker_path(broker_id), watch)
            self._broker_modification_watches.add(broker_id)

    def _unregister_broker_modifications(self, broker_ids: Iterable[BrokerId]) -> None:
        for broker_id in broker_ids:
            if broker_id in self._broker_modification_watches:
                self._broker_modification_watches.discard(broker_id)
                self.zk.unregister_data(zkdata.broker_path(broker_id))

    def _register_partition_modifications(self, topics: Iterable[TopicName]) -> None:
        for topic in sorted(topics):
            self.zk.register_data(
                zkdata.topic_path(topic),
                DataWatch(on_change=self._enqueuer(PartitionModifications(topic=topic))),
            )
            self._partition_modification_watches.add(topic)

    async def _send_update_metadata(
        self, broker_ids: Iterable[BrokerId], partitions: Iterable[TopicPartition]
    ) -> None:
        try:
            self.request_batch.new_batch()
            self.request_batch.add_update_metadata(broker_ids, partitions)
            self.request_batch.send_requests_to_brokers(self.context.epoch)
        except IllegalControllerStateError as exc:
            await self._handle_illegal_state(exc)

    # ------------------------------------------------------------------ brokers

    async def _process_broker_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = await kafka_zk.get_brokers(self._session())
        known = ctx.live_or_shutting_down_broker_ids
        new = sorted(set(current) - known)
        dead = sorted(known - set(current))
        bounced = sorted(
            b for b in set(current) & known if current[b].epoch > ctx.live_broker_epochs[b]
        )
        log.info(
            "broker_change",
            new=new,
            dead=dead,
            bounced=bounced,
            live=sorted(current),
        )
        self.trace("event", "broker_change", new=new, dead=dead, bounced=bounced)
        for b in new:
            self.channel.add_broker(b)
        for b in bounced:
            self.channel.remove_broker(b)
            self.channel.add_broker(b)
        for b in dead:
            self.channel.remove_broker(b)
        if new:
            ctx.add_live_brokers(
                {b: (Broker(b, current[b].registration), current[b].epoch) for b in new}
            )
            await self._on_broker_startup(new)
        if bounced:
            ctx.remove_live_brokers(bounced)
            await self._on_broker_failure(bounced)
            ctx.add_live_brokers(
                {b: (Broker(b, current[b].registration), current[b].epoch) for b in bounced}
            )
            await self._on_broker_startup(bounced)
        if dead:
            ctx.remove_live_brokers(dead)
            await self._on_broker_failure(dead)

    async def _on_broker_startup(self, new_brokers: list[BrokerId]) -> None:
        """Kafka's ``onBrokerStartup``; the numbered steps are its steps."""
        ctx = self.context
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = sorted(ctx.live_or_shutting_down_broker_ids - set(new_brokers))
        await self._send_update_metadata(existing, ())
        await self._send_update_metadata(new_brokers, ctx.partitions_with_leaders)
        replicas = ctx.replicas_on_brokers(new_brokers)
        await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        await self.partition_state_machine.trigger_online_partition_state_change()
        # 6. Resume the reassignments whose targets include a new broker.
        await self.reassignments.resume_for_new_brokers(new_brokers)
        # 7. Resume the deletion of queued topics with a replica on a new broker.
        hosted = {r.topic for r in replicas if ctx.is_topic_queued_for_deletion(r.topic)}
        if hosted:
            await self.topic_deletion_manager.resume_deletion_for_topics(
                {TopicName(t) for t in hosted}
            )
        await self._register_broker_modifications(new_brokers)

    async def _on_broker_failure(self, dead_brokers: list[BrokerId]) -> None:
        """Kafka's ``onBrokerFailure``, then ``onReplicasBecomeOffline``."""
        ctx = self.context
        for b in dead_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
            ctx.shutting_down_broker_ids.discard(b)
        await self._on_replicas_become_offline(ctx.replicas_on_brokers(dead_brokers))
        self._unregister_broker_modifications(dead_brokers)

    async def _on_replicas_become_offline(self, replicas: list[PartitionAndReplica]) -> None:
        ctx = self.context
        for_deletion = [r for r in replicas if ctx.is_topic_queued_for_deletion(r.topic)]
        not_for_deletion = [r for r in replicas if not ctx.is_topic_queued_for_deletion(r.topic)]
        offline_leader = ctx.partitions_with_offline_leader
        await self.partition_state_machine.handle_state_changes(
            offline_leader, PartitionState.OFFLINE
        )
        await self.partition_state_machine.trigger_online_partition_state_change()
        await self.replica_state_machine.handle_state_changes(
            not_for_deletion, ReplicaState.OFFLINE
        )
        if for_deletion:
            await self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not offline_leader:
            await self._send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), ())

    async def _process_broker_modification(self, broker_id: BrokerId) -> None:
        if not self.is_active:
            return
        ctx = self.context
        current = await kafka_zk.get_broker(self._session(), broker_id)
        cached = ctx.live_or_shutting_down_broker(broker_id)
        if current is None or cached is None:
            return
        new, old = current.registration, cached.registration
        if new.endpoints != old.endpoints or new.features != old.features:
            log.info("broker_metadata_updated", broker=broker_id)
            ctx.update_broker_metadata(Broker(broker_id, new))
            await self._send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), ())

    # ------------------------------------------------------------------ topics

    async def _process_topic_change(self) -> None:
        if not self.is_active:
            return
        ctx = self.context
        session = self._session()
        topics = set(await kafka_zk.get_all_topics(session))
        new_topics = sorted(topics - ctx.all_topics)
        deleted_topics = sorted(ctx.all_topics - topics)
        ctx.set_all_topics(topics)
        self._register_partition_modifications(new_topics)
        added = await kafka_zk.get_assignments(session, new_topics)
        for topic in deleted_topics:
            ctx.remove_topic(topic)
            if topic in self._partition_modification_watches:
                self._partition_modification_watches.discard(topic)
                self.zk.unregister_data(zkdata.topic_path(topic))
        new_partitions: list[TopicPartition] = []
        for topic, partitions in added.items():
            for partition, assignment in partitions.items():
                tp = TopicPartition(topic, partition)
                ctx.update_partition_full_replica_assignment(tp, assignment)
                new_partitions.append(tp)
        log.info("topic_change", new=new_topics, deleted=deleted_topics)
        self.trace("event", "topic_change", new=new_topics, deleted=deleted_topics)
        if new_partitions:
            await self._on_new_partition_creation(new_partitions)

    async def _process_partition_modifications(self, topic: TopicName) -> None:
        if not self.is_active:
            return
        ctx = self.context
        session = self._session()
        full = await kafka_zk.get_topic_assignment(session, topic) or {}
        to_add = {
            p: a
            for p, a in full.items()
            if not ctx.partition_replica_assignment(TopicPartition(topic, p))
        }
        if ctx.is_topic_queued_for_deletion(topic):
            if to_add:
                log.warning(
                    "skipping_partition_addition_during_deletion",
                    topic=topic,
                    partitions=sorted(to_add),
                )
                await self._restore_partition_replica_assignment(topic, full)
            else:
                log.info("ignoring_partition_change_during_deletion", topic=topic)
            return
        if not to_add:
            return
        added = [TopicPartition(topic, p) for p in sorted(to_add)]
        for tp in added:
            ctx.update_partition_full_replica_assignment(tp, to_add[tp.partition])
        log.info("partitions_added", topic=topic, partitions=sorted(to_add))
        await self._on_new_partition_creation(added)

    async def _restore_partition_replica_assignment(
        self, topic: TopicName, full: dict[int, zkdata.ReplicaAssignment]
    ) -> None:
        """Keep only partitions that have a ``partitions/<p>`` znode, with the assignment
        the controller knows (fenced)."""
        session = self._session()
        existing: tuple[str, ...] = ()
        with contextlib.suppress(NoNodeError):
            existing = await session.children(zkdata.topic_partitions_path(topic))
        kept = {
            p: self.context.partition_full_replica_assignment(TopicPartition(topic, p))
            for p in full
            if str(p) in existing
        }
        await kafka_zk.set_topic_assignment_fenced(
            session, self.context.epoch_zk_version, topic, kept
        )

    async def _on_new_partition_creation(self, partitions: list[TopicPartition]) -> None:
        """Kafka's ``onNewPartitionCreation``: New, then Online with leaders elected."""
        ctx = self.context
        partitions = sorted(set(partitions))
        psm = self.partition_state_machine
        rsm = self.replica_state_machine
        log.info("new_partition_creation", partitions=[str(tp) for tp in partitions])
        # The replicas listed once (300,000 at 100,000 partitions): the controller's event
        # thread is the only one to change assignments, and these steps do not.
        replicas = ctx.replicas_for_partitions(partitions)
        await psm.handle_state_changes(partitions, PartitionState.NEW)
        await rsm.handle_state_changes(replicas, ReplicaState.NEW)
        await psm.handle_state_changes(partitions, PartitionState.ONLINE, OfflineElection(False))
        await rsm.handle_state_changes(replicas, ReplicaState.ONLINE)

    # ------------------------------------------------------------------ topic deletion

    async def _fetch_topic_deletions_in_progress(
        self,
    ) -> tuple[set[TopicName], set[TopicName]]:
        """Failover step 5: the marked topics, and those that cannot progress now (a replica
        offline, or a partition being reassigned)."""
        ctx = self.context
        to_delete = set(await kafka_zk.get_topic_deletions(self._session()))
        offline = ctx.topics_with_offline_replicas()
        reassigning = {TopicName(tp.topic) for tp in ctx.partitions_being_reassigned}
        return to_delete, offline | reassigning

    async def _process_log_dir_event_notification(self) -> None:
        """``processLogDirEventNotification``: the brokers named by the notifications get a
        LeaderAndIsr for every replica they host (``onBrokerLogDirFailure``: each replica
        to OnlineReplica), whose KAFKA_STORAGE_ERROR answers take the replicas in failed
        directories offline; the notifications processed are deleted in any case."""
        if not self.is_active:
            return
        session = self._session()
        sequence_numbers = await kafka_zk.get_log_dir_event_notifications(session)
        if not sequence_numbers:
            return  # the watch firing for the deletion of processed ones
        try:
            broker_ids = await kafka_zk.get_broker_ids_from_log_dir_events(
                session, sequence_numbers
            )
            log.info("handling_log_dir_failure", brokers=broker_ids)
            self.trace("event", "log_dir_failure_handled", brokers=broker_ids)
            replicas = self.context.replicas_on_brokers(broker_ids)
            await self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE)
        finally:
            await kafka_zk.delete_log_dir_event_notifications_fenced(
                session, self.context.epoch_zk_version, sequence_numbers
            )

    async def _process_topic_deletion(self) -> None:
        """``processTopicDeletion``: markers of unknown topics are removed; with deletion
        disabled every marker is; the rest are queued (a topic with a partition being
        reassigned, paused)."""
        if not self.is_active:
            return
        ctx = self.context
        session = self._session()
        marked = set(await kafka_zk.get_topic_deletions(session))
        unknown = sorted(marked - ctx.all_topics)
        if unknown:
            log.warning("ignoring_deletion_of_non_existing_topics", topics=unknown)
            self.trace("event", "topic_deletion_ignored", topics=unknown)
            await kafka_zk.delete_topic_deletions_fenced(session, ctx.epoch_zk_version, unknown)
        to_delete = sorted(marked & ctx.all_topics)
        if not to_delete:
            return
        if not self.config.delete_topic_enable:
            log.info("topic_deletion_disabled_removing_markers", topics=to_delete)
            self.trace("event", "topic_deletion_disabled", topics=to_delete)
            await kafka_zk.delete_topic_deletions_fenced(session, ctx.epoch_zk_version, to_delete)
            return
        reassigning = {TopicName(tp.topic) for tp in ctx.partitions_being_reassigned}
        log.info("starting_topic_deletion", topics=to_delete)
        await self.topic_deletion_manager.enqueue_topics_for_deletion(
            to_delete, ineligible=reassigning & set(to_delete), reason=REASON_REASSIGNMENT
        )

    def _stop_replica_event(
        self, broker_id: BrokerId, response: StopReplicaResponse, deleted: frozenset[TopicPartition]
    ) -> TopicDeletionStopReplicaResponseReceived | None:
        """Runs when a StopReplica answer arrives: only the partitions sent with delete=true
        whose topic's deletion has started produce an event
        (``TopicDeletionStopReplicaResponseReceived``). A request-level error counts against
        all of them (the broker reports no partitions then)."""
        ctx = self.context
        errors: list[tuple[TopicPartition, ErrorCode]]
        if response.error_code is not ErrorCode.NONE:
            errors = [(tp, response.error_code) for tp in sorted(deleted)]
        else:
            errors = [
                (TopicPartition(pe.topic, pe.partition), pe.error_code)
                for pe in response.partition_errors
                if TopicPartition(pe.topic, pe.partition) in deleted
            ]
        errors = [(tp, code) for tp, code in errors if ctx.is_topic_deletion_in_progress(tp.topic)]
        if not errors:
            return None
        return TopicDeletionStopReplicaResponseReceived(
            broker_id=broker_id, error_code=response.error_code, partition_errors=tuple(errors)
        )

    async def _process_topic_deletion_stop_replica_response(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active:
            return
        broker_id = event.broker_id
        failed_all = event.error_code is not ErrorCode.NONE
        codes = {
            tp: event.error_code if failed_all else code for tp, code in event.partition_errors
        }
        in_error = sorted(tp for tp, code in codes.items() if code is not ErrorCode.NONE)
        done = sorted(tp for tp, code in codes.items() if code is ErrorCode.NONE)
        tdm = self.topic_deletion_manager
        if in_error:
            log.warning(
                "stop_replica_for_deletion_failed",
                broker=broker_id,
                errors={str(tp): codes[tp].name for tp in in_error},
            )
            await tdm.fail_replica_deletion(PartitionAndReplica(tp, broker_id) for tp in in_error)
        if done:
            await tdm.complete_replica_deletion(PartitionAndReplica(tp, broker_id) for tp in done)

    # ------------------------------------------------------------------ responses

    async def _process_leader_and_isr_response(
        self, broker_id: BrokerId, response: LeaderAndIsrResponse
    ) -> None:
        if not self.is_active:
            return
        if response.error_code is not ErrorCode.NONE:
            log.error(
                "leader_and_isr_response_error", broker=broker_id, error=response.error_code.name
            )
            return
        ctx = self.context
        offline = {
            pe.topic_partition
            for pe in response.partition_errors
            if pe.error_code is ErrorCode.KAFKA_STORAGE_ERROR
        }
        previous = set(ctx.replicas_on_offline_dirs.get(broker_id, ()))
        if previous:  # those now online are no longer on an offline dir
            online = {
                pe.topic_partition
                for pe in response.partition_errors
                if pe.error_code is ErrorCode.NONE
            }
            current = (previous - online) | offline
        else:
            current = offline
        ctx.replicas_on_offline_dirs[broker_id] = current
        newly_offline = sorted(current - previous)
        if newly_offline:
            log.info(
                "replicas_marked_offline",
                broker=broker_id,
                partitions=[str(tp) for tp in newly_offline],
            )
            await self._on_replicas_become_offline(
                [PartitionAndReplica(tp, broker_id) for tp in newly_offline]
            )

    def _process_update_metadata_response(
        self, broker_id: BrokerId, response: UpdateMetadataResponse
    ) -> None:
        if not self.is_active:
            return
        if response.error_code is not ErrorCode.NONE:
            log.error(
                "update_metadata_response_error", broker=broker_id, error=response.error_code.name
            )


class _ControllerDeletionClient:
    """The store and broker side effects the deletion manager asks for (Kafka's
    ``ControllerDeletionClient``), done with the controller's session, epoch and batch."""

    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller

    async def delete_topics(self, topics: Sequence[TopicName]) -> None:
        c = self._controller
        known = c.context.partition_assignments
        await kafka_zk.delete_topics_fenced(
            c._session(),
            c.context.epoch_zk_version,
            {topic: sorted(known.get(topic, {})) for topic in topics},
        )

    async def delete_topic_deletions(self, topics: Sequence[TopicName]) -> None:
        c = self._controller
        await kafka_zk.delete_topic_deletions_fenced(
            c._session(), c.context.epoch_zk_version, topics
        )

    def mute_partition_modifications(self, topic: TopicName) -> None:
        c = self._controller
        if topic in c._partition_modification_watches:
            c._partition_modification_watches.discard(topic)
            c.zk.unregister_data(zkdata.topic_path(topic))

    async def send_metadata_update(self, partitions: Sequence[TopicPartition]) -> None:
        c = self._controller
        await c._send_update_metadata(
            sorted(c.context.live_or_shutting_down_broker_ids), partitions
        )


class _ControllerOps:
    """What reassignment, leader elections and controlled shutdown ask of the controller
    (``controller_ops.ControllerOps``), with its session, epoch and batch."""

    def __init__(self, controller: KafkaController) -> None:
        self._controller = controller

    def session(self) -> StoreSession:
        return self._controller._session()

    async def send_requests(self, fill: Callable[[ControllerBrokerRequestBatch], None]) -> None:
        c = self._controller
        try:
            c.request_batch.new_batch()
            fill(c.request_batch)
            c.request_batch.send_requests_to_brokers(c.context.epoch)
        except IllegalControllerStateError as exc:
            await c._handle_illegal_state(exc)

    async def send_update_metadata(
        self, broker_ids: Iterable[BrokerId], partitions: Iterable[TopicPartition]
    ) -> None:
        await self._controller._send_update_metadata(broker_ids, partitions)

    async def watch_existence(self, path: str) -> bool:
        c = self._controller
        return await c._watch_existence(path, c._admin_watches[path])

    def enqueue(self, event: ControllerEventUnion) -> None:
        self._controller.events.put(event)

    def trace(self, kind: str, type_: str, **fields: Any) -> None:
        self._controller.trace(kind, type_, **fields)
