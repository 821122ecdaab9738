"""Topic names, CreateTopics and CreatePartitions checks answer as Kafka 2.7 does: the same
error code, the same message text, and the same error first when several apply (spec
§4.2, §5.1, §10.1; cases from Kafka's TopicTest, AdminZkClientTest, AddPartitionsTest,
CreateTopicsRequestTest and TopicCommandWithZKClientTest).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.admin import (
    DUPLICATE_CREATE_PARTITIONS_MESSAGE,
    DUPLICATE_CREATE_TOPIC_MESSAGE,
    INTERNAL_TOPICS,
    QUEUED_FOR_DELETION_MESSAGE,
    AdminOperationError,
    BrokerConfig,
    BrokerMetadata,
    RackMode,
    TopicCreation,
    check_create_topic_request,
    collides,
    duplicate_topics,
    has_collision_chars,
    is_internal,
    new_partitions_assignment,
    plan_create_topic,
    resolve_counts,
    validate_create_partitions,
    validate_topic_create,
    validate_topic_name,
)
from protocol.errors import ErrorCode, KafkaApiError
from protocol.ids import BrokerId
from protocol.zkdata import ReplicaAssignment

B = BrokerId


def raises(call: Callable[[], object]) -> tuple[ErrorCode, str | None]:
    """The code and message of the ``KafkaApiError`` that ``call`` raises."""
    with pytest.raises(KafkaApiError) as excinfo:
        call()
    return excinfo.value.code, excinfo.value.detail


def brokers(*ids: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(B(i)) for i in ids]


def replicas(assignment: Mapping[int, Sequence[int]]) -> dict[int, ReplicaAssignment]:
    return {p: ReplicaAssignment(replicas=tuple(B(b) for b in r)) for p, r in assignment.items()}


def as_lists(assignment: Mapping[int, Sequence[int]]) -> dict[int, list[int]]:
    return {p: list(r) for p, r in assignment.items()}


INVALID_TOPIC = ErrorCode.INVALID_TOPIC_EXCEPTION
BAD_ASSIGNMENT = ErrorCode.INVALID_REPLICA_ASSIGNMENT

# ================================================================================= names


@pytest.mark.parametrize(
    "name", ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "a" * 249, "-"]
)
def test_valid_topic_names_pass(name: str) -> None:
    """Kafka's TopicTest valid names, up to 249 characters."""
    validate_topic_name(name)


def test_empty_name_is_refused() -> None:
    """An empty name gets Kafka's "can't be empty" message."""
    assert raises(lambda: validate_topic_name("")) == (
        INVALID_TOPIC,
        "Topic name is illegal, it can't be empty",
    )


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_names_are_refused(name: str) -> None:
    """``.`` and ``..`` would be directory names."""
    assert raises(lambda: validate_topic_name(name)) == (
        INVALID_TOPIC,
        'Topic name cannot be "." or ".."',
    )


def test_names_over_249_characters_are_refused_with_the_name() -> None:
    """250 characters is one too many; the message quotes the name."""
    name = "a" * 250
    assert raises(lambda: validate_topic_name(name)) == (
        INVALID_TOPIC,
        f"Topic name is illegal, it can't be longer than 249 characters, topic name: {name}",
    )


def test_length_counts_utf16_units_as_java_does() -> None:
    """125 emoji are 250 UTF-16 units: Java's length check fires before the character
    check."""
    name = "\U0001f600" * 125
    code, message = raises(lambda: validate_topic_name(name))
    assert code is INVALID_TOPIC
    assert message is not None
    assert message.startswith("Topic name is illegal, it can't be longer than 249")


ILLEGAL_CHARS = "/\\,\x00:\"';*? \t\r\n=\u00e9\u0661+#"
"""Kafka's TopicTest list, plus non-ASCII letters and digits and a few symbols."""


@pytest.mark.parametrize("char", list(ILLEGAL_CHARS))
def test_illegal_characters_are_refused(char: str) -> None:
    """Anything but ASCII letters, digits, '.', '_' and '-' is refused with Kafka's text."""
    name = f"Is{char}illegal"
    assert raises(lambda: validate_topic_name(name)) == (
        INVALID_TOPIC,
        f'Topic name "{name}" is illegal, it contains a character other than'
        " ASCII alphanumerics, '.', '_' and '-'",
    )


@given(st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=249))
def test_ascii_names_pass_exactly_when_every_character_is_legal(name: str) -> None:
    """Over ASCII, validity is "legal characters only, and not . or ..", nothing else."""
    legal = all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    if legal and name not in (".", ".."):
        validate_topic_name(name)
    else:
        with pytest.raises(KafkaApiError):
            validate_topic_name(name)


def test_internal_topics() -> None:
    """The two internal topics of Kafka 2.7."""
    assert frozenset({"__consumer_offsets", "__transaction_state"}) == INTERNAL_TOPICS
    assert is_internal("__consumer_offsets")
    assert not is_internal("_consumer_offsets")


def test_collision_chars() -> None:
    """Kafka's TopicTest: '.' or '_' anywhere makes a name able to collide."""
    for name in ["start", "end", "middle", "many"]:
        assert not has_collision_chars(name)
    for name in [".start", "end.", "mid.dle", ".ma.ny.", "_start", "end_", "mid_dle", "_ma_ny."]:
        assert has_collision_chars(name)


def test_collisions() -> None:
    """Kafka's TopicTest: names collide when '.' and '_' are in the same positions."""
    periods = [".topic", "to.pic", "topic.", "topic"]
    underscores = ["_topic", "to_pic", "topic_", "topic"]
    for a, b in zip(periods, underscores, strict=True):
        assert collides(a, a)
        assert collides(b, b)
        assert collides(a, b)
    for a, b in zip(periods, reversed(underscores), strict=True):
        assert not collides(a, b)


# ===================================================================== validate_topic_create


def test_good_assignment_passes_and_returns_the_config() -> None:
    """AdminZkClientTest's good assignment, with a config, passes."""
    config = validate_topic_create(
        "test", {0: [0, 1, 2], 1: [1, 2, 3]}, [], {"retention.ms": "1000"}
    )
    assert config == {"retention.ms": "1000"}


def test_invalid_name_is_checked_first() -> None:
    """A bad name wins over every other fault."""
    assert raises(lambda: validate_topic_create("a b", {}, ["a b"], {"x": "y"}))[0] is INVALID_TOPIC


def test_existing_topic_is_refused() -> None:
    """A topic still in ``/brokers/topics`` (even being deleted) already exists."""
    assert raises(lambda: validate_topic_create("t", {0: [0]}, ["t"], {})) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "Topic 't' already exists.",
    )


def test_colliding_topic_is_refused_naming_the_collisions_in_listing_order() -> None:
    """``test_topic`` after ``test.topic``: INVALID_TOPIC_EXCEPTION listing the others."""
    existing = ["other", "test.topic", "test_topic.", "test_topic_x", "test.topic.x"]
    assert raises(lambda: validate_topic_create("test_topic", {0: [0]}, existing, {})) == (
        INVALID_TOPIC,
        "Topic 'test_topic' collides with existing topics: test.topic",
    )
    existing = ["a_b_c", "x", "a.b.c"]
    assert raises(lambda: validate_topic_create("a.b_c", {0: [0]}, existing, {})) == (
        INVALID_TOPIC,
        "Topic 'a.b_c' collides with existing topics: a_b_c, a.b.c",
    )


def test_existence_wins_over_collision() -> None:
    """A name both present and colliding is reported as existing (the re-listing
    check of Kafka's testMockedConcurrentTopicCreation)."""
    code, _ = raises(lambda: validate_topic_create("a.b", {0: [0]}, ["a_b", "a.b"], {}))
    assert code is ErrorCode.TOPIC_ALREADY_EXISTS


def test_names_without_collision_chars_never_collide() -> None:
    """Only names with '.' or '_' are compared with the others."""
    assert validate_topic_create("ab", {0: [0]}, ["a.b", "a_b"], {}) == {}


def test_unequal_replication_factors_are_refused() -> None:
    """AdminZkClientTest: partitions with different replica counts."""
    assert raises(lambda: validate_topic_create("t", {0: [0, 1], 1: [0]}, [], {})) == (
        BAD_ASSIGNMENT,
        "All partitions should have the same number of replicas",
    )


def test_empty_assignment_is_refused_as_unequal() -> None:
    """No partitions at all fails Kafka's "one replica count" check."""
    assert raises(lambda: validate_topic_create("t", {}, [], {})) == (
        BAD_ASSIGNMENT,
        "All partitions should have the same number of replicas",
    )


def test_duplicate_replicas_are_refused_printing_the_scala_map() -> None:
    """AdminZkClientTest: a broker twice in one list; the message prints the request's
    assignment as the ``mutable.HashMap`` Kafka builds from it."""
    assert raises(lambda: validate_topic_create("t", {1: [2, 3], 0: [0, 0]}, [], {})) == (
        BAD_ASSIGNMENT,
        "Duplicate replica assignment found:"
        " HashMap(0 -> ArrayBuffer(0, 0), 1 -> ArrayBuffer(2, 3))",
    )


@pytest.mark.parametrize(
    "assignment",
    [
        {1: [1, 2], 2: [1, 2]},  # not 0-based
        {0: [1, 2], 3: [1, 2]},  # not consecutive
        {-1: [1, 2], 1: [1, 2], 2: [1, 2], 4: [1, 2]},
        {-1: [1, 2], 0: [1, 2]},
    ],
)
def test_partition_ids_must_be_zero_based_and_consecutive(
    assignment: dict[int, list[int]],
) -> None:
    """AdminZkClientTest: ids other than 0..n-1 are refused."""
    assert raises(lambda: validate_topic_create("t", assignment, [], {})) == (
        BAD_ASSIGNMENT,
        "partitions should be a consecutive 0-based integer sequence",
    )


def test_partition_id_check_is_kafkas_sum_check() -> None:
    """Kafka only compares the sum of the non-negative ids with n(n-1)/2, so {-1, 0, 3}
    passes as it does in Kafka 2.7."""
    assert validate_topic_create("t", {-1: [1], 0: [1], 3: [1]}, [], {}) == {}


def test_manual_assignment_brokers_are_not_checked() -> None:
    """CreateTopics does not check that manually assigned brokers exist."""
    assert validate_topic_create("t", {0: [1000, 1001]}, [], {}) == {}


def test_config_is_checked_last() -> None:
    """Config errors come after the assignment checks, as INVALID_CONFIG."""
    assert raises(lambda: validate_topic_create("t", {0: [0]}, [], {"nope": "1"})) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown topic config name: nope",
    )
    code, _ = raises(lambda: validate_topic_create("t", {0: [0, 0]}, [], {"nope": "1"}))
    assert code is BAD_ASSIGNMENT
    assert raises(lambda: validate_topic_create("t", {0: [0]}, [], {"retention.ms": "x"})) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value x for configuration retention.ms: Not a number of type LONG",
    )


# ====================================================================== CreateTopics request


def test_duplicate_topics_in_a_request() -> None:
    """Names listed more than once are found; the messages are Kafka's."""
    assert duplicate_topics(["a", "b", "a", "c", "a", "b"]) == {"a", "b"}
    assert duplicate_topics(["a", "b"]) == frozenset()
    assert DUPLICATE_CREATE_TOPIC_MESSAGE == "Found multiple entries for this topic."
    assert DUPLICATE_CREATE_PARTITIONS_MESSAGE == "Duplicate topic in request."
    assert QUEUED_FOR_DELETION_MESSAGE == "The topic is queued for deletion."


def check_request(**changes: object) -> tuple[ErrorCode, str | None]:
    args: dict[str, object] = {
        "num_partitions": -1,
        "replication_factor": -1,
        "assignment": {},
        "config": {},
        "in_metadata_cache": False,
    } | changes
    return raises(lambda: check_create_topic_request("t", **args))  # type: ignore[arg-type]


def test_request_checks_in_kafkas_order() -> None:
    """Existing in the metadata cache, then null configs, then counts with an assignment."""
    everything_wrong = {
        "num_partitions": 3,
        "assignment": {0: [1]},
        "config": {"a": None},
        "in_metadata_cache": True,
    }
    assert check_request(**everything_wrong) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "Topic 't' already exists.",
    )
    assert check_request(**(everything_wrong | {"in_metadata_cache": False})) == (
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for topic configs : a",
    )
    assert check_request(num_partitions=3, assignment={0: [1]}) == (
        ErrorCode.INVALID_REQUEST,
        "Both numPartitions or replicationFactor and replicasAssignments were set. "
        "Both cannot be used at the same time.",
    )
    code, _ = check_request(replication_factor=1, assignment={0: [1]})
    assert code is ErrorCode.INVALID_REQUEST


def test_null_configs_are_listed_in_request_order() -> None:
    """Every null-valued config is named, joined by commas."""
    _, message = check_request(config={"b": None, "ok": "1", "a": None})
    assert message == "Null value not supported for topic configs : b,a"


def test_request_with_defaults_and_no_assignment_passes() -> None:
    """-1 counts and no assignment is a valid request."""
    check_create_topic_request(
        "t",
        num_partitions=-1,
        replication_factor=-1,
        assignment={},
        config={"retention.ms": "1"},
        in_metadata_cache=False,
    )


def test_resolve_counts_uses_broker_defaults_for_minus_one() -> None:
    """-1 means the broker's default; the RF default is a Java short."""
    broker = BrokerConfig(num_partitions=3, default_replication_factor=2)
    assert resolve_counts(-1, -1, broker) == (3, 2)
    assert resolve_counts(5, 1, broker) == (5, 1)
    assert resolve_counts(-2, -2, broker) == (-2, -2)
    assert resolve_counts(-1, -1, BrokerConfig(default_replication_factor=65537)) == (1, 1)


def plan(name: str = "t", **changes: object) -> TopicCreation:
    args: dict[str, object] = {
        "metadata_topics": [],
        "existing_topics": [],
        "alive_brokers": brokers(0, 1, 2),
        "broker_config": BrokerConfig(),
        "rng": random.Random(0),
    } | changes
    return plan_create_topic(name, **args)  # type: ignore[arg-type]


def test_plan_uses_broker_defaults_and_the_seeded_rng() -> None:
    """Defaults come from the broker config and the start from the rng: same seed, same
    plan."""
    broker = BrokerConfig(num_partitions=6, default_replication_factor=2)
    first = plan(broker_config=broker, rng=random.Random(9))
    assert len(first.assignment) == 6
    assert all(len(r) == 2 for r in first.assignment.values())
    assert first == plan(broker_config=broker, rng=random.Random(9))
    assert first.config == {}


def test_plan_uses_a_manual_assignment_as_given() -> None:
    """A manual assignment is kept, even with brokers that are not alive."""
    created = plan(
        assignment={0: [5, 4], 1: [3, 2], 2: [1, 0]}, config={"cleanup.policy": "compact"}
    )
    assert as_lists(created.assignment) == {0: [5, 4], 1: [3, 2], 2: [1, 0]}
    assert created.config == {"cleanup.policy": "compact"}


def test_plan_errors_follow_create_topics_request_test() -> None:
    """CreateTopicsRequestTest's error cases: existing, partitions -2, RF over brokers,
    unknown config, bad value, unequal assignment."""
    assert raises(lambda: plan(metadata_topics=["t"])) == (
        ErrorCode.TOPIC_ALREADY_EXISTS,
        "Topic 't' already exists.",
    )
    assert raises(lambda: plan(num_partitions=-2, replication_factor=1)) == (
        ErrorCode.INVALID_PARTITIONS,
        "Number of partitions must be larger than 0.",
    )
    assert raises(lambda: plan(num_partitions=1, replication_factor=4)) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Replication factor: 4 larger than available brokers: 3.",
    )
    assert raises(lambda: plan(config={"nope": "1"}))[0] is ErrorCode.INVALID_CONFIG
    assert raises(lambda: plan(config={"min.insync.replicas": "0"})) == (
        ErrorCode.INVALID_CONFIG,
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    )
    assert raises(lambda: plan(assignment={0: [0, 1], 1: [0]}))[0] is BAD_ASSIGNMENT
    assert raises(lambda: plan(existing_topics=["t"]))[0] is ErrorCode.TOPIC_ALREADY_EXISTS


def test_plan_assigns_before_validating_the_name() -> None:
    """The assignment is computed before ``validateTopicCreate``, so its errors win."""
    code, _ = raises(lambda: plan(num_partitions=0, replication_factor=1, config={"x": None}))
    assert code is ErrorCode.INVALID_REQUEST  # null configs are checked before either
    code, _ = raises(lambda: plan("bad name", num_partitions=0, replication_factor=1))
    assert code is ErrorCode.INVALID_PARTITIONS


def test_plan_with_partly_racked_brokers_is_an_admin_error() -> None:
    """Live brokers with and without racks fail the API assignment."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1))]
    with pytest.raises(AdminOperationError, match="rack aware assignment"):
        plan(alive_brokers=mixed)


def test_plan_for_auto_creation_ignores_partial_racks() -> None:
    """Auto-creation's Safe mode drops racks unless every broker has one."""
    mixed = [BrokerMetadata(B(1), "a"), BrokerMetadata(B(0))]
    created = plan(alive_brokers=mixed, rack_mode=RackMode.SAFE, rng=random.Random(3))
    assert created == plan(alive_brokers=brokers(0, 1), rng=random.Random(3))


# ================================================================= CreatePartitions (API)


def test_create_partitions_automatic_matches_spec_example() -> None:
    """The §9.4 addition example through the API path."""
    added = validate_create_partitions("t", replicas({0: [1, 2]}), 3, None, brokers(0, 1, 2, 3))
    assert as_lists(added) == {1: [2, 0], 2: [3, 1]}


def test_create_partitions_manual_assignment_is_used() -> None:
    """Manual lists become partitions current_count + index (AddPartitionsTest)."""
    added = validate_create_partitions(
        "t", replicas({0: [0, 1], 1: [1, 2]}), 4, [[2, 3], [3, 0]], brokers(0, 1, 2, 3)
    )
    assert as_lists(added) == {2: [2, 3], 3: [3, 0]}


def test_create_partitions_refuses_during_reassignment() -> None:
    """A partition with adding or removing replicas blocks partition addition."""
    existing = {0: ReplicaAssignment(replicas=(B(0), B(1)), adding_replicas=(B(1),))}
    assert raises(lambda: validate_create_partitions("t", existing, 2, None, brokers(0, 1))) == (
        ErrorCode.REASSIGNMENT_IN_PROGRESS,
        "A partition reassignment is in progress for the topic 't'.",
    )


def test_create_partitions_on_a_missing_topic() -> None:
    """No assignment in ZooKeeper: UNKNOWN_TOPIC_OR_PARTITION."""
    assert raises(lambda: validate_create_partitions("t", {}, 2, None, brokers(0))) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The topic 't' does not exist.",
    )


def test_create_partitions_must_increase() -> None:
    """Fewer partitions, or as many, are INVALID_PARTITIONS with Kafka's two texts."""
    existing = replicas({0: [0], 1: [0], 2: [0]})
    assert raises(lambda: validate_create_partitions("t", existing, 2, None, brokers(0))) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic currently has 3 partitions, which is higher than the requested 2.",
    )
    assert raises(lambda: validate_create_partitions("t", existing, 3, None, brokers(0))) == (
        ErrorCode.INVALID_PARTITIONS,
        "Topic already has 3 partitions.",
    )
    assert raises(lambda: validate_create_partitions("t", existing, -1, None, brokers(0)))[1] == (
        "Topic currently has 3 partitions, which is higher than the requested -1."
    )


def test_create_partitions_unknown_brokers() -> None:
    """Unknown brokers are named in first-appearance order (a Scala ``Set4``)."""
    existing = replicas({0: [0, 1]})
    assert raises(
        lambda: validate_create_partitions("t", existing, 3, [[9, 0], [1, 7]], brokers(0, 1))
    ) == (BAD_ASSIGNMENT, "Unknown broker(s) in replica assignment: 9, 7.")


def test_create_partitions_unknown_brokers_from_a_large_set_in_hash_order() -> None:
    """With five or more distinct brokers listed, Kafka's set is a ``HashSet``: the
    unknown ones come in its order (5 before 1, as Scala prints ``Set(1,..,5)``)."""
    existing = replicas({0: [0]})
    code, message = raises(
        lambda: validate_create_partitions("t", existing, 6, [[1], [2], [3], [4], [5]], brokers(2))
    )
    assert code is BAD_ASSIGNMENT
    assert message == "Unknown broker(s) in replica assignment: 5, 1, 3, 4."


def test_create_partitions_assignment_count_must_match_the_increase() -> None:
    """Too many or too few lists (including none at all) are refused."""
    existing = replicas({0: [0, 1]})
    assert raises(
        lambda: validate_create_partitions("t", existing, 3, [[0, 1]], brokers(0, 1))
    ) == (BAD_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided.")
    assert raises(lambda: validate_create_partitions("t", existing, 2, [], brokers(0, 1))) == (
        BAD_ASSIGNMENT,
        "Increasing the number of partitions by 1 but 0 assignments provided.",
    )


def test_create_partitions_wrong_replica_count() -> None:
    """AddPartitionsTest testWrongReplicaCount: lists of another RF than partition 0's."""
    existing = replicas({0: [0, 1]})
    assert raises(
        lambda: validate_create_partitions(
            "t", existing, 4, [[0], [1, 0], [0, 1, 2]], brokers(0, 1, 2)
        )
    ) == (
        BAD_ASSIGNMENT,
        "Inconsistent replication factor between partitions, partition 0 has 2 while"
        " partitions [1, 3] have replication factors [1, 3], respectively.",
    )


def test_create_partitions_empty_and_duplicate_lists() -> None:
    """An empty list and a duplicate broker are refused with Kafka's texts."""
    existing = replicas({0: [0, 1]})
    assert raises(
        lambda: validate_create_partitions("t", existing, 3, [[0, 1], []], brokers(0, 1))
    ) == (BAD_ASSIGNMENT, "Cannot have replication factor of 0 for partition id 2.")
    assert raises(
        lambda: validate_create_partitions("t", existing, 3, [[1, 1], [0, 1]], brokers(0, 1))
    ) == (
        BAD_ASSIGNMENT,
        "Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 1.",
    )


def test_create_partitions_missing_partition_zero() -> None:
    """AddPartitionsTest testMissingPartition0: an admin error, after the count checks."""
    existing = replicas({1: [0, 1], 2: [1, 0]})
    with pytest.raises(AdminOperationError, match="partition id 0 is missing"):
        validate_create_partitions("t", existing, 5, None, brokers(0, 1))


def test_create_partitions_enforces_racks_first() -> None:
    """CreatePartitions reads the brokers in Enforced mode before anything else."""
    mixed = [BrokerMetadata(B(0), "a"), BrokerMetadata(B(1))]
    with pytest.raises(AdminOperationError, match="disable-rack-aware"):
        validate_create_partitions("t", {}, 2, None, mixed)


def test_create_partitions_checks_partitions_in_scala_map_order() -> None:
    """With five or more new partitions Kafka checks them in ``HashMap`` order: of
    partitions 1..5, partition 5 is looked at first."""
    existing = replicas({0: [0]})
    code, message = raises(
        lambda: validate_create_partitions("t", existing, 6, [[], [], [], [], []], brokers(0))
    )
    assert (code, message) == (
        BAD_ASSIGNMENT,
        "Cannot have replication factor of 0 for partition id 5.",
    )


# ================================================================ partition addition (CLI)


def test_cli_alter_with_assignment_uses_the_groups_after_the_current_count() -> None:
    """TopicCommandWithZKClientTest: "5:3,3:1,4:2" on a 2-partition topic gives
    partition 2 [4,2]."""
    added = new_partitions_assignment(
        "t", {0: [5, 3], 1: [3, 1]}, brokers(0, 1, 2, 3, 4, 5), 3, {2: [4, 2]}
    )
    assert as_lists(added) == {2: [4, 2]}


def test_cli_alter_to_an_unregistered_broker() -> None:
    """On the ZooKeeper path brokers are checked here: BROKER_NOT_AVAILABLE."""
    assert raises(
        lambda: new_partitions_assignment("t", {0: [0, 1]}, brokers(0, 1, 2), 2, {1: [0, 7]})
    ) == (
        ErrorCode.BROKER_NOT_AVAILABLE,
        "Some brokers specified for partition id 1 are not available. Specified brokers:"
        " 0, 7, available brokers: 0, 1, 2.",
    )


def test_cli_alter_not_an_increase() -> None:
    """The CLI path's message for no increase."""
    assert raises(lambda: new_partitions_assignment("t", {0: [0]}, brokers(0), 1)) == (
        ErrorCode.INVALID_PARTITIONS,
        "The number of partitions for a topic can only be increased. Topic t currently has 1"
        " partitions, 1 would not be an increase.",
    )
