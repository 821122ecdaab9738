"""Admin operations of a scenario: through a broker's Kafka API or kafka-topics' store path.

``via: wire`` sends the typed Kafka request a client's would decode to
(``protocol.kafka_api``) from the run's client node to one broker, exactly what the
broker's listener hands it: a broker that is not the controller forwards it, the
purgatory answers once the metadata has propagated or the request timed out. (The run
stays in-process, so no socket is involved and a deterministic run stays deterministic.)
``via: store`` runs ``kemu topics --zookeeper`` (``cluster.cli.topics``) against the
cluster's store: the ``AdminZkClient`` path, with its own store session.

``reassign_partitions`` and ``preferred_election`` with ``via: store`` (their default) run
what ``kemu reassign-partitions --execute --zookeeper`` (``cluster.cli.reassign``) and
``kemu leader-election --election-type preferred --zookeeper``
(``cluster.cli.leader_election``) run, on a store session of their own, with the same
checks and messages; with ``via: wire`` they send the AlterPartitionReassignments or
ElectLeaders request those tools send over ``--bootstrap-server``, to one broker, as the
topic operations do.

The outcome is a Kafka error name (``NONE`` on success) for the wire, ``NONE`` or
``ERROR`` for the store path, with what the command printed as the detail.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from actors.broker.broker import broker_ref
from actors.zk.store import StoreSession
from cluster.chaos.harness import ChaosStepError, Harness
from cluster.chaos.model import (
    AddPartitions,
    AlterConfigs,
    CreateTopic,
    DeleteTopic,
    PreferredElection,
    ReassignPartitions,
)
from protocol.base import Message
from protocol.control import TopicPartition
from protocol.errors import AskTimeoutError, ErrorCode, KemuError, RemoteError
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequestData,
    AlterConfigsResource,
    AlterConfigsResponseData,
    AlterPartitionReassignmentsRequestData,
    AlterPartitionReassignmentsResponseData,
    ConfigResource,
    ConfigResourceType,
    CreatableTopic,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreatePartitionsTopic,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    ElectLeadersRequestData,
    ElectLeadersResponseData,
    ElectLeadersTopic,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    PartitionAssignment,
    ReassignablePartition,
    ReassignableTopic,
    TopicConfig,
)

__all__ = ["AdminOp", "AdminOutcome", "run_admin"]

TopicOp = CreateTopic | DeleteTopic | AddPartitions
AdminOp = TopicOp | AlterConfigs | ReassignPartitions | PreferredElection

STORE_ADDRESS: Final = "embedded://chaos"
"""What the store-path commands are told the store is (the run hands them its store)."""

RETRY_BACKOFF: Final = 0.1  # retry.backoff.ms of Kafka's admin client


@dataclass(frozen=True)
class AdminOutcome:
    error: str  # NONE, a Kafka error name, ERROR (store path), or NO_ANSWER
    detail: str = ""
    broker: int | None = None
    attempts: int = 1

    def meets(self, outcome: str) -> bool:
        """Whether this is the ``outcome`` the step asked for (see ``cluster.chaos.model``)."""
        if outcome == "any":
            return True
        if outcome == "ok":
            return self.error == "NONE"
        if outcome == "error":
            return self.error != "NONE"
        return self.error == outcome


async def run_admin(h: Harness, op: AdminOp) -> AdminOutcome:
    outcome = await _run_admin(h, op)
    if isinstance(op, CreateTopic) and outcome.error == "NONE":
        policy = op.configs.get("cleanup.policy", h.spec.config.get("log.cleanup.policy", ""))
        if _compacts(policy):
            h.compacted_topics.add(op.topic)
        else:
            h.compacted_topics.discard(op.topic)
    if isinstance(op, AlterConfigs):
        await _note_cleanup_policy(h, op, outcome)
    return outcome


def _compacts(policy: str | None) -> bool:
    return "compact" in (policy or "").replace(" ", "").split(",")


async def _note_cleanup_policy(h: Harness, op: AlterConfigs, outcome: AdminOutcome) -> None:
    """After an ``alter_configs`` step, whatever its outcome (an alteration whose answer
    was lost may still have been written): a topic whose ``cleanup.policy``, as a
    DescribeConfigs to the broker asked then says (the overrides from the store, else the
    broker's default), holds ``compact`` joins ``compacted_topics``. A topic leaves it only
    when created again: logs compacted while the policy held it keep the holes each
    replica's cleaner made at its own time, after a switch back to ``delete`` too. If the
    broker cannot say, a successful step's own ``cleanup.policy`` decides."""
    policy: str | None = None
    known = False
    broker = outcome.broker
    if broker is not None and h.is_running(broker):
        request = DescribeConfigsRequestData(
            resources=(
                ConfigResource(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=op.topic,
                    configuration_keys=("cleanup.policy",),
                ),
            )
        )
        try:
            reply = await h.client.ask(
                broker_ref(broker), request, timeout=op.timeout_ms / 1000 + 10.0
            )
        except (AskTimeoutError, RemoteError):
            reply = None
        if isinstance(reply, DescribeConfigsResponseData):
            for result in reply.results:
                if result.error_code is ErrorCode.NONE:
                    known = True
                    policy = next((c.value for c in result.configs), None)
    if not known and outcome.error == "NONE":
        policy = op.configs.get("cleanup.policy")
    if _compacts(policy):
        h.compacted_topics.add(op.topic)


async def _run_admin(h: Harness, op: AdminOp) -> AdminOutcome:
    if isinstance(op, ReassignPartitions) and op.via == "store":
        return await _reassign(h, op)
    if isinstance(op, PreferredElection) and op.via == "store":
        return await _elect(h, op)
    if isinstance(op, ReassignPartitions | PreferredElection | AlterConfigs):
        return await _wire(h, op)  # alter_configs: the wire only (the model refuses store)
    if op.via == "store":
        return await _store(h, op)
    return await _wire(h, op)


def _request(op: TopicOp) -> Message:
    name = TopicName(op.topic)
    match op:
        case CreateTopic():
            assignments = tuple(
                PartitionAssignment(partition=p, broker_ids=tuple(BrokerId(b) for b in replicas))
                for p, replicas in sorted((op.assignment or {}).items())
            )
            return CreateTopicsRequestData(
                topics=(
                    CreatableTopic(
                        name=name,
                        num_partitions=-1 if assignments else op.partitions,
                        replication_factor=-1 if assignments else op.replication_factor,
                        assignments=assignments,
                        configs=tuple(TopicConfig(name=k, value=v) for k, v in op.configs.items()),
                    ),
                ),
                timeout_ms=op.timeout_ms,
            )
        case DeleteTopic():
            return DeleteTopicsRequestData(topics=(name,), timeout_ms=op.timeout_ms)
        case AddPartitions():
            return CreatePartitionsRequestData(
                topics=(CreatePartitionsTopic(name=name, count=op.count),),
                timeout_ms=op.timeout_ms,
            )


RETRIABLE: Final = frozenset({"NOT_CONTROLLER", "NO_ANSWER"})


async def _wire(h: Harness, op: AdminOp) -> AdminOutcome:
    attempt = 0
    while True:
        outcome = await _send(h, op)
        if outcome.error not in RETRIABLE or attempt >= op.retries:
            return dataclasses.replace(outcome, attempts=attempt + 1)
        attempt += 1
        await h.clock.sleep(RETRY_BACKOFF)


async def _send(h: Harness, op: AdminOp) -> AdminOutcome:
    broker = await h.resolve(op.broker)
    if not h.is_running(broker):
        raise ChaosStepError(f"broker {broker} is not running")
    try:
        if isinstance(op, ReassignPartitions | PreferredElection):
            request = await _tool_request(h, broker, op)
        elif isinstance(op, AlterConfigs):
            request = _alter_request(op)
        else:
            request = _request(op)
        reply = await h.client.ask(broker_ref(broker), request, timeout=op.timeout_ms / 1000 + 10.0)
    except AskTimeoutError:
        return AdminOutcome("NO_ANSWER", "no answer in time", broker)
    except RemoteError as exc:
        return AdminOutcome(exc.code.name, exc.detail, broker)
    match reply:
        case CreateTopicsResponseData(topics=(result, *_)):
            return AdminOutcome(result.error_code.name, result.error_message or "", broker)
        case DeleteTopicsResponseData(topics=(result, *_)):
            return AdminOutcome(result.error_code.name, result.error_message or "", broker)
        case CreatePartitionsResponseData(results=(result, *_)):
            return AdminOutcome(result.error_code.name, result.error_message or "", broker)
        case AlterPartitionReassignmentsResponseData() | ElectLeadersResponseData():
            return _first_error(reply, broker)
        case (
            AlterConfigsResponseData(results=(result, *_))
            | IncrementalAlterConfigsResponseData(results=(result, *_))
        ):
            return AdminOutcome(result.error_code.name, result.error_message or "", broker)
    return AdminOutcome("UNKNOWN_SERVER_ERROR", f"unexpected answer {type(reply).__name__}", broker)


def _alter_request(op: AlterConfigs) -> Message:
    """The request ``kafka-configs --bootstrap-server --entity-type topics --alter`` sends
    for ``op``: AlterConfigs with the whole new set, or IncrementalAlterConfigs with a
    SET per config and a DELETE per name of ``delete``."""
    configs = tuple(AlterableConfig(name=k, value=v) for k, v in op.configs.items())
    if not op.incremental:
        resource = AlterConfigsResource(
            resource_type=ConfigResourceType.TOPIC, resource_name=op.topic, configs=configs
        )
        return AlterConfigsRequestData(resources=(resource,))
    deletions = tuple(
        AlterableConfig(name=name, value=None, operation=AlterConfigOp.DELETE) for name in op.delete
    )
    resource = AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC,
        resource_name=op.topic,
        configs=configs + deletions,
    )
    return IncrementalAlterConfigsRequestData(resources=(resource,))


async def _tool_request(
    h: Harness, broker: int, op: ReassignPartitions | PreferredElection
) -> Message:
    """The request a tool's ``--bootstrap-server`` path sends for ``op``: the targets of
    ``kafka-reassign-partitions --execute``, or ``kafka-leader-election --election-type
    preferred`` of the step's partitions (every partition the broker's metadata has for
    the topic, when it names none)."""
    topic = TopicName(op.topic)
    if isinstance(op, ReassignPartitions):
        return AlterPartitionReassignmentsRequestData(
            topics=(
                ReassignableTopic(
                    name=topic,
                    partitions=tuple(
                        ReassignablePartition(
                            partition_index=p, replicas=tuple(BrokerId(b) for b in replicas)
                        )
                        for p, replicas in sorted(op.assignment.items())
                    ),
                ),
            ),
            timeout_ms=op.timeout_ms,
        )
    partitions = op.partitions
    if partitions is None:
        known = await h.client.ask(
            broker_ref(broker),
            MetadataRequestData(topics=(topic,), allow_auto_topic_creation=False),
            timeout=op.timeout_ms / 1000 + 10.0,
        )
        assert isinstance(known, MetadataResponseData)
        partitions = tuple(sorted(p.partition for t in known.topics for p in t.partitions))
    return ElectLeadersRequestData(
        topic_partitions=(ElectLeadersTopic(topic=topic, partitions=partitions),),
        election_type=0,
        timeout_ms=op.timeout_ms,
    )


def _first_error(
    reply: AlterPartitionReassignmentsResponseData | ElectLeadersResponseData, broker: int
) -> AdminOutcome:
    """The request's own error, else the first partition's that failed (by topic, then
    partition; an election not needed is no failure, as ``LeaderElectionCommand`` has it),
    else NONE."""
    if reply.error_code is not ErrorCode.NONE:
        message = (
            reply.error_message
            if isinstance(reply, AlterPartitionReassignmentsResponseData)
            else None
        )
        return AdminOutcome(reply.error_code.name, message or "", broker)
    if isinstance(reply, AlterPartitionReassignmentsResponseData):
        failed = [
            (t.name, p.partition_index, p.error_code, p.error_message)
            for t in reply.responses
            for p in t.partitions
        ]
    else:
        failed = [
            (t.topic, p.partition_id, p.error_code, p.error_message)
            for t in reply.results
            for p in t.partition_results
        ]
    benign = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
    for topic, partition, code, message in sorted(failed, key=lambda f: (f[0], f[1])):
        if code not in benign:
            return AdminOutcome(code.name, f"{topic}-{partition}: {message or ''}".strip(), broker)
    return AdminOutcome("NONE", "", broker)


def store_command(op: TopicOp) -> list[str]:
    """The ``kemu topics`` arguments of ``op`` (the store address is not used: the run
    hands the command its store)."""
    argv = ["--zookeeper", STORE_ADDRESS, "--topic", op.topic]
    match op:
        case CreateTopic():
            argv.append("--create")
            if op.assignment:
                groups = (
                    ":".join(str(b) for b in replicas)
                    for _, replicas in sorted(op.assignment.items())
                )
                argv += ["--replica-assignment", ",".join(groups)]
            else:
                argv += [
                    "--partitions",
                    str(op.partitions),
                    "--replication-factor",
                    str(op.replication_factor),
                ]
            for key, value in op.configs.items():
                argv += ["--config", f"{key}={value}"]
        case DeleteTopic():
            argv.append("--delete")
        case AddPartitions():
            argv += ["--alter", "--partitions", str(op.count)]
    return argv


async def _store(h: Harness, op: TopicOp) -> AdminOutcome:
    from cluster.cli.topics import run_topic_command

    out, err = io.StringIO(), io.StringIO()
    status = await run_topic_command(store_command(op), out=out, err=err, store=h.store, rng=h.rng)
    detail = " ".join((out.getvalue() + err.getvalue()).split())
    return AdminOutcome("NONE" if status == 0 else "ERROR", detail)


# ----------------------------------------------------------------------------- store-only tools


def reassignment_json(op: ReassignPartitions) -> str:
    """The ``--reassignment-json-file`` content of ``op`` (partitions in numeric order)."""
    partitions = [
        {"topic": op.topic, "partition": p, "replicas": list(replicas)}
        for p, replicas in sorted(op.assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions})


async def _reassign(h: Harness, op: ReassignPartitions) -> AdminOutcome:
    """``kemu reassign-partitions --zookeeper ... --execute`` with ``op``'s assignment."""
    from cluster.cli.reassign import ZkReassignCommand

    out = io.StringIO()
    text = reassignment_json(op)

    async def execute(session: StoreSession) -> None:
        await ZkReassignCommand(session, out, zookeeper_warnings=True).execute(text, -1)

    return await _on_store(h, "kemu-reassign", execute, out)


async def _elect(h: Harness, op: PreferredElection) -> AdminOutcome:
    """``kemu leader-election --zookeeper ... --election-type preferred`` for ``op``'s
    partitions (every partition the topic has now when it names none)."""
    from actors.zk import kafka_zk
    from cluster.cli.leader_election import LeaderElectionError, elect_preferred_leaders

    out = io.StringIO()
    topic = TopicName(op.topic)

    async def elect(session: StoreSession) -> None:
        partitions = op.partitions
        if partitions is None:
            assignment = await kafka_zk.get_topic_assignment(session, topic)
            if assignment is None:
                raise LeaderElectionError(f"Topic {topic} does not exist")
            partitions = tuple(sorted(assignment))
        requested = [TopicPartition(topic, p) for p in partitions]
        await elect_preferred_leaders(session, requested, out)

    return await _on_store(h, "kemu-leader-election", elect, out)


async def _on_store(
    h: Harness,
    name: str,
    body: Callable[[StoreSession], Awaitable[None]],
    out: io.StringIO,
) -> AdminOutcome:
    """Run a tool's body on a session of the cluster's store, as its command does: what
    it printed is the detail, a failure ("Error: ...") the outcome ERROR."""
    from cluster.cli.store_command import report_failure, with_session

    err = io.StringIO()
    try:
        await with_session(STORE_ADDRESS, h.store, name, body)
        status = 0
    except (KemuError, BaseExceptionGroup) as exc:
        status = report_failure(exc, out, err, on_stdout=[(KemuError, "Error: ")])
    detail = " ".join((out.getvalue() + err.getvalue()).split())
    return AdminOutcome("NONE" if status == 0 else "ERROR", detail)
