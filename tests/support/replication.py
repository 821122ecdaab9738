"""Replication rigs: real partition logs (``actors.log.partition_log.Log``) on both sides of
a replica fetcher, nodes on the virtual clock joined by the in-process Network (whose
fault rules cut them apart).

``LogsFollower`` is a follower's ``FollowerLog`` over its own ``Log`` objects.
``LogsLeader`` is the leader's side of the fetcher protocol as Kafka's ``ReplicaManager``
answers a follower (``fetchMessages`` with a replica id, ``lastOffsetForLeaderEpoch``,
``fetchOffsetForTimestamp`` for a replica), over its own ``Log`` objects: leader epoch
fencing, reads up to the log end, OFFSET_OUT_OF_RANGE, a high watermark that follows the
follower's fetch offset. It answers at once (no DelayedFetch): the broker's own leader
side is tested with the broker.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from actors.broker.replica_fetcher import FetcherConfig, ReplicaFetcher
from actors.log.partition_log import Log
from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import VirtualClock
from actors.runtime.tracer import MemorySink, Tracer
from cluster.network import InProcessTransport, Network
from protocol.base import Message
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_data import (
    FetchPartitionData,
    FetchRequestData,
    FetchResponseData,
    FetchTopicResponse,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    ListOffsetsTopicResponse,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from protocol.replication import FetcherStatus, FetcherStatusRequest

TP = TopicPartition(TopicName("t"), 0)


def open_log(directory: Path, clock: VirtualClock) -> Log:
    return Log(directory, now_ms=clock.wall_ms)


class LogsFollower:
    """A follower's ``FollowerLog`` over ``logs``; ``high_watermarks`` as fetches set them."""

    def __init__(self, logs: Mapping[TopicPartition, Log]) -> None:
        self.logs = logs
        self.high_watermarks: dict[TopicPartition, int] = {}

    def _log(self, tp: TopicPartition) -> Log:
        log = self.logs.get(tp)
        if log is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return log

    async def offsets(self, tp: TopicPartition) -> tuple[int, int]:
        log = self._log(tp)
        return log.log_start_offset, log.log_end_offset

    async def latest_epoch(self, tp: TopicPartition) -> int | None:
        return self._log(tp).leader_epoch_cache.latest_epoch

    async def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int]:
        return self._log(tp).end_offset_for_epoch(epoch)

    async def truncate_to(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        self._log(tp).truncate_to(offset)
        hw = self.high_watermarks.get(tp)
        if hw is not None:
            self.high_watermarks[tp] = min(hw, offset)
        return await self.offsets(tp)

    async def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> tuple[int, int]:
        self._log(tp).truncate_fully_and_start_at(offset)
        self.high_watermarks[tp] = offset
        return await self.offsets(tp)

    async def append_as_follower(self, tp: TopicPartition, records: bytes) -> tuple[int, int]:
        self._log(tp).append_as_follower(records)
        return await self.offsets(tp)

    async def update_follower_offsets(
        self,
        tp: TopicPartition,
        *,
        high_watermark: int,
        leader_log_start_offset: int,
        log_start_offset: int,
    ) -> int:
        del log_start_offset  # the log's own is at hand
        log = self._log(tp)
        self.high_watermarks[tp] = high_watermark
        if leader_log_start_offset > log.log_start_offset:
            log.maybe_increment_log_start_offset(
                min(leader_log_start_offset, high_watermark), high_watermark
            )
        return log.log_start_offset


class LogsLeader(Actor):
    """The leader's answers to a follower (see the module docstring). ``epochs`` holds
    each partition's current leader epoch; ``high_watermarks`` what it answers."""

    def __init__(self, logs: Mapping[TopicPartition, Log], epochs: dict[TopicPartition, int]):
        super().__init__("broker")
        self.logs = logs
        self.epochs = epochs
        self.high_watermarks: dict[TopicPartition, int] = {}
        self.fetches = 0

    def _fenced(self, tp: TopicPartition, current_epoch: int) -> ErrorCode | None:
        if tp not in self.logs:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if current_epoch < 0:
            return None
        if current_epoch < self.epochs[tp]:
            return ErrorCode.FENCED_LEADER_EPOCH
        if current_epoch > self.epochs[tp]:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return None

    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        match msg:
            case FetchRequestData():
                self.fetches += 1
                return self._fetch(msg)
            case OffsetForLeaderEpochRequestData():
                return OffsetForLeaderEpochResponseData(
                    topics=tuple(
                        OffsetForLeaderTopicResult(
                            topic=t.topic,
                            partitions=tuple(
                                self._epoch_end(TopicPartition(t.topic, p.partition), p)
                                for p in t.partitions
                            ),
                        )
                        for t in msg.topics
                    )
                )
            case ListOffsetsRequestData():
                return ListOffsetsResponseData(
                    topics=tuple(
                        ListOffsetsTopicResponse(
                            name=t.name,
                            partitions=tuple(
                                self._list_offset(TopicPartition(t.name, p.partition_index), p)
                                for p in t.partitions
                            ),
                        )
                        for t in msg.topics
                    )
                )
        return None

    def _epoch_end(
        self, tp: TopicPartition, p: OffsetForLeaderPartition
    ) -> OffsetForLeaderPartitionResult:
        error = self._fenced(tp, p.current_leader_epoch)
        if error is not None:
            return OffsetForLeaderPartitionResult(partition=p.partition, error_code=error)
        epoch, end = self.logs[tp].end_offset_for_epoch(p.leader_epoch)
        return OffsetForLeaderPartitionResult(
            partition=p.partition, leader_epoch=epoch, end_offset=end
        )

    def _list_offset(
        self, tp: TopicPartition, p: ListOffsetsPartition
    ) -> ListOffsetsPartitionResponse:
        error = self._fenced(tp, p.current_leader_epoch)
        if error is not None:
            return ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=error)
        log = self.logs[tp]
        offset = log.log_end_offset if p.timestamp == -1 else log.log_start_offset
        return ListOffsetsPartitionResponse(
            partition_index=p.partition_index, timestamp=-1, offset=offset
        )

    def _fetch(self, msg: FetchRequestData) -> FetchResponseData:
        topics = []
        for t in msg.topics:
            parts = []
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                error = self._fenced(tp, p.current_leader_epoch)
                if error is not None:
                    parts.append(FetchPartitionData(partition_index=p.partition, error_code=error))
                    continue
                log = self.logs[tp]
                try:
                    read = log.read(p.fetch_offset, p.partition_max_bytes)
                except KafkaApiError as exc:
                    parts.append(
                        FetchPartitionData(partition_index=p.partition, error_code=exc.code)
                    )
                    continue
                hw = self.high_watermarks.get(tp, 0)
                self.high_watermarks[tp] = max(hw, min(p.fetch_offset, log.log_end_offset))
                parts.append(
                    FetchPartitionData(
                        partition_index=p.partition,
                        high_watermark=hw,
                        last_stable_offset=hw,
                        log_start_offset=log.log_start_offset,
                        records=read.records,
                    )
                )
            topics.append(FetchTopicResponse(topic=t.topic, partitions=tuple(parts)))
        return FetchResponseData(responses=tuple(topics))


@dataclass
class ReplicationRig:
    """Leader broker 0 (``LogsLeader``) and follower broker 1 (one ``ReplicaFetcher``)."""

    network: Network
    clock: VirtualClock
    sink: MemorySink
    leader: LogsLeader
    follower: LogsFollower
    fetcher: ReplicaFetcher
    nodes: dict[str, Node] = field(default_factory=dict)

    async def status(self) -> FetcherStatus:
        reply = await self.nodes["broker-0"].ask(self.fetcher.ref, FetcherStatusRequest())
        assert isinstance(reply, FetcherStatus)
        return reply

    async def until(self, condition: Callable[[], bool], timeout: float = 600.0) -> None:
        """Wait until ``condition()`` holds, checking every 50 ms of virtual time, for at
        most ``timeout`` virtual seconds."""
        with anyio.fail_after(timeout):
            while not condition():
                await self.clock.sleep(0.05)


@asynccontextmanager
async def replication_rig(
    leader_logs: Mapping[TopicPartition, Log],
    epochs: dict[TopicPartition, int],
    follower_logs: Mapping[TopicPartition, Log],
    clock: VirtualClock,
    *,
    config: FetcherConfig | None = None,
) -> AsyncIterator[ReplicationRig]:
    sink = MemorySink()
    tracer = Tracer()
    tracer.add_sink(sink)
    network = Network(InProcessTransport(), tracer=tracer, rng=random.Random(0), clock=clock)
    async with anyio.create_task_group() as tg:
        await tg.start(network.run)
        nodes = {}
        for name in ("broker-0", "broker-1"):
            node = Node(name, attach=network.attach, clock=clock, tracer=tracer)
            await tg.start(node.run)
            nodes[name] = node
        leader = LogsLeader(leader_logs, epochs)
        await nodes["broker-0"].spawn(leader)
        follower = LogsFollower(follower_logs)
        fetcher = ReplicaFetcher(
            BrokerId(1), BrokerId(0), 0, lambda _fetcher: follower, config=config
        )
        await nodes["broker-1"].spawn(fetcher)
        yield ReplicationRig(network, clock, sink, leader, follower, fetcher, nodes)
        tg.cancel_scope.cancel()
