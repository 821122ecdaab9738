"""A broker's requests, each to what handles it: Kafka's ``KafkaApis``.

``KafkaApis.handle`` is the one place a request type meets its handler: the controller's
requests go to the ``ReplicaManager``, the admin requests to the ``AdminManager`` (or, on
a broker whose controller is not the active one, to the active controller's broker, as
real clients do not all retry NOT_CONTROLLER), and Metadata (as
``KafkaApis.handleTopicMetadataRequest``) is answered here from the broker's metadata
cache.

Everything here runs on the ``Broker`` actor's task; only ``_forward`` runs as a helper
task, and it touches no broker state. A new API (Produce, Fetch, the group coordinator's)
is one more ``case`` in ``handle`` and a handler in the component that owns its state:
Produce, Fetch, ListOffsets and OffsetForLeaderEpoch go to the ``ReplicaManager``,
InitProducerId to the ``ProducerIdManager``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from actors.admin import (
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
from actors.runtime.actor import Context, DeferredReply
from actors.zk import kafka_zk
from protocol.base import ActorRef, Message
from protocol.control import (
    NO_LEADER,
    LeaderAndIsrRequest,
    StopReplicaRequest,
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
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    BrokerEndpoint,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DescribeConfigsRequestData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionMetadata,
    TopicErrorResult,
    TopicMetadata,
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
                return await self._replicas.become_leader_or_follower(msg)
            case UpdateMetadataRequest():
                return self._handle_update_metadata(msg)
            case StopReplicaRequest():
                return await self._replicas.stop_replicas(msg)
            case MetadataRequestData():
                return await self._handle_topic_metadata(msg)
            case DescribeConfigsRequestData():
                return await self._admin_manager.describe_configs(msg)
            case (
                CreateTopicsRequestData()
                | CreatePartitionsRequestData()
                | DeleteTopicsRequestData()
            ):
                return await self._handle_admin(msg, ctx)
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"broker cannot handle {type(msg).__name__}")

    def _handle_update_metadata(self, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """The metadata cache updated, then the delayed admin operations on the topics it
        changed checked (``AdminManager.tryCompleteDelayedTopicOperations``)."""
        response, touched = self._replicas.maybe_update_metadata_cache(req)
        if touched:
            self._purgatory.check_and_complete(touched)
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
