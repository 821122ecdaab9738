"""A broker's requests, each to what handles it: Kafka's ``KafkaApis``.

``KafkaApis.handle`` is the one place a request type meets its handler: the controller's
requests go to the ``ReplicaManager``, the admin requests to the ``AdminManager`` (or, on
a broker whose controller is not the active one, to the active controller's broker, as
real clients do not all retry NOT_CONTROLLER), and Metadata (as
``KafkaApis.handleTopicMetadataRequest``) is answered here from the broker's metadata
cache.

Everything here runs on the ``Broker`` actor's task; only ``_forward`` and ``_relay``
run as helper tasks, and they touch no broker state. A new API is one more ``case`` in
``handle`` and a handler in the component that owns its state: Produce, Fetch, ListOffsets
and OffsetForLeaderEpoch go to the ``ReplicaManager``, InitProducerId to the
``ProducerIdManager``, the group APIs to the node's ``GroupCoordinator`` actor
(``actors.group``), which the broker tells of the ``__consumer_offsets`` partitions it
gains and loses (``onLeadershipChange``). FindCoordinator is answered here, from the
metadata cache, creating ``__consumer_offsets`` on first use (``createInternalTopic``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from actors.admin import (
    GROUP_METADATA_TOPIC_NAME,
    AdminOperationError,
    BrokerMetadata,
    ConfigError,
    RackMode,
    is_internal,
    plan_create_topic,
)
from actors.broker.admin_manager import AdminManager, delete_refused, topic_error
from actors.broker.names import BROKER_ACTOR, broker_ref
from actors.broker.producer_ids import ProducerIdManager
from actors.broker.purgatory import DelayedOperationPurgatory
from actors.broker.replica_manager import ReplicaManager
from actors.group.coordinator import GROUP_COORDINATOR_ACTOR, commit_answer
from actors.group.records import partition_for
from actors.runtime.actor import Context, DeferredReply
from actors.zk import kafka_zk
from protocol.base import ActorRef, Message
from protocol.broker import ElectionAnswered
from protocol.control import (
    NO_LEADER,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.controller import (
    ControllerStatus,
    ControllerStatusRequest,
    ElectionType,
    ElectLeadersResults,
    ElectLeadersToController,
    PartitionElectionResult,
)
from protocol.errors import (
    AskTimeoutError,
    ErrorCode,
    KafkaApiError,
    NodeExistsError,
    RemoteError,
    StoreError,
    error_code_for,
)
from protocol.group import (
    CoordinatorType,
    DeletableGroupResult,
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribedGroup,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
    GroupPartitionsDeleted,
    GroupPartitionsElected,
    GroupPartitionsResigned,
    GroupRequestData,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    ListGroupsRequestData,
    ListGroupsResponseData,
    OffsetCommitPartitionResponse,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    OffsetFetchTopic,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterConfigsRequestData,
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    BrokerEndpoint,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DescribeConfigsRequestData,
    DescribeLogDirsRequestData,
    ElectLeadersPartitionResult,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ElectLeadersTopicResult,
    IncrementalAlterConfigsRequestData,
    ListPartitionReassignmentsRequestData,
    ListPartitionReassignmentsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicErrorResult,
    TopicMetadata,
    elect_leaders_error,
)
from protocol.kafka_data import (
    FetchRequestData,
    InitProducerIdRequestData,
    ListOffsetsRequestData,
    OffsetForLeaderEpochRequestData,
    ProduceRequestData,
)

if TYPE_CHECKING:
    from actors.broker.broker import Broker


_AdminRequest = CreateTopicsRequestData | CreatePartitionsRequestData | DeleteTopicsRequestData
"""The admin requests only the active controller handles (others forward them)."""


class KafkaApis:
    """The requests ``broker`` serves, handled by its components."""

    def __init__(
        self,
        broker: Broker,
        replicas: ReplicaManager,
        admin: AdminManager,
        purgatory: DelayedOperationPurgatory,
        producer_ids: ProducerIdManager,
    ) -> None:
        self._broker = broker
        self._replicas = replicas
        self._admin_manager = admin
        self._purgatory = purgatory
        self._producer_ids = producer_ids
        self._elections: dict[int, _PendingElection] = {}
        self._next_election = 0

    async def handle(self, msg: Message, ctx: Context) -> Message | None:
        """The answer to ``msg``; None when it comes later (through ``ctx.defer``). A
        request no handler takes is INVALID_REQUEST."""
        match msg:
            case ProduceRequestData():
                return await self._replicas.append_records(msg, ctx)
            case FetchRequestData():
                return await self._replicas.fetch_messages(msg, ctx)
            case ListOffsetsRequestData():
                return await self._replicas.fetch_offsets(msg)
            case OffsetForLeaderEpochRequestData():
                return await self._replicas.last_offset_for_leader_epoch(msg)
            case InitProducerIdRequestData():
                return await self._producer_ids.init_producer_id(msg)
            case LeaderAndIsrRequest():
                response = await self._replicas.become_leader_or_follower(msg)
                self._on_leadership_change(msg, response)
                return response
            case UpdateMetadataRequest():
                return self._handle_update_metadata(msg)
            case StopReplicaRequest():
                stopped = await self._replicas.stop_replicas(msg)
                self._on_offsets_partitions_stopped(msg, stopped)
                return stopped
            case FindCoordinatorRequestData():
                return await self._handle_find_coordinator(msg)
            case OffsetCommitRequestData():
                return self._handle_offset_commit(msg, ctx)
            case OffsetDeleteRequestData():
                return self._handle_offset_delete(msg, ctx)
            case (
                JoinGroupRequestData()
                | SyncGroupRequestData()
                | HeartbeatRequestData()
                | LeaveGroupRequestData()
                | OffsetFetchRequestData()
                | ListGroupsRequestData()
                | DescribeGroupsRequestData()
                | DeleteGroupsRequestData()
            ):
                return self._to_coordinator(msg, ctx, None)
            case MetadataRequestData():
                return await self._handle_topic_metadata(msg)
            case DescribeConfigsRequestData():
                return await self._admin_manager.describe_configs(msg)
            case DescribeLogDirsRequestData():
                return await self._replicas.describe_log_dirs(msg)
            case AlterConfigsRequestData() | IncrementalAlterConfigsRequestData():
                return await self._admin_manager.alter_configs(msg)
            case (
                CreateTopicsRequestData()
                | CreatePartitionsRequestData()
                | DeleteTopicsRequestData()
            ):
                return await self._handle_admin(msg, ctx)
            case ElectLeadersRequestData():
                return self._handle_elect_leaders(msg, ctx)
            case ListPartitionReassignmentsRequestData() | AlterPartitionReassignmentsRequestData():
                reply = ctx.defer()
                self._broker.start_soon(self._reassignments_at_controller, msg, reply)
                return None
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"broker cannot handle {type(msg).__name__}")

    # ------------------------------------------------------------------ groups

    @property
    def _coordinator(self) -> ActorRef:
        return ActorRef(self._broker.node.node_id, GROUP_COORDINATOR_ACTOR)

    def _on_leadership_change(
        self, req: LeaderAndIsrRequest, response: LeaderAndIsrResponse
    ) -> None:
        """``KafkaApis.onLeadershipChange``: the ``__consumer_offsets`` partitions this
        request made this broker lead (``onElection``, with their leader epochs) or follow
        (``onResignation``)."""
        if response.error_code is not ErrorCode.NONE:
            return
        ok = {  # of the offsets topic alone: a bulk creation has no need of the others'
            e.partition
            for e in response.partition_errors
            if e.topic == GROUP_METADATA_TOPIC_NAME and e.error_code is ErrorCode.NONE
        }
        if not ok:
            return
        elected, resigned = [], []
        for state in req.partition_states:
            if state.topic != GROUP_METADATA_TOPIC_NAME or state.partition not in ok:
                continue
            if state.leader == self._broker.broker_id:
                elected.append((state.partition, state.leader_epoch))
            else:
                resigned.append(state.partition)
        if elected:
            self._broker.tell(self._coordinator, GroupPartitionsElected(partitions=tuple(elected)))
        if resigned:
            self._broker.tell(
                self._coordinator, GroupPartitionsResigned(partitions=tuple(resigned))
            )

    def _on_offsets_partitions_stopped(
        self, req: StopReplicaRequest, response: StopReplicaResponse
    ) -> None:
        """``KafkaApis.handleStopReplicaRequest``: a deleted ``__consumer_offsets``
        replica resigns its groups."""
        if not any(p.topic == GROUP_METADATA_TOPIC_NAME for p in req.partitions):
            return
        ok = {
            (e.topic, e.partition)
            for e in response.partition_errors
            if e.error_code is ErrorCode.NONE
        }
        resigned = tuple(
            p.partition
            for p in req.partitions
            if p.topic == GROUP_METADATA_TOPIC_NAME
            and p.delete_partition
            and (p.topic, p.partition) in ok
        )
        if resigned:
            self._broker.tell(self._coordinator, GroupPartitionsResigned(partitions=resigned))

    async def _handle_find_coordinator(
        self, req: FindCoordinatorRequestData
    ) -> FindCoordinatorResponseData:
        """``KafkaApis.handleFindCoordinatorRequest`` for groups: the leader of the
        group's partition of ``__consumer_offsets``; COORDINATOR_NOT_AVAILABLE while it
        has none, or while the topic does not exist (it is created then, as
        ``createInternalTopic`` does). kemu has no transaction coordinator: a
        TRANSACTION key is INVALID_REQUEST, as any other key type."""
        if req.key_type != CoordinatorType.GROUP:
            return FindCoordinatorResponseData(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=(
                    "kemu has no transaction coordinator"
                    if req.key_type == CoordinatorType.TRANSACTION
                    else f"Unknown coordinator type {req.key_type} in FindCoordinator request"
                ),
            )
        topic = TopicName(GROUP_METADATA_TOPIC_NAME)
        cache = self._broker.cache
        if not cache.contains(topic):
            await self._create_offsets_topic()
            return _coordinator_not_available()
        partition = partition_for(req.key, self._broker.offsets_topic_partitions)
        state = cache.partitions(topic).get(partition)
        alive = {b.id: b for b in cache.alive_brokers()}
        if state is None or state.leader not in alive or not alive[state.leader].endpoints:
            return _coordinator_not_available()
        endpoint = alive[state.leader].endpoints[0]
        return FindCoordinatorResponseData(
            error_message="NONE", node_id=state.leader, host=endpoint.host, port=endpoint.port
        )

    async def _create_offsets_topic(self) -> None:
        """``KafkaApis.createInternalTopic`` for ``__consumer_offsets``: only once
        ``offsets.topic.replication.factor`` brokers are alive; written to the store
        directly (``AdminZkClient.createTopic``, rack-safe), with Kafka's topic configs."""
        config = self._broker.config
        alive = self._broker.cache.alive_brokers()
        factor = config.offsets_topic_replication_factor
        if len(alive) < factor:
            self._broker.trace(
                "event",
                "offsets_topic_not_created",
                reason=(
                    f"Number of alive brokers '{len(alive)}' does not meet the required "
                    f"replication factor '{factor}' for the offsets topic (configured via "
                    "'offsets.topic.replication.factor'). This error can be ignored if the "
                    "cluster is starting up and not all brokers are up yet."
                ),
            )
            return
        topic = TopicName(GROUP_METADATA_TOPIC_NAME)
        try:
            existing = await kafka_zk.get_all_topics(self._broker.session)
            registered = await kafka_zk.get_brokers(self._broker.session)
            plan = plan_create_topic(
                topic,
                num_partitions=self._broker.offsets_topic_partitions,
                replication_factor=factor,
                config={
                    "cleanup.policy": "compact",
                    "segment.bytes": str(config.offsets_topic_segment_bytes),
                    "compression.type": "producer",
                },
                metadata_topics=self._broker.cache.topic_names(),
                existing_topics=existing,
                alive_brokers=[
                    BrokerMetadata(b, r.registration.rack) for b, r in registered.items()
                ],
                broker_config=config,
                rng=self._broker.rng,
                rack_mode=RackMode.SAFE,
            )
            await kafka_zk.write_topic(self._broker.session, topic, plan.assignment, plan.config)
        except NodeExistsError:
            return
        except (KafkaApiError, AdminOperationError, ConfigError, StoreError) as exc:
            self._broker.trace("event", "offsets_topic_not_created", reason=str(exc))
            return
        self._broker.trace("event", "offsets_topic_created", partitions=len(plan.assignment))

    def _handle_offset_commit(self, req: OffsetCommitRequestData, ctx: Context) -> Message | None:
        """``KafkaApis.handleOffsetCommitRequest``: partitions the metadata cache does not
        know are UNKNOWN_TOPIC_OR_PARTITION; the coordinator commits the rest."""
        unknown: dict[tuple[str, int], ErrorCode] = {}
        known: list[OffsetCommitTopic] = []
        for topic in req.topics:
            partitions = self._broker.cache.partitions(topic.name)  # {}: an unknown topic
            kept = []
            for p in topic.partitions:
                if p.partition_index in partitions:
                    kept.append(p)
                else:
                    unknown[topic.name, p.partition_index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if kept:
                known.append(OffsetCommitTopic(name=topic.name, partitions=tuple(kept)))
        if not unknown:
            return self._to_coordinator(req, ctx, None)
        if not known:
            return _merge_commit(req, unknown, None)

        def merged(answer: Message) -> Message:
            if not isinstance(answer, OffsetCommitResponseData):
                return answer
            return _merge_commit(req, unknown, answer)

        forwarded = OffsetCommitRequestData(
            group_id=req.group_id,
            topics=tuple(known),
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id,
            retention_time_ms=req.retention_time_ms,
        )
        return self._to_coordinator(forwarded, ctx, merged)

    def _known_partitions(
        self, topics: tuple[OffsetFetchTopic, ...]
    ) -> tuple[tuple[OffsetFetchTopic, ...], dict[tuple[str, int], ErrorCode]]:
        """The partitions the metadata cache knows, and UNKNOWN_TOPIC_OR_PARTITION for
        the others."""
        unknown: dict[tuple[str, int], ErrorCode] = {}
        known: list[OffsetFetchTopic] = []
        for topic in topics:
            partitions = self._broker.cache.partitions(topic.name)  # {}: an unknown topic
            kept = tuple(p for p in topic.partition_indexes if p in partitions)
            for p in topic.partition_indexes:
                if p not in partitions:
                    unknown[topic.name, p] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if kept:
                known.append(OffsetFetchTopic(name=topic.name, partition_indexes=kept))
        return tuple(known), unknown

    def _handle_offset_delete(self, req: OffsetDeleteRequestData, ctx: Context) -> Message | None:
        """``KafkaApis.handleOffsetDeleteRequest``: partitions the metadata cache does not
        know are UNKNOWN_TOPIC_OR_PARTITION; the coordinator decides the rest; a group
        error is answered alone."""
        known, unknown = self._known_partitions(req.topics)

        def merged(answer: Message) -> Message:
            if not isinstance(answer, OffsetDeleteResponseData) or answer.error_code is not (
                ErrorCode.NONE
            ):
                return answer
            codes: dict[tuple[str, int], ErrorCode] = {
                (t.name, p.partition_index): p.error_code
                for t in answer.topics
                for p in t.partitions
            }
            codes.update(unknown)
            return OffsetDeleteResponseData(
                topics=tuple(
                    OffsetCommitTopicResponse(
                        name=t.name,
                        partitions=tuple(
                            OffsetCommitPartitionResponse(
                                partition_index=p,
                                error_code=codes.get((t.name, p), ErrorCode.NONE),
                            )
                            for p in t.partition_indexes
                        ),
                    )
                    for t in req.topics
                )
            )

        forwarded = OffsetDeleteRequestData(group_id=req.group_id, topics=known)
        return self._to_coordinator(forwarded, ctx, merged)

    def _to_coordinator(
        self,
        msg: GroupRequestData,
        ctx: Context,
        finish: Callable[[Message], Message] | None,
    ) -> Message | None:
        """Hand ``msg`` to the group coordinator; None: answered when it answers, through
        ``finish`` (which adds the partitions answered here)."""
        reply = ctx.defer()
        self._broker.start_soon(self._relay, msg, reply, finish)
        return None

    async def _relay(
        self,
        msg: GroupRequestData,
        reply: DeferredReply,
        finish: Callable[[Message], Message] | None,
    ) -> None:
        """Runs as a helper task: the coordinator's answer relayed (an answer that does
        not come: COORDINATOR_NOT_AVAILABLE, which clients retry). It touches no broker
        state."""
        timeout = getattr(msg, "timeout_ms", 0) / 1000 + 30.0
        try:
            answer = await self._broker.ask(self._coordinator, msg, timeout=timeout)
        except (RemoteError, AskTimeoutError):
            answer = _group_error(msg, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        reply.send(self._broker, answer if finish is None else finish(answer))

    def _handle_update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """The metadata cache updated, then the delayed admin operations on the topics it
        changed checked (``AdminManager.tryCompleteDelayedTopicOperations``)."""
        response, (touched, deleted) = self._replicas.maybe_update_metadata_cache(req)
        if touched:
            self._purgatory.check_and_complete(touched)
        if deleted and response.error_code is ErrorCode.NONE:  # handleDeletedPartitions
            self._broker.tell(self._coordinator, GroupPartitionsDeleted(partitions=deleted))
        return response

    def _brokers(self) -> tuple[BrokerEndpoint, ...]:
        out = []
        for b in self._broker.cache.alive_brokers():
            endpoint = b.endpoints[0]
            out.append(
                BrokerEndpoint(broker_id=b.id, host=endpoint.host, port=endpoint.port, rack=b.rack)
            )
        return tuple(out)

    def _topic_metadata(self, topic: TopicName) -> TopicMetadata:
        alive = set(self._broker.cache.alive_broker_ids())
        partitions = []
        for p, state in sorted(self._broker.cache.partitions(topic).items()):
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
            is_internal=is_internal(topic),
            partitions=tuple(partitions),
        )

    async def _handle_topic_metadata(self, req: MetadataRequestData) -> MetadataResponseData:
        """Every topic of the metadata cache, or those asked for: a topic the cache does
        not know may be created (``_unknown_topic``)."""
        if req.topics is None:
            names = self._broker.cache.topic_names()
            topics = [self._topic_metadata(t) for t in names]
        else:
            topics = []
            for name in req.topics:
                if self._broker.cache.contains(name):
                    topics.append(self._topic_metadata(name))
                else:
                    topics.append(await self._unknown_topic(name, req.allow_auto_topic_creation))
        return MetadataResponseData(
            brokers=self._brokers(),
            cluster_id=self._broker.cluster_id,
            controller_id=self._controller_id(),
            topics=tuple(topics),
        )

    def _controller_id(self) -> BrokerId:
        return BrokerId(
            -1 if self._broker.cache.controller_id is None else self._broker.cache.controller_id
        )

    async def _unknown_topic(self, name: TopicName, allow_auto_create: bool) -> TopicMetadata:
        """A topic the metadata cache does not know, as ``KafkaApis.getTopicMetadata``:
        with auto-creation asked for and ``auto.create.topics.enable``, the topic is
        written to the store directly (``createTopic``) and answered LEADER_NOT_AVAILABLE;
        otherwise UNKNOWN_TOPIC_OR_PARTITION."""
        if not (allow_auto_create and self._broker.config.auto_create_topics_enable):
            return TopicMetadata(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            existing = await kafka_zk.get_all_topics(self._broker.session)
            registered = await kafka_zk.get_brokers(self._broker.session)
            brokers = [BrokerMetadata(b, r.registration.rack) for b, r in registered.items()]
            plan = plan_create_topic(
                name,
                metadata_topics=self._broker.cache.topic_names(),
                existing_topics=existing,
                alive_brokers=brokers,
                broker_config=self._broker.config,
                rng=self._broker.rng,
                rack_mode=RackMode.SAFE,
            )
            await kafka_zk.write_topic(self._broker.session, name, plan.assignment, plan.config)
        except NodeExistsError:
            pass
        except (KafkaApiError, AdminOperationError, ConfigError, StoreError) as exc:
            code = error_code_for(exc)
            if code is ErrorCode.TOPIC_ALREADY_EXISTS:
                code = ErrorCode.LEADER_NOT_AVAILABLE
            return TopicMetadata(name=name, error_code=code)
        return TopicMetadata(name=name, error_code=ErrorCode.LEADER_NOT_AVAILABLE)

    # ------------------------------------------------------------------ ElectLeaders

    def _handle_elect_leaders(self, req: ElectLeadersRequestData, ctx: Context) -> Message | None:
        """``KafkaApis.handleElectReplicaLeader``: the partitions asked for (None: every
        partition of the metadata cache) go to this broker's own controller
        (``ReplicaManager.electLeaders`` -> ``KafkaController.electLeaders``); a controller
        that is not the active one answers NOT_CONTROLLER for each. The answer waits
        (``DelayedElectLeader``) until the metadata cache shows each elected leader, or
        the request's timeout (REQUEST_TIMED_OUT for those not shown)."""
        try:
            election_type = ElectionType(req.election_type)
        except ValueError:
            # ElectionType.valueOf throws: the request's error response.
            return elect_leaders_error(req, ErrorCode.UNKNOWN_SERVER_ERROR, None)
        if req.topic_partitions is None:
            cache = self._broker.cache
            partitions = {
                TopicPartition(topic, p)
                for topic in cache.topic_names()
                for p in cache.partitions(topic)
            }
        else:
            partitions = {
                TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions
            }
        self._next_election += 1
        op = self._next_election
        self._elections[op] = _PendingElection(
            reply=ctx.defer(),
            request=req,
            deadline=self._broker.clock.now() + req.timeout_ms / 1000,
        )
        ask = ElectLeadersToController(
            partitions=tuple(sorted(partitions)), election_type=election_type
        )
        self._broker.start_soon(self._elect_at_controller, op, ask, req.timeout_ms)
        return None

    async def _elect_at_controller(
        self, op: int, ask: ElectLeadersToController, timeout_ms: int
    ) -> None:
        """Runs as a helper task: the controller's results, sent back to the broker's own
        mailbox. It touches no broker state. A controller that does not answer (it
        processes the election after the events queued before it) leaves each partition
        REQUEST_TIMED_OUT."""
        try:
            answer = await self._broker.ask(
                self._broker.controller_ref, ask, timeout=max(timeout_ms / 1000, 1.0)
            )
        except (RemoteError, AskTimeoutError):
            answer = None
        results = (
            answer.results
            if isinstance(answer, ElectLeadersResults)
            else tuple(
                PartitionElectionResult(partition=tp, error_code=ErrorCode.REQUEST_TIMED_OUT)
                for tp in ask.partitions
            )
        )
        self._broker.send_self(ElectionAnswered(operation=op, results=results))

    async def _reassignments_at_controller(
        self,
        msg: ListPartitionReassignmentsRequestData | AlterPartitionReassignmentsRequestData,
        reply: DeferredReply,
    ) -> None:
        """Runs as a helper task: ``KafkaApis.handleListPartitionReassignmentsRequest`` and
        ``handleAlterPartitionReassignmentsRequest``, answered by this broker's own controller
        (``listPartitionReassignments``, ``alterPartitionReassignments``); one that does not
        answer: NOT_CONTROLLER. It touches no broker state."""
        try:
            answer = await self._broker.ask(
                self._broker.controller_ref, msg, timeout=max(msg.timeout_ms / 1000, 1.0)
            )
        except (RemoteError, AskTimeoutError):
            answer = (
                ListPartitionReassignmentsResponseData(error_code=ErrorCode.NOT_CONTROLLER)
                if isinstance(msg, ListPartitionReassignmentsRequestData)
                else AlterPartitionReassignmentsResponseData(error_code=ErrorCode.NOT_CONTROLLER)
            )
        reply.send(self._broker, answer)

    def on_election_answered(self, op: int, results: tuple[PartitionElectionResult, ...]) -> None:
        """``ReplicaManager.electLeaders``' election callback: the failures answered as
        they are, the elected partitions watched until the metadata cache shows their new
        leaders (``DelayedElectLeader``)."""
        pending = self._elections.pop(op, None)
        if pending is None:
            return
        expected = {r.partition: r.leader for r in results if r.error_code is ErrorCode.NONE}
        failures = {r.partition: r for r in results if r.error_code is not ErrorCode.NONE}
        cache = self._broker.cache

        def elected(tp: TopicPartition) -> bool:
            state = cache.partitions(tp.topic).get(tp.partition)
            return state is not None and state.leader == expected[tp]

        def done(topic: TopicName) -> bool:
            return all(elected(tp) for tp in expected if tp.topic == topic)

        def finish(timed_out: set[TopicName]) -> Message:
            del timed_out  # onComplete looks at every partition again
            answered = dict(failures)
            for tp in expected:
                answered[tp] = PartitionElectionResult(
                    partition=tp,
                    error_code=ErrorCode.NONE if elected(tp) else ErrorCode.REQUEST_TIMED_OUT,
                )
            return elect_leaders_response(pending.request, answered.values())

        if not expected:
            pending.reply.send(self._broker, finish(set()))
            return
        remaining_ms = int((pending.deadline - self._broker.clock.now()) * 1000)
        self._purgatory.watch(
            pending.reply, remaining_ms, {tp.topic for tp in expected}, done, finish
        )

    async def _is_active_controller(self) -> bool:
        try:
            status = await self._broker.ask(
                self._broker.controller_ref, ControllerStatusRequest(), timeout=5.0
            )
        except (RemoteError, AskTimeoutError):
            return False
        return isinstance(status, ControllerStatus) and status.active

    async def _handle_admin(self, msg: _AdminRequest, ctx: Context) -> Message | None:
        """Handled here if this broker's controller is the active one; otherwise forwarded
        once to the controller's broker the cache names, or NOT_CONTROLLER."""
        if not await self._is_active_controller():
            controller = self._broker.cache.controller_id
            if (
                controller is None
                or controller == self._broker.broker_id
                or ctx.sender.name == BROKER_ACTOR  # forwarded once already: no loops
            ):
                return _not_controller(msg)
            reply = ctx.defer()
            self._broker.start_soon(self._forward, broker_ref(controller), msg, reply)
            return None
        match msg:
            case CreateTopicsRequestData():
                return await self._admin_manager.create_topics(msg, ctx)
            case CreatePartitionsRequestData():
                return await self._admin_manager.create_partitions(msg, ctx)
            case DeleteTopicsRequestData():
                return await self._admin_manager.delete_topics(msg, ctx)
            case _:
                assert_never(msg)

    async def _forward(self, target: ActorRef, msg: _AdminRequest, reply: DeferredReply) -> None:
        """Runs as a helper task: waits for the controller's answer and relays it. It
        touches no broker state."""
        timeout = msg.timeout_ms / 1000 + 5.0
        try:
            answer = await self._broker.ask(target, msg, timeout=max(timeout, 5.0))
        except (RemoteError, AskTimeoutError):
            answer = _not_controller(msg)
        reply.send(self._broker, answer)


@dataclass(frozen=True, slots=True)
class _PendingElection:
    """An ElectLeaders request waiting for its controller's answer."""

    reply: DeferredReply
    request: ElectLeadersRequestData
    deadline: float
    """On the broker's clock: when its timeout runs out."""


def elect_leaders_response(
    req: ElectLeadersRequestData, results: Iterable[PartitionElectionResult]
) -> ElectLeadersResponseData:
    """``handleElectReplicaLeader``'s ``sendResponseCallback``: the results grouped by
    topic (sorted); for a request of every partition, those that needed no election left
    out."""
    by_topic: dict[TopicName, list[ElectLeadersPartitionResult]] = {}
    for r in sorted(results, key=lambda r: r.partition):
        if req.topic_partitions is None and r.error_code is ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(TopicName(r.partition.topic), []).append(
            ElectLeadersPartitionResult(
                partition_id=r.partition.partition,
                error_code=r.error_code,
                error_message=r.message,
            )
        )
    return ElectLeadersResponseData(
        results=tuple(
            ElectLeadersTopicResult(topic=topic, partition_results=tuple(partitions))
            for topic, partitions in by_topic.items()
        )
    )


def _not_controller(msg: _AdminRequest) -> Message:
    """NOT_CONTROLLER for every topic of ``msg``, with Kafka's message."""
    text = "This is not the correct controller for this cluster."
    match msg:
        case CreateTopicsRequestData():
            return CreateTopicsResponseData(
                topics=tuple(
                    topic_error(t.name, ErrorCode.NOT_CONTROLLER, text) for t in msg.topics
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
            return delete_refused(msg, ErrorCode.NOT_CONTROLLER)
        case _:
            assert_never(msg)


def _coordinator_not_available() -> FindCoordinatorResponseData:
    return FindCoordinatorResponseData(
        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
        error_message="The coordinator is not available.",
    )


def _group_error(msg: GroupRequestData, code: ErrorCode) -> Message:
    """The answer to a group request that failed as a whole with ``code``."""
    match msg:
        case JoinGroupRequestData():
            return JoinGroupResponseData(error_code=code, member_id=msg.member_id)
        case SyncGroupRequestData():
            return SyncGroupResponseData(error_code=code)
        case HeartbeatRequestData():
            return HeartbeatResponseData(error_code=code)
        case LeaveGroupRequestData():
            return LeaveGroupResponseData(error_code=code)
        case OffsetCommitRequestData():
            return _merge_commit(msg, {}, None, code)
        case OffsetFetchRequestData():
            return OffsetFetchResponseData(topics=(), error_code=code)
        case OffsetDeleteRequestData():
            return OffsetDeleteResponseData(error_code=code)
        case ListGroupsRequestData():
            return ListGroupsResponseData(error_code=code)
        case DescribeGroupsRequestData():
            return DescribeGroupsResponseData(
                groups=tuple(DescribedGroup(group_id=g, error_code=code) for g in msg.groups)
            )
        case DeleteGroupsRequestData():
            return DeleteGroupsResponseData(
                results=tuple(
                    DeletableGroupResult(group_id=g, error_code=code) for g in msg.groups_names
                )
            )
        case _:
            assert_never(msg)


def _merge_commit(
    req: OffsetCommitRequestData,
    codes: dict[tuple[str, int], ErrorCode],
    answer: OffsetCommitResponseData | None,
    default: ErrorCode = ErrorCode.NONE,
) -> OffsetCommitResponseData:
    """One answer to ``req``, in its order: ``codes`` where given, else the
    coordinator's ``answer``, else ``default``."""
    answered: dict[tuple[str, int], ErrorCode] = {
        (t.name, p.partition_index): p.error_code
        for t in (answer.topics if answer is not None else ())
        for p in t.partitions
    }
    return commit_answer(req, {**answered, **codes}, default)
