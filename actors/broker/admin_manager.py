"""The admin requests only the active controller's broker handles: Kafka's ``AdminManager``.

CreateTopics (``createTopics``), CreatePartitions (``createPartitions``) and DeleteTopics
(``deleteTopics``) validate in Kafka's order, write the store (``/brokers/topics/<t>``,
``/admin/delete_topics/<t>``) and leave the rest to the controller, which watches those
paths; the answer then waits in the broker's ``DelayedOperationPurgatory`` until the
broker's metadata cache shows the result (every new partition with a leader, or the
topic gone), or the request's timeout. DescribeConfigs (``describeConfigs``) answers for
topics from their config znodes and the broker's defaults. AlterConfigs and
IncrementalAlterConfigs (``alterConfigs``, ``incrementalAlterConfigs``) are answered by
any broker: they write a topic's config znode and a change notification.

A component of the ``Broker`` actor, not an actor: it runs on the broker's task, and
``KafkaApis`` hands it only requests this broker's controller is active for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import msgspec
import structlog

from actors.admin import (
    BROKER_CONFIGS,
    QUEUED_FOR_DELETION_MESSAGE,
    AdminOperationError,
    BrokerConfigEntry,
    BrokerMetadata,
    ConfigEntry,
    ConfigError,
    ConfigOp,
    RequestedTopic,
    TopicCreation,
    apply_topic_config_ops,
    broker_config_entries,
    check_cluster_replicas,
    check_dynamic_broker_configs,
    check_request_replicas,
    check_thread_pool_resize,
    check_topic_config,
    dynamic_default_entries,
    plan_create_topic,
    requested_thread_count,
    topic_config_entries,
    validate_create_partitions,
)
from actors.admin import topics as topic_rules
from actors.broker.purgatory import DelayedOperationPurgatory
from actors.runtime.actor import Context
from actors.zk import kafka_zk
from protocol import zkdata
from protocol.base import Message
from protocol.errors import (
    ErrorCode,
    KafkaApiError,
    NodeExistsError,
    NoNodeError,
    StoreError,
    error_code_for,
)
from protocol.ids import TopicName
from protocol.kafka_api import (
    AlterConfigOp,
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterConfigsResponseData,
    AlterConfigsResult,
    ConfigResource,
    ConfigResourceType,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicResult,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
    TopicErrorResult,
)
from protocol.kafka_api import ConfigEntry as WireConfigEntry
from protocol.kafka_api import ConfigSynonym as WireConfigSynonym
from protocol.kafka_api import ConfigValueType as WireConfigValueType

if TYPE_CHECKING:
    from actors.broker.broker import Broker

log = structlog.get_logger("kemu.broker.admin_manager")


class AdminManager:
    """The admin requests of ``broker``; their delayed answers wait in ``purgatory``."""

    def __init__(self, broker: Broker, purgatory: DelayedOperationPurgatory) -> None:
        self._broker = broker
        self._purgatory = purgatory

    async def describe_configs(
        self, req: DescribeConfigsRequestData
    ) -> DescribeConfigsResponseData:
        """Each topic's configs (those asked for, or all): its overrides, then the broker's
        defaults, each with its source. A broker's (``_describe_broker``). Other resource
        types are refused (INVALID_REQUEST),
        a name that is not a legal topic name is INVALID_TOPIC_EXCEPTION (``Topic.validate``
        comes first in ``AdminManager.describeConfigs``), a topic the metadata cache does not
        hold is UNKNOWN_TOPIC_OR_PARTITION with no message, as Kafka answers it."""
        results = []
        for res in req.resources:
            if res.resource_type == ConfigResourceType.BROKER:
                results.append(self._describe_broker(res))
                continue
            if res.resource_type != ConfigResourceType.TOPIC:
                results.append(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="kemu describes topic and broker configs, not resource"
                        f" type {res.resource_type}",
                    )
                )
                continue
            topic = TopicName(res.resource_name)
            try:
                topic_rules.validate_topic_name(topic)  # Topic.validate, before any lookup
            except KafkaApiError as exc:
                results.append(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        error_code=exc.code,
                        error_message=str(exc),
                    )
                )
                continue
            if not self._broker.cache.contains(topic):  # AdminManager.describeConfigs: no message
                results.append(
                    DescribeConfigsResult(
                        resource_type=res.resource_type,
                        resource_name=res.resource_name,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=None,
                    )
                )
                continue
            overrides = await kafka_zk.get_topic_config(self._broker.session, topic)
            entries = [
                _wire_entry(e)
                for e in topic_config_entries(overrides, self._broker.config)
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

    def _describe_broker(self, res: ConfigResource) -> DescribeConfigsResult:
        """``AdminManager.describeConfigs`` of a broker: this broker's id, every broker
        config kemu has (those asked for, or all) with its source, synonyms and whether it
        is read-only; the empty name, the cluster's dynamic defaults
        (``currentDynamicDefaultConfigs``); another name, INVALID_REQUEST with
        Kafka's message. Kafka lists every config of ``KafkaConfig``; kemu lists its own."""
        name = res.resource_name
        entries = dynamic_default_entries(self._broker.config)
        if name:
            if not name.lstrip("-").isdigit():
                return _describe_error(res, f"Broker id must be an integer, but it is: {name}")
            if int(name) != self._broker.broker_id:
                return _describe_error(
                    res,
                    f"Unexpected broker id, expected {self._broker.broker_id} or empty string,"
                    f" but received {name}",
                )
            entries = broker_config_entries(self._broker.config)
        keys = res.configuration_keys
        return DescribeConfigsResult(
            resource_type=res.resource_type,
            resource_name=name,
            configs=tuple(_wire_entry(e) for e in entries if keys is None or e.name in keys),
        )

    async def alter_configs(
        self, req: AlterConfigsRequestData | IncrementalAlterConfigsRequestData
    ) -> AlterConfigsResponseData | IncrementalAlterConfigsResponseData:
        """``AdminManager.alterConfigs`` and ``incrementalAlterConfigs``: each resource on
        its own, answered with its own error. A topic's new overrides (the request's whole
        set, or its operations applied to the stored ones) are checked as
        ``LogConfig.validate`` checks them, then written with a change notification
        (``AdminZkClient.changeTopicConfig``) unless ``validate_only``; every broker
        applies them when it sees the notification (``ConfigChangeListener``). A resource
        named twice counts once, with its last entry (Kafka's ``toMap``)."""
        incremental = isinstance(req, IncrementalAlterConfigsRequestData)
        last = {(r.resource_type, r.resource_name): r for r in req.resources}
        results = tuple(
            [await self._alter_one(res, req.validate_only, incremental) for res in last.values()]
        )
        if incremental:
            return IncrementalAlterConfigsResponseData(results=results)
        return AlterConfigsResponseData(results=results)

    async def _alter_one(
        self, res: AlterConfigsResource, validate_only: bool, incremental: bool
    ) -> AlterConfigsResult:
        """One resource's outcome, as Kafka's catch blocks make it: a ``ConfigException``
        is INVALID_REQUEST "Invalid config value for resource <resource>: <text>"; any
        other error its code and message (none for UNKNOWN_SERVER_ERROR)."""
        code, message = ErrorCode.NONE, None
        try:
            await self._alter_resource(res, validate_only, incremental)
        except ConfigError as exc:
            code = ErrorCode.INVALID_REQUEST
            message = f"Invalid config value for resource {config_resource_text(res)}: {exc}"
        except (KafkaApiError, StoreError) as exc:
            code = error_code_for(exc)
            message = None if code is ErrorCode.UNKNOWN_SERVER_ERROR else str(exc)
        return AlterConfigsResult(
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            error_code=code,
            error_message=message,
        )

    async def _alter_resource(
        self, res: AlterConfigsResource, validate_only: bool, incremental: bool
    ) -> None:
        check_alter_entries(res, incremental=incremental)
        if res.resource_type == ConfigResourceType.TOPIC:
            topic = TopicName(res.resource_name)
            if incremental:
                stored = await kafka_zk.get_topic_config(self._broker.session, topic)
                config = apply_topic_config_ops(
                    stored, [(c.name, c.value, ConfigOp(c.operation)) for c in res.configs]
                )
            else:
                config = {c.name: c.value for c in res.configs if c.value is not None}
            if not self._broker.cache.contains(topic):
                raise KafkaApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
                )
            check_topic_config(config)
            if not validate_only:
                notification = await kafka_zk.change_topic_config(
                    self._broker.session, topic, config
                )
                self._broker.trace(
                    "event", "topic_config_changed", topic=topic, notification=notification
                )
        elif res.resource_type == ConfigResourceType.BROKER:
            self._check_broker_id(res.resource_name)
            await self._alter_broker(res, validate_only, incremental)
        elif incremental and res.resource_type == ConfigResourceType.BROKER_LOGGER:
            self._check_broker_id(res.resource_name)
            refuse_broker_loggers(res)
        else:
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST,
                "AlterConfigs is only supported for topics and brokers, but resource type is"
                f" {_resource_type_name(res.resource_type)}",
            )

    async def _alter_broker(
        self, res: AlterConfigsResource, validate_only: bool, incremental: bool
    ) -> None:
        """``AdminManager.alterBrokerConfigs`` / its incremental twin: the new dynamic
        configs of this broker (its id) or of the cluster (the empty name, stored as
        ``<default>``): the request's whole set, or its operations applied to the stored
        ones. Checked as ``DynamicBrokerConfig.validate`` checks them: the replication
        quotas (``DynamicConfig.Broker``, stored for ``kafka-reassign-partitions
        --throttle``; kemu's replication does not enforce them) as LONGs of at least 0,
        every other name must be a broker config that 2.7 can change at run time, with a
        value of its type, and the broker's config with them applied must be valid
        (``KafkaConfig``'s "requirement failed: ..."). Then stored in
        ``/config/brokers/<id|<default>>`` with a change notification
        (``AdminZkClient.changeBrokerConfig``) unless
        ``validate_only``; every broker's config manager applies it."""
        entity = res.resource_name or DEFAULT_ENTITY
        if incremental:
            for c in res.configs:
                appending = c.operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT)
                if appending and c.name in REPLICATION_QUOTAS:
                    # KafkaConfig.configKeys has no quotas: its lookup throws
                    # NoSuchElementException, answered without a message.
                    raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"key not found: {c.name}")
                if appending and c.name not in BROKER_CONFIGS:
                    # A KafkaConfig key kemu does not model: almost all are not lists.
                    verb = "append" if c.operation == AlterConfigOp.APPEND else "subtract"
                    raise KafkaApiError(
                        ErrorCode.INVALID_REQUEST,
                        f"Config value {verb} is not allowed for config key: {c.name}",
                    )
            stored = await kafka_zk.get_entity_config(
                self._broker.session, zkdata.ConfigType.BROKER, entity
            )
            config = apply_topic_config_ops(  # prepareIncrementalConfigs, KafkaConfig's keys
                stored,
                [(c.name, c.value, ConfigOp(c.operation)) for c in res.configs],
                BROKER_CONFIGS,
            )
        else:
            config = {c.name: c.value for c in res.configs if c.value is not None}
        check_dynamic_broker_configs(
            {n: v for n, v in config.items() if n not in REPLICATION_QUOTAS}
        )
        for name, value in config.items():
            if name in REPLICATION_QUOTAS:
                check_quota_value(name, value)
        current, static = self._broker.config, self._broker.settings.config
        if res.resource_name:  # validatedKafkaProps, then processReconfiguration
            default, per_broker = dict(current.dynamic_default), config
        else:
            default, per_broker = config, dict(current.dynamic_broker)
        new = static.reconfigured(default, per_broker)
        try:  # processReconfiguration: the BrokerReconfigurables' validateReconfiguration
            name = "num.replica.fetchers"  # DynamicThreadPool
            count = requested_thread_count(name, new, default, per_broker)
            check_thread_pool_resize(name, current.num_replica_fetchers, count)
        except ConfigError as exc:
            log.info("dynamic_config_refused", resource=entity, error=str(exc))
            raise ConfigError("Invalid dynamic configuration") from exc
        if not validate_only:
            notification = await kafka_zk.change_entity_config(
                self._broker.session, zkdata.ConfigType.BROKER, entity, config
            )
            self._broker.trace(
                "event", "broker_config_changed", entity=entity, notification=notification
            )

    def _check_broker_id(self, name: str) -> None:
        """``AdminManager.getBrokerId``: empty (the cluster's default), or this broker's."""
        if not name:
            return
        try:
            broker_id = int(name)
        except ValueError:
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != self._broker.broker_id:
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self._broker.broker_id}, but received {name}",
            )

    async def create_topics(self, req: CreateTopicsRequestData, ctx: Context) -> Message | None:
        """As ``AdminManager.createTopics``: every topic is checked in request order (a
        topic planned earlier counts as existing for the later ones, as if written), then
        all planned topics are written at once (``kafka_zk.write_topics``); a write refused
        with NODEEXISTS is TOPIC_ALREADY_EXISTS, any other store error its own code. Unlike
        one write after the other, a later topic's collision check also counts an earlier
        topic whose write then failed (only a store failure mid-request can tell the two
        apart). The answer waits until every written topic's partitions have leaders
        (``DelayedCreatePartitions``). None means the answer comes later."""
        duplicates = topic_rules.duplicate_topics(t.name for t in req.topics)
        try:
            self._check_size(req, duplicates)
        except KafkaApiError as exc:  # ReplicationControlManager.validateTotalNumberOfPartitions
            return CreateTopicsResponseData(
                topics=tuple(_creation_error(t.name, exc) for t in req.topics)
            )
        existing = set(await kafka_zk.get_all_topics(self._broker.session))
        alive = [BrokerMetadata(b.id, b.rack) for b in self._broker.cache.alive_brokers()]
        results: dict[TopicName, CreateTopicResult] = {}
        written: dict[TopicName, int] = {}
        planned: list[tuple[TopicName, TopicCreation]] = []
        in_cache = set(self._broker.cache.topic_names())  # the loop does not await: it stays true
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
                    broker_config=self._broker.config,
                    rng=self._broker.rng,
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
                self._broker.session,
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
                num_partitions=len(plan.assignment),
                replication_factor=rf,
                configs=configs[overrides],
            )
            self._broker.trace(
                "event", "topic_written", topic=name, partitions=len(plan.assignment)
            )

        def finish(timed_out: set[TopicName]) -> CreateTopicsResponseData:
            out = []
            for topic in req.topics:
                result = results[topic.name]
                if topic.name in timed_out:
                    result = topic_error(
                        topic.name,
                        ErrorCode.REQUEST_TIMED_OUT,
                        "Timed out waiting for the topic's partitions to get leaders.",
                    )
                out.append(result)
            return CreateTopicsResponseData(topics=tuple(out))

        return self._purgatory.try_complete_else_watch(
            ctx, req.timeout_ms, written, self._has_leaders(written), finish
        )

    def _check_size(self, req: CreateTopicsRequestData, duplicates: frozenset[str]) -> None:
        """kemu's bounds on a whole CreateTopics, before any topic is planned
        (docs/limits.md): the replicas of all its topics against
        ``kemu.max.replicas.per.request``, and with those the cluster already holds against
        ``kemu.max.replicas.per.cluster``. Raises POLICY_VIOLATION."""
        config = self._broker.config
        adding = check_request_replicas(
            (
                RequestedTopic(
                    t.num_partitions,
                    t.replication_factor,
                    tuple(len(a.broker_ids) for a in t.assignments),
                )
                for t in req.topics
                if t.name not in duplicates
            ),
            num_partitions=config.num_partitions,
            replication_factor=config.default_replication_factor,
            limit=config.kemu_max_replicas_per_request,
        )
        check_cluster_replicas(
            self._broker.cache.replica_count(), adding, config.kemu_max_replicas_per_cluster
        )

    async def create_partitions(
        self, req: CreatePartitionsRequestData, ctx: Context
    ) -> Message | None:
        """As ``KafkaApis.handleCreatePartitionsRequest`` and
        ``AdminManager.createPartitions``: a topic named twice is INVALID_REQUEST, one queued
        for deletion INVALID_TOPIC_EXCEPTION; a name no topic can have is
        UNKNOWN_TOPIC_OR_PARTITION (Kafka looks such a name up in ZooKeeper and finds
        nothing; for ``.``, ``..`` and the empty name its ZooKeeper client refuses the path
        and the whole request fails with UNKNOWN_SERVER_ERROR, which kemu does not copy);
        each other topic's new partitions are validated against its assignment, the
        registered brokers and kemu's replica bounds, then its whole assignment is written;
        the answer waits until its partitions have leaders. None means the answer comes
        later."""
        duplicates = topic_rules.duplicate_topics(t.name for t in req.topics)
        registered = [
            BrokerMetadata(b, r.registration.rack)
            for b, r in (await kafka_zk.get_brokers(self._broker.session)).items()
        ]
        queued = set(await kafka_zk.get_topic_deletions(self._broker.session))
        config = self._broker.config
        held = self._broker.cache.replica_count()
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
            if topic.name in queued:
                results[topic.name] = TopicErrorResult(
                    name=topic.name,
                    error_code=ErrorCode.INVALID_TOPIC_EXCEPTION,
                    error_message=QUEUED_FOR_DELETION_MESSAGE,
                )
                continue
            try:
                existing = {}
                if topic_rules.is_valid_topic_name(topic.name):
                    existing = (
                        await kafka_zk.get_topic_assignment(self._broker.session, topic.name) or {}
                    )
                added = validate_create_partitions(
                    topic.name,
                    existing,
                    topic.count,
                    topic.assignments,
                    registered,
                    max_replicas=config.kemu_max_replicas_per_request,
                )
                adding = sum(len(replicas) for replicas in added.values())
                check_cluster_replicas(held, adding, config.kemu_max_replicas_per_cluster)
                held += adding
                if not req.validate_only:
                    full = {p: a.replicas for p, a in existing.items()}
                    full.update(added)
                    await kafka_zk.set_topic_assignment(self._broker.session, topic.name, full)
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

        return self._purgatory.try_complete_else_watch(
            ctx, req.timeout_ms, written, self._has_leaders(written), finish
        )

    async def delete_topics(self, req: DeleteTopicsRequestData, ctx: Context) -> Message | None:
        """In the order of Kafka's ``KafkaApis.handleDeleteTopicsRequest`` (the controller
        check is ``KafkaApis``') and ``AdminManager.deleteTopics``: deletion disabled →
        TOPIC_DELETION_DISABLED for every topic (the wire adapter says INVALID_REQUEST to
        clients older than v3); per topic: a topic not in this broker's metadata cache or
        without ``/brokers/topics/<t>`` →
        UNKNOWN_TOPIC_OR_PARTITION, a store failure → UNKNOWN_SERVER_ERROR; the others are
        marked for deletion (an existing marker is fine: several callers can wait for the
        same deletion) and the answer waits until they leave the cache. Internal topics
        may be deleted this way. Kafka sends error codes only, no messages.

        A topic named twice is marked once; as in Kafka 2.7 (whose result collection keeps
        duplicates and sets each outcome on the first entry only), its first entry gets
        the outcome and later ones stay NONE. None means the answer comes later."""
        if not self._broker.config.delete_topic_enable:
            return delete_refused(req, ErrorCode.TOPIC_DELETION_DISABLED)
        entries: list[DeleteTopicResult] = []
        first: dict[TopicName, int] = {}  # each topic to delete -> its first entry
        for name in req.topics:
            code = ErrorCode.NONE
            if not self._broker.cache.contains(name):
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                first.setdefault(name, len(entries))
            entries.append(DeleteTopicResult(name=name, error_code=code))
        outcomes = await self._mark_for_deletion(list(first))

        def finish(timed_out: set[TopicName]) -> DeleteTopicsResponseData:
            out = list(entries)
            for topic, code in outcomes.items():
                if topic in timed_out:
                    code = ErrorCode.REQUEST_TIMED_OUT
                out[first[topic]] = msgspec.structs.replace(out[first[topic]], error_code=code)
            return DeleteTopicsResponseData(topics=tuple(out))

        marked = [t for t, code in outcomes.items() if code is ErrorCode.NONE]
        return self._purgatory.try_complete_else_watch(
            ctx,
            req.timeout_ms,
            marked,
            lambda topic: not self._broker.cache.contains(topic),
            finish,
        )

    async def _mark_for_deletion(self, topics: list[TopicName]) -> dict[TopicName, ErrorCode]:
        """``AdminZkClient.deleteTopic`` of each topic: ``/admin/delete_topics/<t>`` for a
        topic whose ``/brokers/topics/<t>`` exists; an existing marker is success. The
        topic znodes are read as one pipelined batch, then the markers created as another
        (one store round trip for all, not two per topic); a marker refused for a missing
        parent is created alone with its parents."""
        session = self._broker.session
        outcomes: dict[TopicName, ErrorCode] = {}
        try:
            found = await session.get_each([(zkdata.topic_path(t), False) for t in topics])
        except StoreError as exc:
            found = [exc] * len(topics)
        to_mark: list[TopicName] = []
        for topic, read in zip(topics, found, strict=True):
            if isinstance(read, NoNodeError):
                outcomes[topic] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif isinstance(read, StoreError):
                outcomes[topic] = self._marking_failed(topic, read)
            else:
                to_mark.append(topic)
        try:
            created = await session.create_each(
                [(zkdata.delete_topic_path(t), b"") for t in to_mark]
            )
        except StoreError as exc:
            created = [exc] * len(to_mark)
        for topic, outcome in zip(to_mark, created, strict=True):
            if isinstance(outcome, NoNodeError):  # no /admin/delete_topics yet
                try:
                    await session.create(zkdata.delete_topic_path(topic), make_parents=True)
                except StoreError as exc:
                    outcome = exc
                else:
                    outcome = zkdata.delete_topic_path(topic)
            if isinstance(outcome, NodeExistsError):
                self._broker.trace("event", "topic_already_marked_for_deletion", topic=topic)
                outcomes[topic] = ErrorCode.NONE
            elif isinstance(outcome, StoreError):
                outcomes[topic] = self._marking_failed(topic, outcome)
            else:
                self._broker.trace("event", "topic_marked_for_deletion", topic=topic)
                outcomes[topic] = ErrorCode.NONE
        return {topic: outcomes[topic] for topic in topics}

    def _marking_failed(self, topic: TopicName, exc: StoreError) -> ErrorCode:
        self._broker.trace("error", "topic_deletion_marking_failed", topic=topic, detail=repr(exc))
        return ErrorCode.UNKNOWN_SERVER_ERROR

    def _check_policy(self, topic: str) -> None:
        """``create.topic.policy.class.name``: kemu knows no Java classes; a configured
        policy name refuses every creation with POLICY_VIOLATION naming it, so that the
        hook's place in the validation order is observable."""
        policy = self._broker.config.create_topic_policy_class_name
        if policy:
            raise KafkaApiError(
                ErrorCode.POLICY_VIOLATION, f"Topic {topic} rejected by policy {policy}"
            )

    def _created_configs(self, overrides: dict[str, str]) -> tuple[WireConfigEntry, ...]:
        """A created topic's configs, as CreateTopics v5+ returns them."""
        return tuple(_wire_entry(e) for e in topic_config_entries(overrides, self._broker.config))

    def _has_leaders(self, written: dict[TopicName, int]) -> Callable[[TopicName], bool]:
        """``DelayedCreatePartitions``' condition: the topic has, in this broker's metadata
        cache, all of its ``written[topic]`` partitions, each with a leader."""
        return lambda topic: self._broker.cache.all_partitions_have_leaders(topic, written[topic])


def _resource_type_name(resource_type: int) -> str:
    """``ConfigResource.Type.forId``'s name (UNKNOWN for an id it lacks)."""
    try:
        return ConfigResourceType(resource_type).name
    except ValueError:
        return ConfigResourceType.UNKNOWN.name


def config_resource_text(res: AlterConfigsResource) -> str:
    """``ConfigResource.toString``."""
    return (
        f"ConfigResource(type={_resource_type_name(res.resource_type)}, name='{res.resource_name}')"
    )


def check_alter_entries(res: AlterConfigsResource, *, incremental: bool) -> None:
    """The checks of a resource's entries before its type is looked at: IncrementalAlter-
    Configs refuses a name given twice, then a null value (but for DELETE); AlterConfigs
    a null value. INVALID_REQUEST with Kafka's messages."""
    names = [c.name for c in res.configs]
    if incremental:
        twice = [n for i, n in enumerate(names) if names.count(n) > 1 and names.index(n) == i]
        if twice:
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys : {','.join(twice)}"
            )
        nulls = [
            f"{_op_name(c.operation)}:{c.name}"
            for c in res.configs
            if c.value is None and c.operation != AlterConfigOp.DELETE
        ]
    else:
        nulls = [c.name for c in res.configs if c.value is None]
    if nulls:
        raise KafkaApiError(
            ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}"
        )
    if incremental and any(c.operation not in _OPS for c in res.configs):
        # OpType.forId gives null, which no case of Kafka's match takes (a MatchError)
        raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "unknown config operation")


_OPS = frozenset(int(op) for op in AlterConfigOp)


def _op_name(operation: int) -> str:
    try:
        return AlterConfigOp(operation).name
    except ValueError:
        return "null"


DEFAULT_ENTITY: Final = "<default>"
"""``ConfigEntityName.Default``: the cluster-wide defaults' entity name."""
REPLICATION_QUOTAS: Final = (
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
)
"""``DynamicConfig.Broker``'s configs: LONGs, at least 0, default ``Long.MAX_VALUE``."""


def check_quota_value(name: str, value: str) -> None:
    """``DynamicConfig.Broker.validate`` of one quota: ``ConfigDef``'s LONG parse (trimmed)
    and its ``atLeast(0)``."""
    text = value.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -(2**63) <= int(text) < 2**63:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type LONG"
        )
    if int(text) < 0:
        raise ConfigError(
            f"Invalid value {text} for configuration {name}: Value must be at least 0"
        )


def refuse_broker_loggers(res: AlterConfigsResource) -> None:
    """``validateLogLevelConfigs``: kemu has no Log4j loggers, so SET and DELETE name a
    logger that does not exist; APPEND and SUBTRACT are refused for the resource type."""
    for c in res.configs:
        if c.operation in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            raise KafkaApiError(
                ErrorCode.INVALID_REQUEST,
                f"{AlterConfigOp(c.operation).name} operation is not allowed for the"
                " BROKER_LOGGER resource",
            )
        raise ConfigError(f"Logger {c.name} does not exist!")


def topic_error(name: TopicName, code: ErrorCode, message: str | None) -> CreateTopicResult:
    """A topic's CreateTopics result that is an error."""
    return CreateTopicResult(name=name, error_code=code, error_message=message)


def _creation_error(
    name: TopicName, exc: KafkaApiError | AdminOperationError | ConfigError | StoreError
) -> CreateTopicResult:
    """A topic's CreateTopics error: NODEEXISTS on its write is TOPIC_ALREADY_EXISTS, a
    config error INVALID_CONFIG; an unknown server error carries no message."""
    if isinstance(exc, NodeExistsError):
        return topic_error(name, ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    code = error_code_for(exc) if not isinstance(exc, ConfigError) else ErrorCode.INVALID_CONFIG
    message = None if code is ErrorCode.UNKNOWN_SERVER_ERROR else str(exc)
    return topic_error(name, code, message)


def delete_refused(req: DeleteTopicsRequestData, code: ErrorCode) -> DeleteTopicsResponseData:
    """The same error for every entry, as sent, nothing done."""
    return DeleteTopicsResponseData(
        topics=tuple(DeleteTopicResult(name=name, error_code=code) for name in req.topics)
    )


def _wire_entry(entry: ConfigEntry | BrokerConfigEntry) -> WireConfigEntry:
    """A topic's or a broker's config as DescribeConfigs sends it (a topic's is never
    read-only)."""
    return WireConfigEntry(
        name=entry.name,
        value=entry.text,
        read_only=isinstance(entry, BrokerConfigEntry) and entry.read_only,
        source=entry.source,
        synonyms=tuple(
            WireConfigSynonym(name=n, value=v, source=src) for n, v, src in entry.synonyms
        ),
        value_type=_wire_type(entry.type),
    )


def _describe_error(res: ConfigResource, message: str) -> DescribeConfigsResult:
    return DescribeConfigsResult(
        resource_type=res.resource_type,
        resource_name=res.resource_name,
        error_code=ErrorCode.INVALID_REQUEST,
        error_message=message,
    )


def _wire_type(type_: object) -> WireConfigValueType:
    if type_ is None:
        return WireConfigValueType.UNKNOWN
    try:
        return WireConfigValueType[str(type_).upper()]
    except KeyError:
        return WireConfigValueType.UNKNOWN
