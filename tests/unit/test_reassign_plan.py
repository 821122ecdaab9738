"""The pure half of ``kemu reassign-partitions`` against the cases of Kafka 2.7's
``ReassignPartitionsUnitTest``: the move map of in-flight and proposed reassignments and
the throttles it gives (``testMoveMap``), the ``--generate`` arguments
(``testParseGenerateAssignmentArgs``) and a candidate assignment over too few brokers
(``testGenerateAssignmentFailsWithoutEnoughReplicas``)."""

from __future__ import annotations

import random

import pytest

from actors.admin.assignment import BrokerMetadata
from cluster.cli.reassign_plan import (
    Ongoing,
    PartitionMove,
    ReassignCommandError,
    calculate_assignment,
    follower_throttles,
    leader_throttles,
    parse_generate_args,
    proposed_move_map,
    reassigning_brokers,
)
from protocol.control import TopicPartition
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId, TopicName


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(TopicName(topic), partition)


def test_move_map_and_its_throttles() -> None:
    """foo-0 (1,2,3 adding 4 removing 3) re-proposed as 1,2,5; foo-1 (4,5,6 adding 7,8
    removing 4,5) left in flight; bar-0 proposed 1,2,3 from 2,3,4; baz-0 untouched."""
    moves = proposed_move_map(
        {
            tp("foo", 0): Ongoing((1, 2, 3), (4,), (3,)),
            tp("foo", 1): Ongoing((4, 5, 6), (7, 8), (4, 5)),
        },
        {tp("foo", 0): (1, 2, 5), tp("bar", 0): (1, 2, 3)},
        {
            tp("foo", 0): (1, 2, 3),
            tp("foo", 1): (4, 5, 6),
            tp("bar", 0): (2, 3, 4),
            tp("baz", 0): (1, 2, 3),
        },
    )
    assert moves == {
        "foo": {0: PartitionMove({1, 2, 3}, {5}), 1: PartitionMove({4, 5, 6}, {7, 8})},
        "bar": {0: PartitionMove({2, 3, 4}, {1})},
    }
    assert leader_throttles(moves) == {"foo": "0:1,0:2,0:3,1:4,1:5,1:6", "bar": "0:2,0:3,0:4"}
    assert follower_throttles(moves) == {"foo": "0:5,1:7,1:8", "bar": "0:1"}
    assert reassigning_brokers(moves) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_throttle_lists_sort_as_strings() -> None:
    """A ``TreeSet[String]``: partition 10 sorts before partition 2."""
    moves = proposed_move_map(
        {}, {tp("t", 10): (0,), tp("t", 2): (0,)}, {tp("t", 10): (1,), tp("t", 2): (1,)}
    )
    assert leader_throttles(moves) == {"t": "10:1,2:1"}
    assert follower_throttles(moves) == {"t": "10:0,2:0"}


DUP_BROKERS = "Broker list contains duplicate entries: "
FOO = '{"topics": [{"topic": "foo"}], "version":1}'


@pytest.mark.parametrize(
    ("topics", "brokers", "outcome"),
    [
        (FOO, "1,1,2", DUP_BROKERS + "1"),
        (FOO, "5,2,3,4,5", DUP_BROKERS + "5"),
        (FOO, "5,2,3,4", ([5, 2, 3, 4], ["foo"])),
        ('{"topics": [{"topic": "foo"},{"topic": "foo"}], "version":1}', "5,2,3,4",
         "List of topics to reassign contains duplicate entries: foo"),
        ('{"topics": [{"topic": "foo"},{"topic": "bar"}], "version":1}', "5,3,4,",
         ([5, 3, 4], ["foo", "bar"])),
        ('{"topics": []}', "5,,3", 'For input string: ""'),
    ],
)  # fmt: skip
def test_parse_generate_args(topics: str, brokers: str, outcome: object) -> None:
    if isinstance(outcome, str):
        with pytest.raises(ReassignCommandError, match=f"^{outcome}$"):
            parse_generate_args(topics, brokers)
    else:
        assert parse_generate_args(topics, brokers) == outcome


def test_generate_needs_enough_brokers() -> None:
    current = {tp("foo", 0): (0, 1, 2), tp("foo", 1): (1, 2, 3)}
    with pytest.raises(KafkaApiError) as raised:
        calculate_assignment(
            current, [BrokerMetadata(BrokerId(0)), BrokerMetadata(BrokerId(1))], random.Random(1)
        )
    assert raised.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
    assert str(raised.value) == "Replication factor: 3 larger than available brokers: 2."
    brokers = [BrokerMetadata(BrokerId(b)) for b in (0, 1, 2, 3)]
    proposed = calculate_assignment(current, brokers, random.Random(1))
    assert sorted(proposed) == [tp("foo", 0), tp("foo", 1)]
    assert all(len(set(r)) == 3 and set(r) <= {0, 1, 2, 3} for r in proposed.values())
