"""The controller's requests about a broker's replicas: Kafka's ``ReplicaManager``.

LeaderAndIsr (``becomeLeaderOrFollower``: create the logs of the partitions this broker
is now a replica of, remember their leader epochs), UpdateMetadata
(``maybeUpdateMetadataCache``) and StopReplica (``stopReplicas``: delete the logs of
deleted partitions). Each first passes the fencing Kafka applies to the three: a request
for an older incarnation of this broker is STALE_BROKER_EPOCH
(``KafkaApis.isBrokerEpochStale``), one from an older controller STALE_CONTROLLER_EPOCH.

A component of the ``Broker`` actor, not an actor: its state (the controller epoch, the
leader epochs) is the broker's, touched only on its task. The data plane goes here next
(Kafka's ``ReplicaManager`` also appends and fetches records and runs the replica
fetchers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors.zk import kafka_zk
from protocol.control import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    TopicPartition,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.errors import (
    ErrorCode,
    RemoteError,
    StoreError,
)
from protocol.ids import ControllerEpoch, TopicName
from protocol.log import DeleteLog, GetOrCreateLog, GetOrCreateLogs, LogsCreated

if TYPE_CHECKING:
    from actors.broker.broker import Broker


FILE_DELETE_DELAY_MS = "file.delete.delay.ms"  # the topic config a deleted log waits for


class ReplicaManager:
    """The replicas of ``broker``, as the controller has told it about them."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self.controller_epoch = ControllerEpoch(0)  # highest seen in a control request
        self.leader_epochs: dict[TopicPartition, int] = {}  # of each partition hosted here

    def _stale(self, controller_epoch: int, broker_epoch: int) -> ErrorCode | None:
        """The fencing shared by the three control requests: an older incarnation of this
        broker (``KafkaApis.isBrokerEpochStale``; -1 means the sender does not know),
        then an older controller; a newer controller epoch is remembered."""
        if broker_epoch != -1 and broker_epoch < self._broker.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = ControllerEpoch(controller_epoch)
        return None

    async def become_leader_or_follower(self, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Create the logs of the partitions of ``req`` this broker is a replica of. A
        partition whose leader epoch is not newer than the one known here is ignored
        (STALE_CONTROLLER_EPOCH, as Kafka answers it), one not assigned to this broker is
        UNKNOWN_TOPIC_OR_PARTITION."""
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            self._broker.trace(
                "event", "stale_request_rejected", request="LeaderAndIsr", error=stale.name
            )
            return LeaderAndIsrResponse(error_code=stale)
        codes: dict[TopicPartition, ErrorCode] = {}
        accepted: list[LeaderAndIsrPartitionState] = []
        for state in req.partition_states:
            tp = TopicPartition(state.topic, state.partition)
            if state.leader_epoch <= self.leader_epochs.get(tp, -1):
                codes[tp] = ErrorCode.STALE_CONTROLLER_EPOCH  # ignored, as Kafka does
            elif self._broker.broker_id not in state.replicas:
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
            reply = await self._broker.ask(self._broker.log_manager_ref, batch)
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

    def maybe_update_metadata_cache(
        self, req: UpdateMetadataRequest
    ) -> tuple[UpdateMetadataResponse, set[TopicName]]:
        """Apply ``req`` to the broker's metadata cache unless it is fenced; the response
        and the topics it changed (the delayed admin operations to check)."""
        stale = self._stale(req.controller_epoch, req.broker_epoch)
        if stale is not None:
            self._broker.trace(
                "event", "stale_request_rejected", request="UpdateMetadata", error=stale.name
            )
            return UpdateMetadataResponse(error_code=stale), set()
        touched = self._broker.cache.update(req)
        return UpdateMetadataResponse(error_code=ErrorCode.NONE), touched

    async def stop_replicas(self, req: StopReplicaRequest) -> StopReplicaResponse:
        """Stop the replicas of ``req``, deleting the logs of those marked for deletion
        (each after its topic's ``file.delete.delay.ms``). A request whose leader epoch
        for a partition is older than the one known here is FENCED_LEADER_EPOCH there."""
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
                    await self._broker.ask(
                        self._broker.log_manager_ref,
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
                value = (await kafka_zk.get_topic_config(self._broker.session, topic)).get(
                    FILE_DELETE_DELAY_MS
                )
            except StoreError:
                continue
            if value is not None and value.lstrip("-").isdigit() and int(value) >= 0:
                delays[topic] = int(value)
        return delays
