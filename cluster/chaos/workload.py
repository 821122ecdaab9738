"""The workload steps of a scenario: ``produce``, ``consume`` and ``verify``.

A producer sends typed Produce requests (``protocol.kafka_data.ProduceRequestData``) from
the run's client node to the leader of each partition, exactly what a broker's Kafka
listener hands its ``broker`` actor for a client's Produce: the broker's own
``KafkaApis`` / ``ReplicaManager.appendRecords`` handle it, acks=all waits in its
``DelayedProduce``. Nothing crosses a socket in one process, so a deterministic run stays
byte-identical; with broker processes the same request goes over the Kafka wire to the
broker's listener (``Harness.ask_broker``).
Each record is a v2 batch entry encoded as a Kafka producer encodes it
(``cluster.kafka.records.encode_batch``); its key is its identity (``<producer>-<n>``),
its value derived from it, its timestamp the run's wall clock (as a producer stamps it;
the brokers' retention counts from it). Every answer (or its absence) is traced as
``produce_result`` with the identities of the records it carried.

A consumer reads each partition from its leader with consumer Fetches (``replica_id``
-1: below the high watermark) from offset 0 up to the high watermark and traces what it
saw as ``records_read``: the offsets and identities, the high watermark, the leader.
``verify`` first waits for the partition to settle (every running replica in the ISR,
caught up with the leader, the high watermark at the log end), reads each running
replica's whole log with debugging Fetches (``replica_id`` -2, which a follower serves up
to its log end) and traces them as ``replica_logs_read``, then reads as a consumer with
``settled`` set. The invariants (``actors.invariants``: ``acknowledged_writes_kept``,
``one_record_per_offset``, ``follower_logs_match``) judge those events.

Leaders are looked up in the partition state znodes, through the run's store session
(the controller's own record of them), as a client looks them up in its metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from actors.zk import kafka_zk
from cluster.chaos.harness import ChaosStepError, Harness
from cluster.chaos.model import Consume, Produce, Verify
from cluster.kafka.records import (
    ProducerRecord,
    RecordsError,
    batch_records,
    batch_valid,
    encode_batch,
    read_batches,
)
from protocol.control import TopicPartition
from protocol.errors import (
    AskTimeoutError,
    BrokerDisconnectedError,
    ErrorCode,
    KemuError,
    RemoteError,
)
from protocol.ids import TopicName
from protocol.kafka_data import (
    CONSUMER_REPLICA_ID,
    DEBUG_REPLICA_ID,
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from protocol.trace import TraceKind

__all__ = [
    "WORKLOAD_ACTOR",
    "Leadership",
    "PartitionRead",
    "consume",
    "emit",
    "identity_of",
    "leader_of",
    "produce",
    "record_for",
    "topic_assignment",
    "verify_partition",
]

WORKLOAD_ACTOR: Final = "workload"
"""The actor of the chaos node the workload events are traced under."""

RETRY_BACKOFF: Final = 0.1  # retry.backoff.ms of Kafka's producer
RETRIABLE: Final = frozenset(
    {
        "NO_ANSWER",
        "NETWORK_EXCEPTION",
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_OR_FOLLOWER",
        "REQUEST_TIMED_OUT",
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "KAFKA_STORAGE_ERROR",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
    }
)
"""The errors Kafka's producer retries (``RetriableException`` subclasses, a disconnect's
``NetworkException`` among them), and no answer."""
FETCH_PARTITION_MAX_BYTES: Final = 1 << 20
READ_ATTEMPTS: Final = 3
"""Consumer reads of a partition that got NOT_LEADER_OR_FOLLOWER or no answer, 100 ms apart."""
READ_TIMEOUT: Final = 5.0
"""Seconds a Fetch of a read is waited for."""
ASK_MARGIN: Final = 1.0
"""Seconds a request is waited for past its own timeout before it counts as unanswered."""
_PAD: Final = b"\x00"


# ----------------------------------------------------------------------------- records


def record_for(
    identity: str, *, key_size: int, value_size: int, timestamp_ms: int
) -> ProducerRecord:
    """The record of ``identity``: the identity as its key (NUL-padded to ``key_size``),
    ``value_size`` bytes of the identity repeated as its value."""
    key = identity.encode().ljust(key_size, _PAD)
    unit = identity.encode() + b"|"
    value = (unit * (value_size // len(unit) + 1))[:value_size]
    return ProducerRecord(value=value, key=key, timestamp_ms=timestamp_ms)


def identity_of(key: bytes | None) -> str:
    """A record's identity from its key (``?`` for a record without one)."""
    return "?" if key is None else key.rstrip(_PAD).decode(errors="replace")


# ----------------------------------------------------------------------------- leaders


@dataclass(frozen=True, slots=True)
class Leadership:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


async def leader_of(h: Harness, topic: str, partition: int) -> Leadership | None:
    try:
        state = await kafka_zk.get_partition_state(
            h.session, TopicPartition(TopicName(topic), partition)
        )
    except KemuError:
        return None
    if state is None:
        return None
    s = state.state
    return Leadership(int(s.leader), int(s.leader_epoch), tuple(int(r) for r in s.isr))


async def topic_assignment(h: Harness, topic: str) -> dict[int, tuple[int, ...]] | None:
    try:
        found = await kafka_zk.get_topic_assignment(h.session, TopicName(topic))
    except KemuError:
        return None
    if found is None:
        return None
    return {p: tuple(int(r) for r in a.replicas) for p, a in found.items()}


def emit(h: Harness, type_: str, **fields: Any) -> None:
    h.tracer.emit(TraceKind.EVENT, node="chaos", actor=WORKLOAD_ACTOR, type=type_, **fields)


# ----------------------------------------------------------------------------- produce


async def produce(h: Harness, step: Produce, producer: str) -> list[str]:
    """Carry out a ``produce`` step (see the module doc); the last answer of each request
    (a Kafka error name, ``NONE``, or ``NO_ANSWER``)."""
    assignment = await topic_assignment(h, step.topic)
    if assignment is None:
        raise ChaosStepError(f"topic {step.topic} does not exist")
    if step.partition is not None and step.partition not in assignment:
        raise ChaosStepError(f"topic {step.topic} has no partition {step.partition}")
    partitions = [step.partition] if step.partition is not None else sorted(assignment)
    start = h.clock.now()
    outcomes: list[str] = []
    acked = 0
    sent = 0
    for number, first in enumerate(range(0, step.count, step.batch)):
        if step.rate is not None:
            await h.clock.sleep(max(0.0, start + first / step.rate - h.clock.now()))
        partition = partitions[number % len(partitions)]
        identities = [f"{producer}-{n}" for n in range(first, min(first + step.batch, step.count))]
        error = await _send(h, step, producer, partition, identities)
        outcomes.append(error)
        sent += len(identities)
        if error == "NONE":
            acked += len(identities)
    errors: dict[str, int] = {}
    for error in outcomes:
        errors[error] = errors.get(error, 0) + 1
    emit(
        h,
        "produce_finished",
        producer=producer,
        topic=step.topic,
        acks=step.required_acks,
        records=sent,
        answered_ok=acked,
        requests=dict(sorted(errors.items())),
    )
    return outcomes


async def _send(
    h: Harness, step: Produce, producer: str, partition: int, identities: Sequence[str]
) -> str:
    """One batch to its partition's leader, sent again while the answer is retriable,
    retries are left and its delivery timeout has not passed; its last answer
    (``NO_ANSWER`` for a request still unanswered when the batch expired)."""
    made = h.clock.now()
    deadline = None if step.delivery_timeout_ms is None else made + step.delivery_timeout_ms / 1000
    timestamp = h.clock.wall_ms()  # a producer stamps its wall clock; retention counts from it
    records = encode_batch(
        [
            record_for(
                i, key_size=step.key_size, value_size=step.value_size, timestamp_ms=timestamp
            )
            for i in identities
        ]
    )
    attempt = 0
    while True:
        error, broker, base_offset = await _produce_once(h, step, partition, records, deadline)
        emit(
            h,
            "produce_result",
            producer=producer,
            topic=step.topic,
            partition=partition,
            broker=broker,
            acks=step.required_acks,
            attempt=attempt,
            error=error,
            base_offset=base_offset,
            records=list(identities),
        )
        retries = step.max_retries
        if error not in RETRIABLE or (retries is not None and attempt >= retries):
            return error
        if deadline is not None and h.clock.now() + RETRY_BACKOFF >= deadline:
            # A batch past delivery.timeout.ms (RecordAccumulator.expiredBatches).
            emit(
                h,
                "produce_expired",
                producer=producer,
                topic=step.topic,
                partition=partition,
                attempts=attempt + 1,
                error=error,
                records=list(identities),
            )
            return error
        attempt += 1
        await h.clock.sleep(RETRY_BACKOFF)


async def _produce_once(
    h: Harness, step: Produce, partition: int, records: bytes, deadline: float | None
) -> tuple[str, int | None, int]:
    """(error, broker asked, base offset) of one Produce to the leader of the moment,
    waited for until its timeout (plus a margin) or the batch's ``deadline``. A leader
    that refuses the connection (its process is down) is not sent the batch: as Kafka's
    ``Sender`` holds a batch whose leader is not ready while the metadata is refreshed,
    the leader is looked up again after ``retry.backoff.ms`` (the connection itself is
    tried again after ``reconnect.backoff.ms``), for as long as the request would have
    been waited for: ``NO_ANSWER`` if it never got out. A leader whose process ends
    with the request in flight answers ``NETWORK_EXCEPTION`` at once (a disconnect;
    retriable: the batch is sent again after its back-off, as ``Sender`` does)."""
    wait = step.timeout_ms / 1000 + ASK_MARGIN
    if deadline is not None:  # in flight, it expires too (Sender.getExpiredInflightBatches)
        wait = max(0.0, min(wait, deadline - h.clock.now()))
    until = h.clock.now() + wait
    request = ProduceRequestData(
        acks=step.required_acks,
        timeout_ms=step.timeout_ms,
        topic_data=(
            ProduceTopicData(
                name=TopicName(step.topic),
                partition_data=(ProducePartitionData(index=partition, records=records),),
            ),
        ),
    )
    while True:
        leadership = await leader_of(h, step.topic, partition)
        if leadership is None or leadership.leader < 0:
            return "LEADER_NOT_AVAILABLE", None, -1
        # A leader that is paused or cut off still gets the request, which goes
        # unanswered, as a client that does not know yet waits for its request.timeout.ms.
        broker = leadership.leader
        try:
            reply = await h.ask_broker(broker, request, timeout=max(0.0, until - h.clock.now()))
        except BrokerDisconnectedError as exc:
            if exc.sent:
                return "NETWORK_EXCEPTION", broker, -1
            if h.clock.now() + RETRY_BACKOFF >= until:
                return "NO_ANSWER", broker, -1
            await h.clock.sleep(RETRY_BACKOFF)
            continue
        except AskTimeoutError:
            return "NO_ANSWER", broker, -1
        except RemoteError as exc:
            return exc.code.name, broker, -1
        break
    if not isinstance(reply, ProduceResponseData):
        return "UNKNOWN_SERVER_ERROR", broker, -1
    answer = reply.responses[0].partition_responses[0]
    return answer.error_code.name, broker, answer.base_offset


# ----------------------------------------------------------------------------- reading


@dataclass(slots=True)
class PartitionRead:
    """What reading one replica of a partition returned."""

    error: str = "NONE"
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = 0
    records: list[tuple[int, str]] = field(default_factory=list)


async def _read(
    h: Harness, broker: int, topic: str, partition: int, *, debug: bool
) -> PartitionRead:
    """Fetch ``topic``-``partition`` from ``broker`` from offset 0: as a consumer, up to the
    high watermark; ``debug``, the replica's whole log."""
    out = PartitionRead()
    offset = 0
    while True:
        request = FetchRequestData(
            max_wait_ms=0,
            min_bytes=0,
            replica_id=DEBUG_REPLICA_ID if debug else CONSUMER_REPLICA_ID,
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=FETCH_PARTITION_MAX_BYTES,
                        ),
                    ),
                ),
            ),
        )
        try:
            reply = await h.ask_broker(broker, request, timeout=READ_TIMEOUT)
        except AskTimeoutError:
            out.error = "NO_ANSWER"
            return out
        except RemoteError as exc:
            out.error = exc.code.name
            return out
        assert isinstance(reply, FetchResponseData)
        data = reply.responses[0].partitions[0]
        if data.error_code is not ErrorCode.NONE:
            out.error = data.error_code.name
            return out
        out.high_watermark = data.high_watermark
        out.log_start_offset = data.log_start_offset
        before = offset
        try:
            for header in read_batches(data.records):
                if not batch_valid(data.records, header):
                    out.records.append((header.base_offset, "!corrupt"))
                    offset = header.base_offset + header.last_offset_delta + 1
                    continue
                for record in batch_records(data.records, header):
                    if record.offset >= offset:
                        out.records.append((record.offset, identity_of(record.key)))
                offset = max(offset, header.base_offset + header.last_offset_delta + 1)
        except RecordsError as exc:
            out.error = f"CORRUPT_MESSAGE: {exc}"
            return out
        if offset == before or (not debug and offset >= data.high_watermark):
            break
    if not debug:
        out.records = [(o, i) for o, i in out.records if o < out.high_watermark]
    out.log_end_offset = offset
    return out


async def _consumer_read(
    h: Harness, topic: str, partition: int
) -> tuple[int | None, int, PartitionRead]:
    """A consumer's read of the partition from its leader of the moment, tried again on
    NOT_LEADER_OR_FOLLOWER or no answer: (leader, leader epoch, what was read)."""
    read = PartitionRead(error="LEADER_NOT_AVAILABLE")
    leader, epoch = None, -1
    for attempt in range(READ_ATTEMPTS):
        if attempt:
            await h.clock.sleep(RETRY_BACKOFF)
        leadership = await leader_of(h, topic, partition)
        if leadership is None or leadership.leader < 0 or not h.is_running(leadership.leader):
            read = PartitionRead(error="LEADER_NOT_AVAILABLE")
            continue
        leader, epoch = leadership.leader, leadership.leader_epoch
        read = await _read(h, leader, topic, partition, debug=False)
        if read.error not in ("NOT_LEADER_OR_FOLLOWER", "NO_ANSWER", "FENCED_LEADER_EPOCH"):
            break
    return leader, epoch, read


def _emit_read(
    h: Harness,
    reader: str,
    topic: str,
    partition: int,
    leader: int | None,
    epoch: int,
    read: PartitionRead,
    *,
    settled: bool,
) -> None:
    emit(
        h,
        "records_read",
        reader=reader,
        topic=topic,
        partition=partition,
        broker=leader,
        leader_epoch=epoch,
        error=read.error,
        high_watermark=read.high_watermark,
        log_start_offset=read.log_start_offset,
        settled=settled,
        records=[[o, i] for o, i in read.records],
    )


async def consume(h: Harness, step: Consume, reader: str) -> None:
    """Carry out a ``consume`` step: one consumer read of each partition, traced."""
    assignment = await topic_assignment(h, step.topic)
    if assignment is None:
        raise ChaosStepError(f"topic {step.topic} does not exist")
    for partition in step.partitions if step.partitions is not None else sorted(assignment):
        if partition not in assignment:
            raise ChaosStepError(f"topic {step.topic} has no partition {partition}")
        leader, epoch, read = await _consumer_read(h, step.topic, partition)
        _emit_read(h, reader, step.topic, partition, leader, epoch, read, settled=False)


async def _settled(
    h: Harness, topic: str, partition: int, replicas: Sequence[int]
) -> tuple[Leadership, dict[int, PartitionRead]] | None:
    """The partition's leadership and every running replica's log, if it has settled:
    a running leader, every running replica in the ISR and at the leader's log end, the
    leader's high watermark there too. A running replica whose log is in a failed log
    dir (its read is KAFKA_STORAGE_ERROR) is out of the ISR until its broker restarts:
    it counts as down."""
    leadership = await leader_of(h, topic, partition)
    if leadership is None or not h.is_running(leadership.leader):
        return None
    running = [r for r in replicas if h.is_running(r)]
    for replica in [r for r in running if r not in leadership.isr]:
        if (await _read(h, replica, topic, partition, debug=True)).error != "KAFKA_STORAGE_ERROR":
            return None
        running.remove(replica)
    logs = {r: await _read(h, r, topic, partition, debug=True) for r in running}
    own = logs[leadership.leader]
    if any(log.error != "NONE" for log in logs.values()):
        return None
    if own.high_watermark != own.log_end_offset:
        return None
    if any(log.log_end_offset != own.log_end_offset for log in logs.values()):
        return None
    return leadership, logs


async def verify_partition(
    h: Harness, topic: str, partition: int, reader: str, within: float
) -> bool:
    """``verify`` of one partition (see the module doc); whether it settled in time (if
    not, the replicas' logs and the consumer read are traced as they are, unsettled)."""
    assignment = await topic_assignment(h, topic)
    if assignment is None or partition not in assignment:
        raise ChaosStepError(f"topic {topic} has no partition {partition}")
    replicas = assignment[partition]
    found: list[tuple[Leadership, dict[int, PartitionRead]]] = []

    async def settled() -> bool:
        state = await _settled(h, topic, partition, replicas)
        if state is not None:
            found.append(state)
        return state is not None

    ok = await h.until(settled, within)
    if ok:
        leadership, logs = found[-1]
    else:
        leadership_now = await leader_of(h, topic, partition)
        if leadership_now is None:
            leadership_now = Leadership(-1, -1, ())
        leadership = leadership_now
        logs = {
            r: await _read(h, r, topic, partition, debug=True) for r in replicas if h.is_running(r)
        }
    emit(
        h,
        "replica_logs_read",
        reader=reader,
        topic=topic,
        partition=partition,
        leader=leadership.leader,
        leader_epoch=leadership.leader_epoch,
        isr=list(leadership.isr),
        replicas=list(replicas),
        caught_up=ok,
        compacted=topic in h.compacted_topics,
        logs=[
            {
                "broker": broker,
                "error": log.error,
                "high_watermark": log.high_watermark,
                "log_end_offset": log.log_end_offset,
                "records": [[o, i] for o, i in log.records],
            }
            for broker, log in sorted(logs.items())
        ],
    )
    leader, epoch, read = await _consumer_read(h, topic, partition)
    _emit_read(h, reader, topic, partition, leader, epoch, read, settled=ok)
    return ok


async def verify(h: Harness, step: Verify, reader: str) -> list[int]:
    """Carry out a ``verify`` step; the partitions that did not settle in time."""
    assignment = await topic_assignment(h, step.topic)
    if assignment is None:
        raise ChaosStepError(f"topic {step.topic} does not exist")
    unsettled = []
    for partition in step.partitions if step.partitions is not None else sorted(assignment):
        if not await verify_partition(h, step.topic, partition, reader, step.within):
            unsettled.append(partition)
    return unsettled
