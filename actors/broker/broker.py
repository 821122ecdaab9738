"""The broker actor: Kafka's ``KafkaServer``, one per emulated Kafka broker.

One ``Broker`` (actor ``broker`` on node ``broker-<id>``). At start-up it follows
``KafkaServer.startup``'s order: store session, top-level paths, cluster id, log manager,
**registration of ``/brokers/ids/<id>``** (its czxid is the broker epoch), then the
controller, then the controlled-shutdown actor. It then serves Kafka's requests through
the components it owns, each named after Kafka's:

* ``KafkaApis`` (``actors.broker.kafka_apis``): each request to its handler; Metadata
  from the ``MetadataCache``; admin requests forwarded to the active
  controller's broker when this one's controller is not active;
* ``ReplicaManager`` (``actors.broker.replica_manager``): the controller's LeaderAndIsr,
  UpdateMetadata and StopReplica, fenced by controller and broker epoch;
* ``AdminManager`` (``actors.broker.admin_manager``): CreateTopics, CreatePartitions,
  DeleteTopics, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
* the ``/config/changes`` watch (``DynamicConfigManager``): a topic's changed config
  applied to its partitions here (``ReplicaManager.topic_config_changed``), the dynamic
  broker configs to the running actors (``_broker_config_changed``);
* ``DelayedOperationPurgatory`` (``actors.broker.purgatory``): the admin answers that
  wait for the metadata cache to show their outcome.
* the data plane: Produce, Fetch, ListOffsets and OffsetForLeaderEpoch through the
  ``ReplicaManager`` (with its ``Partition``s and delayed requests,
  ``actors.broker.delayed_data``), InitProducerId through the ``ProducerIdManager``.
* ``Replication`` (``actors.broker.replication``): the replica fetchers of the
  partitions it follows and the AlterIsr changes of those it leads, plugged into the
  ``ReplicaManager`` as its ``ReplicationHooks``.

They are components, not actors: they run on the broker's one task, take their requests
from its one mailbox, and their state is the broker's private state. Timers and helper
tasks only enqueue (``PurgatoryExpired``, ``DelayedDataExpired``, ``BrokerEpochChanged``).
A new API is added the same way: a ``case`` in ``KafkaApis.handle`` and the component
that owns its state. The group coordinator is an actor of its own on the broker's node
(``actors.group``, Kafka's ``GroupCoordinator``): ``KafkaApis`` relays the group
requests to it and tells it of the ``__consumer_offsets`` partitions the broker gains
and loses; it appends its records and reads them back through this broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import structlog

from actors.admin import (
    GROUP_METADATA_TOPIC_NAME,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    check_thread_pool_resize,
)
from actors.admin.configs import to_text
from actors.broker.admin_manager import DEFAULT_ENTITY, AdminManager
from actors.broker.controlled_shutdown import ControlledShutdownActor
from actors.broker.kafka_apis import KafkaApis
from actors.broker.metadata_cache import MetadataCache
from actors.broker.names import (
    BROKER_ACTOR,
    CONTROLLER_ACTOR,
    INTERNAL_LISTENER,
    LOG_MANAGER_ACTOR,
    broker_node_id,
    broker_ref,
)
from actors.broker.producer_ids import ProducerIdManager
from actors.broker.purgatory import DelayedOperationPurgatory
from actors.broker.replica_fetcher import FetcherConfig
from actors.broker.replica_manager import LOG_CONFIGS, ReplicaManager
from actors.broker.replication import Replication
from actors.controller.controller import ControllerConfig, KafkaController
from actors.group.coordinator import GroupConfig, GroupCoordinator
from actors.log.disk import Disk
from actors.log.manager import DEFAULT_MAX_OPEN_LOGS, LogManager
from actors.log.partition_log import LogConfig
from actors.log.records import TimestampType
from actors.runtime.actor import Actor, Context
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from actors.zk.watch import ChildWatch, StateCallbacks, ZkConnection
from protocol import zkdata
from protocol.base import ActorRef, Message
from protocol.broker import (
    BrokerEpochChanged,
    BrokerMetrics,
    BrokerMetricsRequest,
    BrokerStatus,
    BrokerStatusRequest,
    CompleteDelayedData,
    ConfigChangesSeen,
    DelayedDataExpired,
    ElectionAnswered,
    PurgatoryExpired,
)
from protocol.control import (
    Endpoint,
    SecurityProtocol,
    TopicPartition,
)
from protocol.controller import DefaultUncleanLeaderElection, EnableTopicUncleanLeaderElection
from protocol.errors import StoreError
from protocol.ids import BrokerId, ControllerEpoch, TopicName
from protocol.log import (
    CheckpointBrokerMetadata,
    LogDefaultsChanged,
    LogDirFailed,
    LogStartsAdvanced,
)

log = structlog.get_logger("kemu.server")  # Kafka's kafka.server.KafkaServer, in server.log

_LOG_DEFAULTS: Final = LOG_CONFIGS - {"segment.jitter.ms"}
"""The topic log configs whose broker defaults the log manager takes (``_log_config``'s;
a log's jitter is drawn from its topic's own ``segment.jitter.ms``)."""


@dataclass(frozen=True)
class BrokerSettings:
    broker_id: BrokerId
    log_dirs: tuple[Path, ...]
    host: str = "127.0.0.1"
    port: int = 9092
    rack: str | None = None
    config: BrokerConfig = field(default_factory=BrokerConfig)
    disk: Disk | None = None  # what the log manager's file operations go through (tests: faults)
    max_open_logs: int = DEFAULT_MAX_OPEN_LOGS  # the log manager's (open_logs_budget)
    internal_endpoint: Callable[[], tuple[str, int]] | None = None
    """Where the other brokers reach this one's node (``kemu broker run``): registered as
    the listener ``INTERNAL_LISTENER`` after the Kafka one, read when the broker
    registers (its node listens by then). None: the brokers know each other's addresses
    from their launcher, and the registration holds the Kafka listener only."""


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
        self.cache = MetadataCache()
        self.purgatory = DelayedOperationPurgatory(self)
        self.replica_manager = ReplicaManager(self)
        self.admin_manager = AdminManager(self, self.purgatory)
        self.producer_ids = ProducerIdManager(self)
        self.replication = Replication(
            self,
            self.broker_id,
            log_manager=ActorRef(broker_node_id(self.broker_id), LOG_MANAGER_ACTOR),
            fetcher_config=FetcherConfig.of(self.config),
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
        )
        self.replica_manager.hooks = self.replication
        self.offsets_topic_partitions = self.config.offsets_topic_num_partitions
        """``__consumer_offsets``' partition count, fixed at start-up as Kafka's
        ``GroupMetadataManager`` fixes it: the topic's, else
        ``offsets.topic.num.partitions``."""
        self.last_config_change = -1
        """The sequence number of the last ``/config/changes`` notification processed
        (``ZkNodeChangeNotificationListener.lastExecutedChange``)."""
        self.apis = KafkaApis(
            self, self.replica_manager, self.admin_manager, self.purgatory, self.producer_ids
        )

    @property
    def controller_epoch(self) -> ControllerEpoch:
        """The highest controller epoch seen in a control request."""
        return self.replica_manager.controller_epoch

    @property
    def leader_epochs(self) -> dict[TopicPartition, int]:
        """The leader epoch of each partition this broker hosts."""
        return self.replica_manager.leader_epochs

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
        endpoints: tuple[Endpoint, ...] = (endpoint,)
        if self.settings.internal_endpoint is not None:
            host, port = self.settings.internal_endpoint()
            endpoints += (
                Endpoint(
                    host=host,
                    port=port,
                    listener=INTERNAL_LISTENER,
                    security_protocol=SecurityProtocol.PLAINTEXT,
                ),
            )
        return zkdata.BrokerRegistration(
            endpoints=endpoints, rack=self.settings.rack, timestamp=self.clock.wall_ms()
        )

    @property
    def session(self) -> StoreSession:
        """The current store session (a new one after an expiry), shared with the
        controller through the broker's ``ZkConnection``."""
        if self.zk is None:
            raise RuntimeError(f"broker {self.broker_id} has no store connection yet")
        return self.zk.session

    async def on_start(self) -> None:
        log.info("starting", broker_id=self.broker_id)  # KafkaServer: "starting"
        self.zk = ZkConnection(
            self.store,
            name=self.node.node_id,
            session_timeout=self.config.zookeeper_session_timeout_ms / 1000,
            clock=self.clock,
        )
        await self.node.task_group.start(self.zk.run)
        await kafka_zk.create_top_level_paths(self.session)
        self.cluster_id = await kafka_zk.get_or_create_cluster_id(self.session, self.node.ids)
        # DynamicBrokerConfig.initialize: the stored dynamic configs, before any component
        # reads the config.
        self.config = await self._dynamic_config() or self.config
        self.replication.fetcher_config = FetcherConfig.of(self.config)  # num.replica.fetchers
        await self.node.spawn(
            LogManager(
                self.settings.log_dirs,
                broker_id=self.broker_id,
                cluster_id=self.cluster_id,
                disk=self.settings.disk,
                segment_delete_delay=self.config.log_segment_delete_delay_ms / 1000,
                initial_task_delay=self.config.log_initial_task_delay_ms / 1000,
                retention_check_interval=self.config.log_retention_check_interval_ms / 1000,
                cleaner_backoff=(
                    self.config.log_cleaner_backoff_ms / 1000
                    if self.config.log_cleaner_enable
                    else None
                ),
                log_config=self._log_config(),
                max_open_logs=self.settings.max_open_logs,
                failure_listener=self.ref,
                name=LOG_MANAGER_ACTOR,
            )
        )
        await self._start_group_coordinator()
        # The replica fetchers and the AlterIsrManager (ReplicaManager.startup), before
        # the registration makes this broker a replica the controller may talk to.
        await self.replication.start(self.replica_manager)
        registration = self.registration()
        await self.register(registration)
        # KafkaServer.checkpointBrokerMetadata, after registerBroker: a broker whose id
        # another one registered first has written nothing to its log dirs.
        await self.ask(self.log_manager_ref, CheckpointBrokerMetadata())
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
        # Spawned last, so that on a graceful stop its controlled shutdown runs first (as
        # KafkaServer.shutdown), while the controller, the log manager and this broker serve.
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

        self._watch_config_changes()

    # ------------------------------------------------------------------ config changes

    def _watch_config_changes(self) -> None:
        """``DynamicConfigManager.startup``: watch ``/config/changes`` (and read it again
        in every new store session), and process what is there now."""
        assert self.zk is not None

        def seen() -> None:
            self.send_self(ConfigChangesSeen())

        self.zk.register_children(zkdata.CONFIG_CHANGES_PATH, ChildWatch(seen))
        self.zk.register_state("config-changes", StateCallbacks(after=seen))
        seen()

    async def _process_config_changes(self) -> None:
        """``ZkNodeChangeNotificationListener.processNotifications``: each notification
        newer than the last processed, in sequence order, re-reads its entity's config
        (``TopicConfigHandler.processConfigChanges`` for ``topics/<t>``,
        ``BrokerConfigHandler`` for ``brokers/<default>`` and ``brokers/<this id>``). Other
        entity types (other brokers, clients, users) have nothing to apply in kemu. Reading the
        children re-arms the watch; then the notifications created more than 15 minutes
        before the read are deleted (``purgeObsoleteNotifications``)."""
        names = await kafka_zk.config_change_names(self.session, watch=True)
        now_ms = self.clock.wall_ms()
        for name in names:
            sequence = int(name[len(zkdata.CONFIG_CHANGE_PREFIX) :])
            if sequence <= self.last_config_change:
                continue
            notification = await kafka_zk.get_config_change(self.session, name)
            self.last_config_change = sequence
            if notification is None:
                continue
            entity_type, _, entity = notification.entity_path.partition("/")
            if entity_type == zkdata.ConfigType.BROKER:
                if entity in (DEFAULT_ENTITY, str(self.broker_id)):
                    await self._broker_config_changed(entity, name)
                continue
            if entity_type != zkdata.ConfigType.TOPIC:
                continue
            topic = TopicName(entity)
            await self.replica_manager.topic_config_changed(topic)
            if await self._unclean_enabled(topic) and self._with_controller:
                self.tell(self.controller_ref, EnableTopicUncleanLeaderElection(topic=topic))
            self.trace(
                "event",
                "topic_config_applied",
                broker=self.broker_id,
                topic=topic,
                notification=name,
            )
        if names:
            purged = await kafka_zk.purge_obsolete_config_changes(self.session, now_ms, names)
            if purged:
                self.trace("event", "config_changes_purged", notifications=purged)

    async def _dynamic_config(self) -> BrokerConfig | None:
        """The static config with ``/config/brokers/<default>`` and ``/config/brokers/<id>``
        applied (``DynamicBrokerConfig.updateDefaultConfig`` / ``updateBrokerConfig``);
        None when the stored configs cannot be read or make no valid config (Kafka logs
        the error and keeps its config)."""
        try:
            default = await kafka_zk.get_entity_config(
                self.session, zkdata.ConfigType.BROKER, DEFAULT_ENTITY
            )
            own = await kafka_zk.get_entity_config(
                self.session, zkdata.ConfigType.BROKER, str(self.broker_id)
            )
            return self.settings.config.reconfigured(default, own)
        except (StoreError, ConfigError) as exc:
            log.warning("dynamic_config_not_applied", broker_id=self.broker_id, error=str(exc))
            return None

    async def _broker_config_changed(self, entity: str, notification: str) -> None:
        """``BrokerConfigHandler.processConfigChanges``: the broker's dynamic configs read
        again and applied to its running actors (``DynamicBrokerConfig.updateCurrentConfig``
        and its reconfigurables): the data plane's ``min.insync.replicas`` default, the log
        manager's topic log defaults and ``log.segment.delete.delay.ms``
        (``DynamicLogConfig``), the controller's ``unclean.leader.election.enable``, the
        replica fetcher manager's ``num.replica.fetchers`` (``DynamicThreadPool``, whose
        refusal of the new count keeps the whole config as it was)."""
        config = await self._dynamic_config()
        if config is None:
            return
        try:  # processReconfiguration: DynamicThreadPool.validateReconfiguration
            check_thread_pool_resize(
                "num.replica.fetchers",
                self.config.num_replica_fetchers,
                config.num_replica_fetchers,
            )
        except ConfigError as exc:  # Kafka logs it and keeps its whole config
            log.warning("dynamic_config_not_applied", broker_id=self.broker_id, error=str(exc))
            return
        old, self.config = self.config, config
        if config.num_replica_fetchers != old.num_replica_fetchers:
            self.replication.resize_fetchers(config)  # DynamicThreadPool.reconfigure
        self.replica_manager.broker_config_changed()
        defaults = tuple(
            (name, text)
            for name, value in config.topic_defaults().items()
            if name in _LOG_DEFAULTS and (text := to_text(value, TOPIC_CONFIGS[name].type))
        )
        await self.ask(
            self.log_manager_ref,
            LogDefaultsChanged(
                configs=defaults, segment_delete_delay_ms=config.log_segment_delete_delay_ms
            ),
        )
        unclean = config.unclean_leader_election_enable
        if unclean != old.unclean_leader_election_enable and self._with_controller:
            self.tell(self.controller_ref, DefaultUncleanLeaderElection(enabled=unclean))
        self.trace(
            "event",
            "broker_config_applied",
            broker=self.broker_id,
            entity=entity,
            notification=notification,
        )

    async def _unclean_enabled(self, topic: TopicName) -> bool:
        """The topic's ``unclean.leader.election.enable`` override reads true (Scala's
        ``toBoolean``: "true" in any case); a failed read is false."""
        try:
            config = await kafka_zk.get_topic_config(self.session, topic)
        except StoreError:
            return False
        return config.get("unclean.leader.election.enable", "").lower() == "true"

    async def _start_group_coordinator(self) -> None:
        """The group coordinator (``GroupCoordinator.startup``), before the registration
        makes this broker one the controller sends LeaderAndIsr to."""
        offsets = await kafka_zk.get_topic_assignment(
            self.session, TopicName(GROUP_METADATA_TOPIC_NAME)
        )
        if offsets:
            self.offsets_topic_partitions = len(offsets)
        config = GroupConfig.of(self.config, offsets_topic_partitions=self.offsets_topic_partitions)
        await self.node.spawn(GroupCoordinator(config))

    def _log_config(self) -> LogConfig:
        """The broker's defaults of the topic log configs (``KafkaServer.copyKafkaConfigToLog``)."""
        config = self.config
        return LogConfig(
            segment_bytes=config.log_segment_bytes,
            segment_ms=config.log_roll_time_millis,
            max_index_size=config.log_index_size_max_bytes,
            index_interval_bytes=config.log_index_interval_bytes,
            max_message_bytes=config.message_max_bytes,
            timestamp_type=(
                TimestampType.LOG_APPEND_TIME
                if config.log_message_timestamp_type == "LogAppendTime"
                else TimestampType.CREATE_TIME
            ),
            timestamp_difference_max_ms=config.log_message_timestamp_difference_max_ms,
            retention_ms=config.log_retention_time_millis,
            retention_bytes=config.log_retention_bytes,
            file_delete_delay_ms=config.log_segment_delete_delay_ms,
            delete="delete" in config.log_cleanup_policy,
            compact="compact" in config.log_cleanup_policy,
            delete_retention_ms=config.log_cleaner_delete_retention_ms,
            min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=config.log_cleaner_max_compaction_lag_ms,
            min_cleanable_ratio=config.log_cleaner_min_cleanable_ratio,
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
        log.info("registered", broker_id=self.broker_id, broker_epoch=self.broker_epoch)

    async def on_stop(self) -> None:
        log.info("shutting_down", broker_id=self.broker_id)
        if self.zk is not None:
            await self.zk.session.close()

    # ------------------------------------------------------------------ dispatch

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        """The broker's own messages here; every Kafka request through ``KafkaApis``."""
        if self.replication.handle(msg):
            return None
        match msg:
            case PurgatoryExpired(operation=op):
                self.purgatory.expire(op)
                return None
            case ElectionAnswered(operation=op, results=results):
                self.apis.on_election_answered(op, results)
                return None
            case DelayedDataExpired(operation=op):
                await self.replica_manager.expire_delayed(op)
                return None
            case CompleteDelayedData(partitions=partitions):
                await self.replica_manager.complete_delayed_now(partitions)
                return None
            case BrokerStatusRequest():
                return self._status()
            case BrokerMetricsRequest():
                gauges, meters = self.replica_manager.metrics()
                return BrokerMetrics(broker_id=self.broker_id, gauges=gauges, meters=meters)
            case LogDirFailed():
                await self._handle_log_dir_failure(msg)
                return None
            case LogStartsAdvanced(starts=starts):
                self.replica_manager.on_log_starts(starts)
                return None
            case ConfigChangesSeen():
                await self._process_config_changes()
                return None
            case BrokerEpochChanged(epoch=epoch):
                self.broker_epoch = epoch
                self.trace("event", "broker_reregistered", broker=self.broker_id, epoch=epoch)
                return None
        return await self.apis.handle(msg, ctx)

    async def _handle_log_dir_failure(self, failed: LogDirFailed) -> None:
        """``ReplicaManager.handleLogDirFailure``: the directory's partitions go offline
        here, then a ``/log_dir_event_notification`` znode tells the controller, which asks
        this broker about all its replicas with a LeaderAndIsr (those in the directory
        answer KAFKA_STORAGE_ERROR and go offline, their leadership moves). No notification
        when no directory is left: the broker halts first, and its session's end tells the
        controller."""
        offline = self.replica_manager.handle_log_dir_failure(failed.log_dir)
        self.trace(
            "event",
            "partitions_offline",
            log_dir=failed.log_dir,
            partitions=[f"{tp.topic}-{tp.partition}" for tp in offline],
        )
        if failed.last or self.zk is None:
            return
        try:
            sequence = await kafka_zk.propagate_log_dir_event(self.session, self.broker_id)
        except StoreError as exc:
            # Kafka's write would throw on the failure-handler thread; the event is lost
            # there too, and the replicas stay offline until the next LeaderAndIsr.
            self.trace("error", "log_dir_event_not_propagated", detail=str(exc))
            return
        self.trace("event", "log_dir_event_propagated", log_dir=failed.log_dir, sequence=sequence)

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


__all__ = [
    "BROKER_ACTOR",
    "CONTROLLER_ACTOR",
    "LOG_MANAGER_ACTOR",
    "Broker",
    "BrokerSettings",
    "BrokerStatus",
    "BrokerStatusRequest",
    "broker_node_id",
    "broker_ref",
]
