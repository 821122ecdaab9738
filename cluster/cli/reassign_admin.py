"""``kemu reassign-partitions --bootstrap-server``: Kafka 2.7's ``ReassignPartitionsCommand``
through the admin client, as its ``handleAction(adminClient, ...)`` runs it.

``--generate`` describes the topics to move and the live brokers of ``--broker-list``
(Metadata) and prints the current and a candidate assignment. ``--execute`` refuses while
any reassignment is in flight unless ``--additional`` (ListPartitionReassignments), checks
the target brokers are live, prints the current assignment to roll back with, sets the
throttles of ``--throttle`` / ``--replica-alter-log-dirs-throttle``
(IncrementalAlterConfigs: the rates on the brokers, the throttled-replica lists on the
topics) and starts the reassignments (AlterPartitionReassignments). ``--verify`` prints the
state of each partition of the file and, once no reassignment is in flight anywhere,
removes every throttle the tool may have set (``clearAllThrottles``). ``--cancel`` cancels
the file's partitions that are being reassigned (AlterPartitionReassignments with no
target) and removes the throttles. ``--list`` prints the reassignments in flight.

kemu serves no AlterReplicaLogDirs: a reassignment file that names a log dir other than
"any" is refused over ``--bootstrap-server`` with one line (the tool's log-dir moves and
their states are never printed).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TextIO

from actors.admin.assignment import NOT_ALL_RACKS_CLI_MESSAGE, BrokerMetadata
from cluster.cli.reassign_plan import (
    BROKER_THROTTLES,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPIC_THROTTLES,
    Ongoing,
    ReassignCommandError,
    TerseReassignmentError,
    calculate_assignment,
    clearing_line,
    current_assignment_text,
    follower_throttles,
    generate_text,
    leader_throttles,
    parse_execute_args,
    parse_generate_args,
    parse_reassignment,
    partition_state_line,
    proposed_move_map,
    reassigning_brokers,
    sorted_partitions,
    throttled_entities,
)
from cluster.kafka.client import KafkaAdminClient, api_error, java_exception
from protocol import jvm
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import TopicName
from protocol.kafka_api import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionReassignmentsResponseData,
    ConfigResourceType,
    ListPartitionReassignmentsResponseData,
)

__all__ = [
    "CANNOT_EXECUTE_BECAUSE_OF_EXISTING",
    "YOU_MUST_RUN_VERIFY_PERIODICALLY",
    "AdminReassignCommand",
]

CANNOT_EXECUTE_BECAUSE_OF_EXISTING: Final = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to"
    " override this and create a new partition assignment in addition to the existing one."
    " The --additional flag can also be used to change the throttle by resubmitting the"
    " current reassignment."
)
YOU_MUST_RUN_VERIFY_PERIODICALLY: Final = (
    "Warning: You must run --verify periodically, until the reassignment completes, to"
    " ensure the throttle is removed."
)
LOG_DIRS_NOT_SERVED: Final = (
    'kemu serves no AlterReplicaLogDirs: give every replica the log dir "any"'
)


def _failed(error: KafkaApiError) -> ReassignCommandError:
    """An admin call's ``.get()`` that threw: printed as "Error: <its message>"."""
    return ReassignCommandError(java_exception(error.code, error.detail))


def _ongoing(listed: ListPartitionReassignmentsResponseData) -> dict[TopicPartition, Ongoing]:
    if listed.error_code is not ErrorCode.NONE:
        raise _failed(api_error(listed.error_code, listed.error_message))
    return {
        TopicPartition(t.name, p.partition_index): Ongoing(
            tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
        )
        for t in listed.topics
        for p in t.partitions
    }


def _plural(items: Sequence[object]) -> str:
    return "" if len(items) == 1 else "s"


class AdminReassignCommand:
    """The admin-client path of ``ReassignPartitionsCommand``, on one client."""

    def __init__(self, client: KafkaAdminClient, out: TextIO) -> None:
        self._client = client
        self._out = out

    def _print(self, line: str) -> None:
        self._out.write(line + "\n")

    # ------------------------------------------------------------------ reads

    async def _reassignments(
        self, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, Ongoing]:
        wanted = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]
        return _ongoing(await self._client.list_partition_reassignments(wanted))

    async def _live_brokers(self) -> list[int]:
        return [b.broker_id for b in (await self._client.describe_cluster()).brokers]

    async def _replicas_of_topics(
        self, topics: Iterable[str]
    ) -> dict[TopicPartition, tuple[int, ...]]:
        """``describeTopics(...).all().get()``: every partition's replicas; a topic the
        cluster does not have fails the call."""
        names = list(dict.fromkeys(topics))
        try:
            described = await self._client.describe_topics(names)
        except KafkaApiError as exc:
            raise _failed(exc) from None
        return {
            TopicPartition(name, p.partition): tuple(p.replicas)
            for name, topic in described.items()
            for p in topic.partitions
        }

    # ------------------------------------------------------------------ --list

    async def list(self) -> None:
        """``curReassignmentsToString``: every reassignment in flight, by topic then
        partition, as the active controller lists it."""
        ongoing = await self._reassignments()
        if not ongoing:
            self._print("No partition reassignments found.")
            return
        lines = ["Current partition reassignments:"]
        for tp in sorted_partitions(ongoing):
            r = ongoing[tp]
            adding = f" adding: {','.join(map(str, r.adding))}." if r.adding else ""
            removing = f" removing: {','.join(map(str, r.removing))}." if r.removing else ""
            lines.append(f"{tp}: replicas: {','.join(map(str, r.replicas))}.{adding}{removing}")
        self._print("\n".join(lines))

    # ------------------------------------------------------------------ --generate

    async def generate(
        self, topics_json: str, broker_list: str, rack_aware: bool, rng: random.Random
    ) -> None:
        """``generateAssignment(adminClient, ...)``."""
        brokers, topics = parse_generate_args(topics_json, broker_list)
        current = await self._replicas_of_topics(topics)
        wanted = set(brokers)
        nodes = [
            BrokerMetadata(b.broker_id, b.rack if rack_aware else None)
            for b in (await self._client.describe_cluster()).brokers
            if b.broker_id in wanted
        ]
        rackless = sum(1 for n in nodes if n.rack is None)
        if rack_aware and rackless not in (0, len(nodes)):
            raise ReassignCommandError(NOT_ALL_RACKS_CLI_MESSAGE)
        try:
            proposed = calculate_assignment(current, nodes, rng)
        except KafkaApiError as exc:
            raise ReassignCommandError(str(exc)) from None
        self._print(generate_text(current, proposed))

    # ------------------------------------------------------------------ --execute

    async def execute(
        self, text: str, additional: bool, throttle: int, log_dir_throttle: int
    ) -> None:
        """``executeAssignment(adminClient, ...)``."""
        proposed_entries, parsed = parse_execute_args(text)
        if parsed.log_dirs:
            raise ReassignCommandError(LOG_DIRS_NOT_SERVED)
        proposed = dict(proposed_entries)
        ongoing = await self._reassignments()
        if not additional and ongoing:
            raise TerseReassignmentError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
        live = set(await self._live_brokers())
        targeted = jvm.scala_immutable_order(
            list(dict.fromkeys(b for _, replicas in proposed_entries for b in replicas))
        )
        for broker in targeted:
            if broker not in live:
                raise ReassignCommandError(f"Unknown broker id {broker}")
        current = await self._replicas_of_topics(tp.topic for tp in proposed)
        current = {tp: r for tp, r in current.items() if tp in proposed}
        self._print(current_assignment_text(proposed, current))
        if throttle >= 0 or log_dir_throttle >= 0:
            self._print(YOU_MUST_RUN_VERIFY_PERIODICALLY)
            if throttle >= 0:
                await self._set_reassignment_throttle(ongoing, proposed, current, throttle)
            if log_dir_throttle >= 0:
                # calculateMovingBrokers: the brokers of log-dir moves, which kemu has none of.
                self._print(
                    f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s"
                )
        answer = await self._client.alter_partition_reassignments(
            {(tp.topic, tp.partition): list(replicas) for tp, replicas in proposed_entries}
        )
        errors = _partition_errors(proposed, answer)
        if errors:
            raise TerseReassignmentError(
                "Error reassigning partition(s):\n"
                + "\n".join(f"{tp}: {errors[tp]}" for tp in sorted_partitions(errors))
            )
        started = sorted_partitions(proposed)
        self._print(
            f"Successfully started partition reassignment{_plural(started)} for "
            + ",".join(map(str, started))
        )

    async def _set_reassignment_throttle(
        self,
        ongoing: Mapping[TopicPartition, Ongoing],
        proposed: Mapping[TopicPartition, Sequence[int]],
        current: Mapping[TopicPartition, Sequence[int]],
        throttle: int,
    ) -> None:
        """``modifyReassignmentThrottle``: the throttled-replica lists on each topic moved
        (in flight or proposed), then both rates on each broker data moves from or to."""
        moves = proposed_move_map(ongoing, proposed, current)
        leaders, followers = leader_throttles(moves), follower_throttles(moves)
        await self._alter(
            ConfigResourceType.TOPIC,
            {
                topic: [(LEADER_REPLICAS, leaders[topic]), (FOLLOWER_REPLICAS, followers[topic])]
                for topic in moves
            },
        )
        rate = str(throttle)
        await self._alter(
            ConfigResourceType.BROKER,
            {
                str(b): [(LEADER_RATE, rate), (FOLLOWER_RATE, rate)]
                for b in reassigning_brokers(moves)
            },
        )
        self._print(f"The inter-broker throttle limit was set to {throttle} B/s")

    async def _alter(
        self,
        resource_type: ConfigResourceType,
        changes: Mapping[str, Sequence[tuple[str, str | None]]],
    ) -> None:
        """``incrementalAlterConfigs(...).all().get()``: each entity's configs SET to a
        value, or DELETEd where the value is None; the first failure fails the command."""
        if not changes:
            return
        resources = [
            AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=tuple(
                    AlterableConfig(
                        name=key,
                        value=value,
                        operation=AlterConfigOp.SET if value is not None else AlterConfigOp.DELETE,
                    )
                    for key, value in configs
                ),
            )
            for name, configs in changes.items()
        ]
        results = await self._client.incremental_alter_configs(resources)
        for resource in resources:
            result = results.get((resource.resource_type, resource.resource_name))
            if result is not None and result.error_code is not ErrorCode.NONE:
                raise _failed(api_error(result.error_code, result.error_message))

    # ------------------------------------------------------------------ --verify

    async def verify(self, text: str, preserve_throttles: bool) -> None:
        """``verifyAssignment(adminClient, ...)``: the partitions' states, then (with no
        log-dir moves, an empty line where their states would be) the throttles removed
        once no reassignment is in flight."""
        parsed = parse_reassignment(text)
        if parsed.log_dirs:
            raise ReassignCommandError(LOG_DIRS_NOT_SERVED)
        ongoing = await self._reassignments()
        targets = dict(parsed.partitions)
        missing_topics = [tp.topic for tp in targets if tp not in ongoing]
        described = await self._client.metadata(list(dict.fromkeys(missing_topics)))
        topics = {t.name: t for t in described.topics}
        lines = ["Status of partition reassignment:"]
        for tp in sorted_partitions(targets):
            found = topics.get(TopicName(tp.topic))
            replicas: tuple[int, ...] = ()
            if tp not in ongoing and found is not None and found.error_code is ErrorCode.NONE:
                by_index = sorted(found.partitions, key=lambda p: p.partition)
                if len(by_index) == tp.partition:  # topicDescriptionFutureToState's off-by-one
                    raise ReassignCommandError(
                        f"Index {tp.partition} out of bounds for length {len(by_index)}"
                    )
                if tp.partition < len(by_index):
                    replicas = tuple(by_index[tp.partition].replicas)
            lines.append(partition_state_line(tp, tp in ongoing, replicas, targets[tp]))
        self._print("\n".join(lines))
        self._print("")  # verifyReplicaMoves: the states of no log-dir moves
        if not ongoing and not preserve_throttles:
            await self._clear_all_throttles(parsed.partitions)

    async def _clear_all_throttles(
        self, targets: Sequence[tuple[TopicPartition, tuple[int, ...]]]
    ) -> None:
        """``clearAllThrottles(adminClient, ...)``: the three rates deleted on every live
        broker and every target broker, the two lists on every topic of the file."""
        brokers, topics = throttled_entities(await self._live_brokers(), targets)
        self._print(clearing_line("broker", brokers))
        await self._alter(
            ConfigResourceType.BROKER,
            {str(b): [(key, None) for key in BROKER_THROTTLES] for b in brokers},
        )
        self._print(clearing_line("topic", topics))
        await self._alter(
            ConfigResourceType.TOPIC, {t: [(key, None) for key in TOPIC_THROTTLES] for t in topics}
        )

    # ------------------------------------------------------------------ --cancel

    async def cancel(self, text: str, preserve_throttles: bool) -> None:
        """``cancelAssignment(adminClient, ...)``."""
        parsed = parse_reassignment(text)
        if parsed.log_dirs:
            raise ReassignCommandError(LOG_DIRS_NOT_SERVED)
        wanted = list(dict.fromkeys(tp for tp, _ in parsed.partitions))
        ongoing = await self._reassignments(wanted)
        moving = sorted_partitions(tp for tp, r in ongoing.items() if r.adding or r.removing)
        if moving:
            answer = await self._client.alter_partition_reassignments(
                {(tp.topic, tp.partition): None for tp in moving}
            )
            errors = _partition_errors(moving, answer)
            if errors:
                raise TerseReassignmentError(
                    f"Error cancelling partition reassignment{_plural(list(errors))} for:\n"
                    + "\n".join(f"{tp}: {errors[tp]}" for tp in sorted_partitions(errors))
                )
            self._print(
                f"Successfully cancelled partition reassignment{_plural(moving)} for: "
                + ",".join(map(str, moving))
            )
        else:
            self._print("None of the specified partition reassignments are active.")
        self._print("None of the specified partition moves are active.")
        if not preserve_throttles:
            await self._clear_all_throttles(parsed.partitions)


def _partition_errors(
    requested: Iterable[TopicPartition], answer: AlterPartitionReassignmentsResponseData
) -> dict[TopicPartition, str]:
    """Each partition's failure as its exception's message; the request's own error fails
    every requested partition (Kafka's admin client)."""
    if answer.error_code is not ErrorCode.NONE:
        message = api_error(answer.error_code, answer.error_message).args[0]
        return dict.fromkeys(requested, message)
    return {
        TopicPartition(t.name, p.partition_index): api_error(p.error_code, p.error_message).args[0]
        for t in answer.responses
        for p in t.partitions
        if p.error_code is not ErrorCode.NONE
    }
