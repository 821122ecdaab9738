"""The broker actor: registration, control requests, metadata cache, admin APIs.

One ``Broker`` (actor ``broker`` on node ``broker-<id>``) per emulated Kafka broker. At
start-up it follows Kafka's order (spec §8.5): store session, top-level paths, cluster
id, log manager, **registration of ``/brokers/ids/<id>``** (its czxid is the broker
epoch), then the controller component. It then serves:

* the controller's LeaderAndIsr / UpdateMetadata / StopReplica, rejecting a stale
  controller epoch (STALE_CONTROLLER_EPOCH) or a request meant for an older incarnation
  of itself (STALE_BROKER_EPOCH) — spec §4.4;
* the admin APIs (Metadata, CreateTopics, CreatePartitions, DeleteTopics,
  DescribeConfigs, DescribeCluster) as typed ``protocol.kafka_api`` messages, with
  Kafka's validation order and the purgatory wait on this broker's metadata cache: for
  leaders after a creation (spec §4.2, §5.1), for the topics to leave it after a
  deletion is marked (spec §6.1). Admin requests reaching a broker that is not the
  controller are forwarded to the controller (real clients do not all retry
  NOT_CONTROLLER).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

import msgspec

from actors.admin import (
    AdminOperationError,
    BrokerConfig,
    BrokerMetadata,
    ConfigError,
    RackMode,
    TopicCreation,
    is_internal,
    plan_create_topic,
    topic_config_entries,
    validate_create_partitions,
)
from actors.admin import topics as topic_rules
from actors.broker.controlled_shutdown import ControlledShutdownActor
from actors.broker.metadata_cache import MetadataCache
from actors.controller.controller import ControllerConfig, KafkaController
from actors.log.disk import Disk
from actors.log.manager import LogManager
from actors.runtime.actor import Actor, Context, DeferredReply
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from actors.zk.watch import ZkConnection
from protocol import zkdata
from protocol.base import ActorRef, Message
from protocol.broker import (
    BrokerEpochChanged,
    BrokerStatus,
    BrokerStatusRequest,
    PurgatoryExpired,
)
from protocol.control import (
    NO_LEADER,
    Endpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    SecurityProtocol,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.controller import ControllerStatus, ControllerStatusRequest
from protocol.errors import (
    AskTimeoutError,
    ErrorCode,
    KafkaApiError,
    NodeExistsError,
    RemoteError,
    StoreError,
    error_code_for,
)
from protocol.ids import BrokerId, ControllerEpoch, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    ConfigResourceType,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeClusterRequestData,
    DescribeClusterResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicErrorResult,
    TopicMetadata,
    TopicRef,
)
from protocol.kafka_api import ConfigEntry as WireConfigEntry
from protocol.kafka_api import ConfigSource as WireConfigSource
from protocol.kafka_api import ConfigValueType as WireConfigValueType
from protocol.log import DeleteLog, GetOrCreateLog, GetOrCreateLogs, LogsCreated

BROKER_ACTOR = "broker"
CONTROLLER_ACTOR = "controller"
LOG_MANAGER_ACTOR = "log_manager"
FILE_DELETE_DELAY_MS = "file.delete.delay.ms"  # the topic config a deleted log waits for
_TOPIC_ID_NAMESPACE = uuid.UUID("6b656d75-0000-4000-8000-746f70696373")  # "kemu" … "topics"


def broker_node_id(broker_id: int) -> str:
    return f"broker-{broker_id}"


def broker_ref(broker_id: int) -> ActorRef:
    return ActorRef(broker_node_id(broker_id), BROKER_ACTOR)


@dataclass(frozen=True)
class BrokerSettings:
    broker_id: BrokerId
    log_dirs: tuple[Path, ...]
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
    config: BrokerConfig = field(default_factory=BrokerConfig)
    disk: Disk | None = None  # what the log manager's file operations go through (tests: faults)


_AdminRequest = CreateTopicsRequestData | CreatePartitionsRequestData | DeleteTopicsRequestData
"""The admin requests only the active controller handles (others forward them)."""


@dataclass
class _Parked:
    """An admin operation waiting until this broker's metadata cache shows each of its
    topics done: Kafka's DelayedCreatePartitions (every partition has a leader) or
    DelayedDeleteTopics (the topic is gone)."""

    reply: DeferredReply
    waiting: set[TopicName]  # the topics not done yet
    done: Callable[[TopicName], bool]  # is this topic done, as the cache now says?
    finish: Callable[[set[TopicName]], Message]  # timed-out topics -> the response


class Broker(Actor):
    def __init__(
        self,
        settings: BrokerSettings,
        store: MetadataStore,
        *,
        with_controller: bool = True,
    ) -> None:
        super().__init__(BROKER_ACTOR)
        self.settings = settings
        self.broker_id = settings.broker_id
        self.config = settings.config
        self.store = store
        self._with_controller = with_controller
        self.zk: ZkConnection | None = None
        self.cluster_id = ""
        self.broker_epoch = -1
        self.controller_epoch = ControllerEpoch(0)  # highest seen in a control request
        self.cache = MetadataCache()
        self.leader_epochs: dict[TopicPartition, int] = {}
        self._parked: dict[int, _Parked] = {}
        self._next_op = 0

    # ------------------------------------------------------------------ start-up

    @property
    def log_manager_ref(self) -> ActorRef:
        return ActorRef(self.node.node_id, LOG_MANAGER_ACTOR)

    @property
    def controller_ref(self) -> ActorRef:
        return ActorRef(self.node.node_id, CONTROLLER_ACTOR)

    def registration(self) -> zkdata.BrokerRegistration:
        endpoint = Endpoint(
            host=self.settings.host,
            port=self.settings.port,
            listener="PLAINTEXT",
            security_protocol=SecurityProtocol.PLAINTEXT,
        )
        return zkdata.BrokerRegistration(
            endpoints=(endpoint,), rack=self.settings.rack, timestamp=self.clock.wall_ms()
        )

    @property
    def session(self) -> StoreSession:
        """The current store session (a new one after an expiry), shared with the
        controller through the broker's ``ZkConnection``."""
        if self.zk is None:
            raise RuntimeError(f"broker {self.broker_id} has no store connection yet")
        return self.zk.session

    async def on_start(self) -> None:
        self.zk = ZkConnection(
            self.store,
            name=self.node.node_id,
            session_timeout=self.config.zookeeper_session_timeout_ms / 1000,
            clock=self.clock,
        )
        await self.node.task_group.start(self.zk.run)
        await kafka_zk.create_top_level_paths(self.session)
        self.cluster_id = await kafka_zk.get_or_create_cluster_id(self.session, self.rng)
        await self.node.spawn(
            LogManager(
                self.settings.log_dirs,
                broker_id=self.broker_id,
                cluster_id=self.cluster_id,
                disk=self.settings.disk,
                segment_delete_delay=self.config.log_segment_delete_delay_ms / 1000,
                initial_task_delay=self.config.log_initial_task_delay_ms / 1000,
                name=LOG_MANAGER_ACTOR,
            )
        )
        registration = self.registration()
        await self.register(registration)
        if self._with_controller:
            config = ControllerConfig(
                broker_id=self.broker_id,
                unclean_leader_election_enable=self.config.unclean_leader_election_enable,
                controller_socket_timeout_ms=self.config.controller_socket_timeout_ms,
                delete_topic_enable=self.config.delete_topic_enable,
                auto_leader_rebalance_enable=self.config.auto_leader_rebalance_enable,
                leader_imbalance_check_interval_seconds=(
                    self.config.leader_imbalance_check_interval_seconds
                ),
                leader_imbalance_per_broker_percentage=(
                    self.config.leader_imbalance_per_broker_percentage
                ),
            )
            await self.node.spawn(
                KafkaController(
                    config,
                    self.zk,
                    registration=registration,
                    broker_epoch=self.broker_epoch,
                    on_broker_epoch=self._epoch_changed,
                    name=CONTROLLER_ACTOR,
                )
            )
        # (Issue 4) Spawned last, so that on a graceful stop its controlled shutdown runs
        # first, while the controller, the log manager and this broker still serve.
        await self.node.spawn(
            ControlledShutdownActor(
                self.broker_id,
                session=lambda: self.session,
                broker_epoch=lambda: self.broker_epoch,
                controller_ref=lambda c: ActorRef(broker_node_id(c), CONTROLLER_ACTOR),
                enable=self.config.controlled_shutdown_enable,
                max_retries=self.config.controlled_shutdown_max_retries,
                retry_backoff_ms=self.config.controlled_shutdown_retry_backoff_ms,
                request_timeout_ms=self.config.request_timeout_ms,
            )
        )

    def _epoch_changed(self, epoch: int) -> None:
        """Called on the controller's event task: hand the new epoch over as a message."""
        self.send_self(BrokerEpochChanged(epoch=epoch))

    async def register(self, registration: zkdata.BrokerRegistration) -> None:
        """Create ``/brokers/ids/<id>``; its czxid becomes the broker epoch."""
        self.broker_epoch = await kafka_zk.register_broker(
            self.session, self.broker_id, registration
        )
        self.trace("event", "broker_registered", broker=self.broker_id, epoch=self.broker_epoch)

    async def on_stop(self) -> None:
        if self.zk is not None:
            await self.zk.session.close()

    # ------------------------------------------------------------------ dispatch

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case LeaderAndIsrRequest():
                return await self._leader_and_isr(msg)
            case UpdateMetadataRequest():
                return self._update_metadata(msg)
            case StopReplicaRequest():
                return await self._stop_replica(msg)
            case MetadataRequestData():
                return await self._metadata(msg)
            case DescribeClusterRequestData():
                return self._describe_cluster()
            case DescribeConfigsRequestData():
                return await self._describe_configs(msg)
            case (
                CreateTopicsRequestData()
                | CreatePartitionsRequestData()
                | DeleteTopicsRequestData()
            ):
                return await self._admin(msg, ctx)
            case PurgatoryExpired(operation=op):
                self._expire(op)
                return None
            case BrokerStatusRequest():
                return self._status()
            case BrokerEpochChanged(epoch=epoch):
                self.broker_epoch = epoch
                self.trace("event", "broker_reregistered", broker=self.broker_id, epoch=epoch)
                return None
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"broker cannot handle {type(msg).__name__}")

    def _status(self) -> BrokerStatus:
        return BrokerStatus(
            broker_id=self.broker_id,
            registered=self.broker_epoch >= 0,
            broker_epoch=self.broker_epoch,
            session_id=self.session.session_id if self.zk is not None else 0,
            cluster_id=self.cluster_id,
            controller_id=BrokerId(
                -1 if self.cache.controller_id is None else self.cache.controller_id
            ),
            live_brokers=tuple(self.cache.alive_broker_ids()),
            topics=tuple(self.cache.topic_names()),
        )

    # ------------------------------------------------------------------ control plane

    def _stale(self, controller_epoch: int, broker_epoch: int) -> ErrorCode | None:
        """Spec §4.4 / §7.3: the fencing checks shared by the three control requests."""
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = ControllerEpoch(controller_epoch)
        return None

    async def _leader_and_isr(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            self.trace("event", "stale_request_rejected", request="LeaderAndIsr", error=stale.name)
            return LeaderAndIsrResponse(error_code=stale)
        codes: dict[TopicPartition, ErrorCode] = {}
        accepted: list[LeaderAndIsrPartitionState] = []
        for state in req.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader_epoch <= self.leader_epochs.get(tp, -1):
                codes[tp] = ErrorCode.STALE_CONTROLLER_EPOCH  # ignored, as Kafka does
            elif self.broker_id not in state.replicas:
                codes[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                accepted.append(state)
        if accepted:
            batch = GetOrCreateLogs(
                logs=tuple(
                    GetOrCreateLog(topic=s.topic, partition=s.partition, is_new=s.is_new)
                    for s in accepted
                )
            )
            reply = await self.ask(self.log_manager_ref, batch)
            assert isinstance(reply, LogsCreated)
            for outcome, state in zip(reply.results, accepted, strict=True):
                tp = TopicPartition(state.topic, state.partition)
                codes[tp] = outcome.error_code
                if outcome.error_code is ErrorCode.NONE:
                    self.leader_epochs[tp] = state.leader_epoch
        errors = [
            PartitionError(
                topic=s.topic,
                partition=s.partition,
                error_code=codes[TopicPartition(s.topic, s.partition)],
            )
            for s in req.partition_states
        ]
        return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partition_errors=tuple(errors))

    def _update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            self.trace(
                "event", "stale_request_rejected", request="UpdateMetadata", error=stale.name
            )
            return UpdateMetadataResponse(error_code=stale)
        touched = self.cache.update(req)
        if touched:
            self._poke(touched)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE)

    async def _stop_replica(self, req: StopReplicaRequest) -> StopReplicaResponse:
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            return StopReplicaResponse(error_code=stale)
        errors: list[PartitionError] = []
        delays = await self._file_delete_delays(
            {TopicName(p.topic) for p in req.partitions if p.delete_partition}
        )
        for p in req.partitions:
            tp = TopicPartition(p.topic, p.partition)
            current = self.leader_epochs.get(tp, -1)
            code = ErrorCode.NONE
            if p.leader_epoch >= 0 and p.leader_epoch < current:
                code = ErrorCode.FENCED_LEADER_EPOCH
            elif p.delete_partition:
                self.leader_epochs.pop(tp, None)
                try:
                    await self.ask(
                        self.log_manager_ref,
                        DeleteLog(
                            topic=p.topic,
                            partition=p.partition,
                            file_delete_delay_ms=delays.get(TopicName(p.topic)),
                        ),
                    )
                except RemoteError as exc:
                    code = exc.code
            errors.append(PartitionError(topic=p.topic, partition=p.partition, error_code=code))
        return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=tuple(errors))

    async def _file_delete_delays(self, topics: set[TopicName]) -> dict[TopicName, int]:
        """The ``file.delete.delay.ms`` overrides of ``topics``, read from their config
        znodes (still there: the controller removes them once every replica is deleted);
        Kafka's log has the same value from its LogConfig. A read that fails leaves the
        broker default in force."""
        delays: dict[TopicName, int] = {}
        for topic in sorted(topics):
            try:
                value = (await kafka_zk.get_topic_config(self.session, topic)).get(
                    FILE_DELETE_DELAY_MS
                )
            except StoreError:
                continue
            if value is not None and value.lstrip("-").isdigit() and int(value) >= 0:
                delays[topic] = int(value)
        return delays

    # ------------------------------------------------------------------ metadata

    def topic_id(self, topic: str) -> uuid.UUID:
        """ZooKeeper-mode Kafka 2.7 has no topic ids; clients of Metadata v10+ need one, so
        each topic gets a stable name-based UUID within its cluster."""
        return uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{self.cluster_id}/{topic}")

    def _brokers(self) -> tuple[BrokerEndpoint, ...]:
        out = []
        for b in self.cache.alive_brokers():
            endpoint = b.endpoints[0]
            out.append(
                BrokerEndpoint(broker_id=b.id, host=endpoint.host, port=endpoint.port, rack=b.rack)
            )
        return tuple(out)

    def _topic_metadata(self, topic: TopicName) -> TopicMetadata:
        alive = set(self.cache.alive_broker_ids())
        partitions = []
        for p, state in sorted(self.cache.partitions(topic).items()):
            code = ErrorCode.NONE
            if state.leader == NO_LEADER or state.leader not in alive:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            partitions.append(
                PartitionMetadata(
                    partition=p,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    replicas=state.replicas,
                    isr=state.isr,
                    offline_replicas=state.offline_replicas,
                    error_code=code,
                )
            )
        return TopicMetadata(
            name=topic,
            topic_id=self.topic_id(topic),
            is_internal=is_internal(topic),
            partitions=tuple(partitions),
        )

    async def _metadata(self, req: MetadataRequestData) -> MetadataResponseData:
        if req.topics is None:
            names = self.cache.topic_names()
            topics = [self._topic_metadata(t) for t in names]
        else:
            topics = []
            for ref in req.topics:
                name = ref.name
                if name is None:
                    topics.append(
                        TopicMetadata(
                            name=TopicName(""),
                            topic_id=ref.topic_id,
                            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                        )
                    )
                elif self.cache.contains(name):
                    topics.append(self._topic_metadata(name))
                else:
                    topics.append(await self._unknown_topic(name, req.allow_auto_topic_creation))
        return MetadataResponseData(
            brokers=self._brokers(),
            cluster_id=self.cluster_id,
            controller_id=self._controller_id(),
            topics=tuple(topics),
        )

    def _controller_id(self) -> BrokerId:
        return BrokerId(-1 if self.cache.controller_id is None else self.cache.controller_id)

    async def _unknown_topic(self, name: TopicName, allow_auto_create: bool) -> TopicMetadata:
        """Spec §4.5: metadata auto-creation writes the store directly and answers
        LEADER_NOT_AVAILABLE; without it, UNKNOWN_TOPIC_OR_PARTITION."""
        if not (allow_auto_create and self.config.auto_create_topics_enable):
            return TopicMetadata(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            existing = await kafka_zk.get_all_topics(self.session)
            registered = await kafka_zk.get_brokers(self.session)
            brokers = [BrokerMetadata(b, r.registration.rack) for b, r in registered.items()]
            plan = plan_create_topic(
                name,
                metadata_topics=self.cache.topic_names(),
                existing_topics=existing,
                alive_brokers=brokers,
                broker_config=self.config,
                rng=self.rng,
                rack_mode=RackMode.SAFE,
            )
            await kafka_zk.write_topic(self.session, name, plan.assignment, plan.config)
        except NodeExistsError:
            pass
        except (KafkaApiError, AdminOperationError, ConfigError, StoreError) as exc:
            code = error_code_for(exc)
            if code is ErrorCode.TOPIC_ALREADY_EXISTS:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            return TopicMetadata(name=name, error_code=code)
        return TopicMetadata(
            name=name, topic_id=self.topic_id(name), error_code=ErrorCode.LEADER_NOT_AVAILABLE
        )

    def _describe_cluster(self) -> DescribeClusterResponseData:
        return DescribeClusterResponseData(
            cluster_id=self.cluster_id, controller_id=self._controller_id(), brokers=self._brokers()
        )

    async def _describe_configs(
        self, req: DescribeConfigsRequestData
    ) -> DescribeConfigsResponseData:
        results = []
        for res in req.resources:
            if res.resource_type != ConfigResourceType.TOPIC:
                results.append(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="kemu describes topic configs only, not resource type"
                        f" {res.resource_type}",
                    )
                )
                continue
            topic = TopicName(res.resource_name)
            if await self.session.exists(zkdata.topic_path(topic)) is None:
                results.append(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"Topic {topic} does not exist",
                    )
                )
                continue
            overrides = await kafka_zk.get_topic_config(self.session, topic)
            entries = [
                WireConfigEntry(
                    name=e.name,
                    value=e.text,
                    source=WireConfigSource(int(e.source)),
                    value_type=_wire_type(e.type),
                )
                for e in topic_config_entries(overrides, self.config)
                if res.configuration_keys is None or e.name in res.configuration_keys
            ]
            results.append(
                DescribeConfigsResult(
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=tuple(entries),
                )
            )
        return DescribeConfigsResponseData(results=tuple(results))

    # ------------------------------------------------------------------ admin (controller)

    async def _is_active_controller(self) -> bool:
        try:
            status = await self.ask(self.controller_ref, ControllerStatusRequest(), timeout=5.0)
        except (RemoteError, AskTimeoutError):
            return False
        return isinstance(status, ControllerStatus) and status.active

    async def _admin(self, msg: _AdminRequest, ctx: Context) -> Message | None:
        if not await self._is_active_controller():
            controller = self.cache.controller_id
            if (
                controller is None
                or controller == self.broker_id
                or ctx.sender.name == BROKER_ACTOR  # forwarded once already: no loops
            ):
                return _not_controller(msg)
            reply = ctx.defer()
            self.start_soon(self._forward, broker_ref(controller), msg, reply)
            return None
        match msg:
            case CreateTopicsRequestData():
                return await self._create_topics(msg, ctx)
            case CreatePartitionsRequestData():
                return await self._create_partitions(msg, ctx)
            case DeleteTopicsRequestData():
                return await self._delete_topics(msg, ctx)
            case _:
                assert_never(msg)

    async def _forward(self, target: ActorRef, msg: _AdminRequest, reply: DeferredReply) -> None:
        """Runs as a helper task: waits for the controller's answer and relays it. It
        touches no broker state."""
        timeout = msg.timeout_ms / 1000 + 5.0
        try:
            answer = await self.ask(target, msg, timeout=max(timeout, 5.0))
        except (RemoteError, AskTimeoutError):
            answer = _not_controller(msg)
        reply.send(self, answer)

    async def _create_topics(self, req: CreateTopicsRequestData, ctx: Context) -> Message | None:
        """Spec §4.2: every topic is checked in request order (a topic planned earlier
        counts as existing for the later ones, as if written), then all planned topics are
        written at once (``kafka_zk.write_topics``); a write refused with NODEEXISTS is
        TOPIC_ALREADY_EXISTS, any other store error its own code. Unlike one write after
        the other, a later topic's collision check also counts an earlier topic whose
        write then failed (only a store failure mid-request can tell the two apart)."""
        duplicates = topic_rules.duplicate_topics(t.name for t in req.topics)
        existing = set(await kafka_zk.get_all_topics(self.session))
        alive = [BrokerMetadata(b.id, b.rack) for b in self.cache.alive_brokers()]
        results: dict[TopicName, CreateTopicResult] = {}
        written: dict[TopicName, int] = {}
        planned: list[tuple[TopicName, TopicCreation]] = []
        in_cache = set(self.cache.topic_names())  # the loop does not await: it stays true
        for topic in req.topics:
            if topic.name in duplicates:
                results[topic.name] = CreateTopicResult(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=topic_rules.DUPLICATE_CREATE_TOPIC_MESSAGE,
                )
                continue
            try:
                plan = plan_create_topic(
                    topic.name,
                    num_partitions=topic.num_partitions,
                    replication_factor=topic.replication_factor,
                    assignment={a.partition: a.broker_ids for a in topic.assignments} or None,
                    config={c.name: c.value for c in topic.configs},
                    metadata_topics=in_cache,
                    existing_topics=existing,
                    alive_brokers=alive,
                    broker_config=self.config,
                    rng=self.rng,
                )
                self._check_policy(topic.name)
            except (KafkaApiError, AdminOperationError, ConfigError, StoreError) as exc:
                results[topic.name] = _creation_error(topic.name, exc)
                continue
            if not req.validate_only:
                existing.add(topic.name)
            planned.append((topic.name, plan))
        outcomes: list[StoreError | None] = [None] * len(planned)
        if not req.validate_only:
            outcomes = await kafka_zk.write_topics(
                self.session,
                [kafka_zk.TopicWrite(name, plan.assignment, plan.config) for name, plan in planned],
            )
        configs: dict[tuple[tuple[str, str], ...], tuple[WireConfigEntry, ...]] = {}
        for (name, plan), error in zip(planned, outcomes, strict=True):
            if error is not None:
                results[name] = _creation_error(name, error)
                continue
            if not req.validate_only:
                written[name] = len(plan.assignment)
            overrides = tuple(plan.config.items())
            if overrides not in configs:  # most topics of a big request share theirs
                configs[overrides] = self._created_configs(plan.config)
            rf = len(next(iter(plan.assignment.values()), ()))
            results[name] = CreateTopicResult(
                name=name,
                topic_id=self.topic_id(name),
                num_partitions=len(plan.assignment),
                replication_factor=rf,
                configs=configs[overrides],
            )
            self.trace("event", "topic_written", topic=name, partitions=len(plan.assignment))

        def finish(timed_out: set[TopicName]) -> CreateTopicsResponseData:
            out = []
            for topic in req.topics:
                result = results[topic.name]
                if topic.name in timed_out:
                    result = _topic_error(
                        topic.name,
                        ErrorCode.REQUEST_TIMED_OUT,
                        "Timed out waiting for the topic's partitions to get leaders.",
                    )
                out.append(result)
            return CreateTopicsResponseData(topics=tuple(out))

        return self._complete_or_park(
            ctx, req.timeout_ms, written, self._has_leaders(written), finish
        )

    async def _create_partitions(
        self, req: CreatePartitionsRequestData, ctx: Context
    ) -> Message | None:
        duplicates = topic_rules.duplicate_topics(t.name for t in req.topics)
        registered = [
            BrokerMetadata(b, r.registration.rack)
            for b, r in (await kafka_zk.get_brokers(self.session)).items()
        ]
        results: dict[TopicName, TopicErrorResult] = {}
        written: dict[TopicName, int] = {}
        for topic in req.topics:
            if topic.name in duplicates:
                results[topic.name] = TopicErrorResult(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=topic_rules.DUPLICATE_CREATE_PARTITIONS_MESSAGE,
                )
                continue
            try:
                existing = await kafka_zk.get_topic_assignment(self.session, topic.name) or {}
                added = validate_create_partitions(
                    topic.name, existing, topic.count, topic.assignments, registered
                )
                if not req.validate_only:
                    full = {p: a.replicas for p, a in existing.items()}
                    full.update(added)
                    await kafka_zk.set_topic_assignment(self.session, topic.name, full)
                    written[topic.name] = len(full)
                results[topic.name] = TopicErrorResult(name=topic.name)
            except (KafkaApiError, AdminOperationError, StoreError) as exc:
                code = error_code_for(exc)
                message = None if code is ErrorCode.UNKNOWN_SERVER_ERROR else str(exc)
                results[topic.name] = TopicErrorResult(
                    name=topic.name, error_code=code, error_message=message
                )

        def finish(timed_out: set[TopicName]) -> CreatePartitionsResponseData:
            out = []
            for topic in req.topics:
                result = results[topic.name]
                if topic.name in timed_out:
                    result = TopicErrorResult(
                        name=topic.name,
                        error_code=ErrorCode.REQUEST_TIMED_OUT,
                        error_message="Timed out waiting for the new partitions to get leaders.",
                    )
                out.append(result)
            return CreatePartitionsResponseData(results=tuple(out))

        return self._complete_or_park(
            ctx, req.timeout_ms, written, self._has_leaders(written), finish
        )

    async def _delete_topics(self, req: DeleteTopicsRequestData, ctx: Context) -> Message | None:
        """Spec §6.1, in the order of Kafka's ``handleDeleteTopicsRequest`` (the controller
        check is ``_admin``'s) and ``AdminManager.deleteTopics``: deletion disabled →
        TOPIC_DELETION_DISABLED for every topic (the wire adapter says INVALID_REQUEST to
        clients older than v3); an entry with both a name and an id → INVALID_REQUEST for
        every topic; per topic: an id naming no topic → UNKNOWN_TOPIC_ID, a topic not in
        this broker's metadata cache or without ``/brokers/topics/<t>`` →
        UNKNOWN_TOPIC_OR_PARTITION, a store failure → UNKNOWN_SERVER_ERROR; the others are
        marked for deletion (an existing marker is fine: several callers can wait for the
        same deletion) and the answer waits until they leave the cache. Internal topics
        may be deleted this way. Kafka sends error codes only, no messages.

        A topic named twice is marked once; as in Kafka 2.7 (whose result collection keeps
        duplicates and sets each outcome on the first entry only), its first entry gets
        the outcome and later ones stay NONE."""
        if not self.config.delete_topic_enable:
            return _delete_refused(req, ErrorCode.TOPIC_DELETION_DISABLED)
        if any(t.name is not None and t.topic_id is not None for t in req.topics):
            return _delete_refused(req, ErrorCode.INVALID_REQUEST)
        try:
            names = await self._topic_names(req.topics)
        except StoreError as exc:
            self.trace("error", "topic_ids_unresolved", detail=repr(exc))
            return _delete_refused(req, ErrorCode.UNKNOWN_SERVER_ERROR)
        entries: list[DeleteTopicResult] = []
        first: dict[TopicName, int] = {}  # each topic to delete -> its first entry
        for ref, name in zip(req.topics, names, strict=True):
            code = ErrorCode.NONE
            if name is None:
                code = ErrorCode.UNKNOWN_TOPIC_ID
            elif not self.cache.contains(name):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                first.setdefault(name, len(entries))
            entries.append(DeleteTopicResult(name=name, topic_id=ref.topic_id, error_code=code))
        outcomes = {topic: await self._mark_for_deletion(topic) for topic in first}

        def finish(timed_out: set[TopicName]) -> DeleteTopicsResponseData:
            out = list(entries)
            for topic, code in outcomes.items():
                if topic in timed_out:
                    code = ErrorCode.REQUEST_TIMED_OUT
                out[first[topic]] = msgspec.structs.replace(out[first[topic]], error_code=code)
            return DeleteTopicsResponseData(topics=tuple(out))

        marked = [t for t, code in outcomes.items() if code is ErrorCode.NONE]
        return self._complete_or_park(
            ctx, req.timeout_ms, marked, lambda topic: not self.cache.contains(topic), finish
        )

    async def _topic_names(self, refs: Iterable[TopicRef]) -> list[TopicName | None]:
        """Each entry's topic: its name, or the topic its id names among the topics the
        store holds (the controller's view), None if none. Raises ``StoreError``."""
        refs = list(refs)
        by_id: dict[uuid.UUID, TopicName] = {}
        if any(ref.name is None for ref in refs):
            topics = await kafka_zk.get_all_topics(self.session)
            by_id = {self.topic_id(t): t for t in topics}
        return [
            ref.name if ref.name is not None else by_id.get(ref.topic_id or uuid.UUID(int=0))
            for ref in refs
        ]

    async def _mark_for_deletion(self, topic: TopicName) -> ErrorCode:
        """``AdminZkClient.deleteTopic``: ``/admin/delete_topics/<t>`` for a topic whose
        ``/brokers/topics/<t>`` exists; an existing marker is success."""
        try:
            if await self.session.exists(zkdata.topic_path(topic)) is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            await self.session.create(zkdata.delete_topic_path(topic), make_parents=True)
        except NodeExistsError:
            self.trace("event", "topic_already_marked_for_deletion", topic=topic)
            return ErrorCode.NONE
        except StoreError as exc:
            self.trace("error", "topic_deletion_marking_failed", topic=topic, detail=repr(exc))
            return ErrorCode.UNKNOWN_SERVER_ERROR
        self.trace("event", "topic_marked_for_deletion", topic=topic)
        return ErrorCode.NONE

    def _check_policy(self, topic: str) -> None:
        """``create.topic.policy.class.name``: kemu knows no Java classes; a configured
        policy name refuses every creation with POLICY_VIOLATION naming it, so that the
        hook's place in the validation order is observable."""
        policy = self.config.create_topic_policy_class_name
        if policy:
            raise KafkaApiError(
                ErrorCode.POLICY_VIOLATION, f"Topic {topic} rejected by policy {policy}"
            )

    def _created_configs(self, overrides: dict[str, str]) -> tuple[WireConfigEntry, ...]:
        return tuple(
            WireConfigEntry(
                name=e.name,
                value=e.text,
                source=WireConfigSource(int(e.source)),
                value_type=_wire_type(e.type),
            )
            for e in topic_config_entries(overrides, self.config)
        )

    # ------------------------------------------------------------------ purgatory

    def _has_leaders(self, written: dict[TopicName, int]) -> Callable[[TopicName], bool]:
        """DelayedCreatePartitions' condition: the topic has, in this broker's metadata
        cache, all of its ``written[topic]`` partitions, each with a leader."""
        return lambda topic: self.cache.all_partitions_have_leaders(topic, written[topic])

    def _complete_or_park(
        self,
        ctx: Context,
        timeout_ms: int,
        succeeded: Iterable[TopicName],
        done: Callable[[TopicName], bool],
        finish: Callable[[set[TopicName]], Message],
    ) -> Message | None:
        """Spec §4.2 step 5 and §6.1: answer now when nothing succeeded (validateOnly
        writes nothing, so it lands here) or ``timeout_ms <= 0`` (every succeeded topic
        then reported REQUEST_TIMED_OUT; the work goes on), or when every succeeded topic
        is already ``done``; otherwise park the request until ``done`` holds for each of
        them (``_poke``, on every UpdateMetadata) or the timeout passes (those still not
        done: REQUEST_TIMED_OUT)."""
        topics = set(succeeded)
        if not topics:
            return finish(set())
        if timeout_ms <= 0:
            return finish(topics)
        waiting = {t for t in topics if not done(t)}
        if not waiting:
            return finish(set())
        self._next_op += 1
        op = self._next_op
        self._parked[op] = _Parked(ctx.defer(), waiting, done, finish)
        self.trace("event", "admin_request_parked", operation=op, topics=len(waiting))
        self.start_soon(self._purgatory_timer, op, timeout_ms / 1000)
        return None

    async def _purgatory_timer(self, op: int, seconds: float) -> None:
        await self.clock.sleep(seconds)
        self.send_self(PurgatoryExpired(operation=op))

    def _poke(self, topics: set[TopicName]) -> None:
        for op in sorted(self._parked):
            parked = self._parked[op]
            waiting = parked.waiting
            # A set intersection walks the smaller side: an UpdateMetadata of a few topics
            # does not walk every topic a big request still waits for (nor the reverse).
            waiting -= {topic for topic in topics & waiting if parked.done(topic)}
            if not waiting:
                del self._parked[op]
                self.trace("event", "admin_request_completed", operation=op)
                parked.reply.send(self, parked.finish(set()))

    def _expire(self, op: int) -> None:
        parked = self._parked.pop(op, None)
        if parked is not None:
            self.trace("event", "admin_request_expired", operation=op, topics=len(parked.waiting))
            parked.reply.send(self, parked.finish(set(parked.waiting)))


def _topic_error(name: TopicName, code: ErrorCode, message: str | None) -> CreateTopicResult:
    return CreateTopicResult(name=name, error_code=code, error_message=message)


def _creation_error(
    name: TopicName, exc: KafkaApiError | AdminOperationError | ConfigError | StoreError
) -> CreateTopicResult:
    """A topic's CreateTopics error: NODEEXISTS on its write is TOPIC_ALREADY_EXISTS, a
    config error INVALID_CONFIG; an unknown server error carries no message."""
    if isinstance(exc, NodeExistsError):
        return _topic_error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    code = error_code_for(exc) if not isinstance(exc, ConfigError) else ErrorCode.INVALID_CONFIG
    message = None if code is ErrorCode.UNKNOWN_SERVER_ERROR else str(exc)
    return _topic_error(name, code, message)


def _not_controller(msg: _AdminRequest) -> Message:
    text = "This is not the correct controller for this cluster."
    match msg:
        case CreateTopicsRequestData():
            return CreateTopicsResponseData(
                topics=tuple(
                    _topic_error(t.name, ErrorCode.NOT_CONTROLLER, text) for t in msg.topics
                )
            )
        case CreatePartitionsRequestData():
            return CreatePartitionsResponseData(
                results=tuple(
                    TopicErrorResult(
                        name=t.name, error_code=ErrorCode.NOT_CONTROLLER, error_message=text
                    )
                    for t in msg.topics
                )
            )
        case DeleteTopicsRequestData():
            return _delete_refused(msg, ErrorCode.NOT_CONTROLLER)
        case _:
            assert_never(msg)


def _delete_refused(req: DeleteTopicsRequestData, code: ErrorCode) -> DeleteTopicsResponseData:
    """The same error for every entry, as sent (name and id), nothing done."""
    return DeleteTopicsResponseData(
        topics=tuple(
            DeleteTopicResult(name=t.name, topic_id=t.topic_id, error_code=code) for t in req.topics
        )
    )


def _wire_type(type_: object) -> WireConfigValueType:
    if type_ is None:
        return WireConfigValueType.UNKNOWN
    try:
        return WireConfigValueType[str(type_).upper()]
    except KeyError:
        return WireConfigValueType.UNKNOWN


__all__ = [
    "BROKER_ACTOR",
    "Broker",
    "BrokerSettings",
    "BrokerStatus",
    "BrokerStatusRequest",
    "broker_node_id",
    "broker_ref",
]
