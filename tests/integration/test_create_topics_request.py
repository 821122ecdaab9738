"""CreateTopics at the broker (Kafka's CreateTopicsRequestTest), against a real in-process
cluster on the embedded store: valid requests (generated, manual, mixed, broker
defaults, validateOnly) create exactly what they say; each error has Kafka's code and
writes nothing; a partial batch keeps one result per topic; a timeout answers
REQUEST_TIMED_OUT while the topics are still created; a broker that knows no controller
answers NOT_CONTROLLER.

The requests are the typed values the broker's Kafka listener hands it (the codec's side
of each version, including the v5+ counts and configs, is pinned in tests/wire).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio
import pytest

from actors.admin import BrokerConfig
from actors.broker.broker import Broker, BrokerSettings, broker_ref
from actors.runtime.actor import Node
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.errors import ErrorCode
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import (
    ConfigSource,
    CreatableTopic,
    CreateTopicResult,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    TopicConfig,
)
from tests.support.creation import (
    Assignment,
    Harness,
    creatable,
    running_cluster,
    stop_after_states,
    wait_until_complete,
)
from tests.support.hosting import hosted_fixture
from tests.support.wire import DirectWire

pytestmark = pytest.mark.asyncio

BROKERS = (0, 1, 2)
DEFAULT_PARTITIONS = 3  # num.partitions of the cluster, so that -1 is observable
DEFAULT_RF = 2  # default.replication.factor, likewise
LONG = 20_000  # a timeout no test waits out
NONE = ErrorCode.NONE


@hosted_fixture()
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    config = {
        "num.partitions": str(DEFAULT_PARTITIONS),
        "default.replication.factor": str(DEFAULT_RF),
    }
    async with running_cluster(tmp_path / "logs", config=config) as h:
        yield h


def topic(
    name: str,
    partitions: int = 1,
    rf: int = 1,
    *,
    assignment: Assignment | None = None,
    config: dict[str, str] | None = None,
) -> CreatableTopic:
    """Kafka's ``topicReq``: 1 partition, RF 1 unless told; an assignment means -1/-1."""
    configs = tuple(TopicConfig(name=k, value=v) for k, v in (config or {}).items())
    if assignment is not None:
        return CreatableTopic(
            name=TopicName(name),
            num_partitions=-1,
            replication_factor=-1,
            assignments=creatable(name, assignment).assignments,
            configs=configs,
        )
    return CreatableTopic(
        name=TopicName(name), num_partitions=partitions, replication_factor=rf, configs=configs
    )


async def create(
    h: Harness,
    topics: Sequence[CreatableTopic],
    *,
    timeout_ms: int = LONG,
    validate_only: bool = False,
) -> dict[str, CreateTopicResult]:
    """Send CreateTopics to the controller's broker; each topic's result."""
    controller = await h.cluster.controller_id()
    request = CreateTopicsRequestData(
        topics=tuple(topics), timeout_ms=timeout_ms, validate_only=validate_only
    )
    reply = await h.client.ask(broker_ref(controller), request, timeout=30)
    assert isinstance(reply, CreateTopicsResponseData)
    assert [r.name for r in reply.topics] == [t.name for t in topics]  # request order
    return {r.name: r for r in reply.topics}


async def exists(h: Harness, name: str) -> bool:
    return await h.probe.exists(zkdata.topic_path(TopicName(name))) is not None


async def stored_assignment(h: Harness, name: str) -> Assignment:
    data, _ = await h.probe.get(zkdata.topic_path(TopicName(name)))
    partitions = zkdata.TopicAssignment.decode(data).partitions
    return {p: [int(b) for b in a.replicas] for p, a in sorted(partitions.items())}


async def expect_created(
    h: Harness, results: dict[str, CreateTopicResult], shapes: dict[str, tuple[int, int]]
) -> None:
    """Each topic of ``shapes`` was answered NONE with its (partitions, RF), is stored so,
    and is complete on every broker: state znodes, log directories, metadata."""
    for name, shape in shapes.items():
        result = results[name]
        assert result.error_code is NONE, result
        assert (result.num_partitions, result.replication_factor) == shape, name
        assignment = await stored_assignment(h, name)
        assert len(assignment) == result.num_partitions
        assert {len(r) for r in assignment.values()} == {result.replication_factor}
        h.topics[name] = assignment
    await wait_until_complete(h, list(BROKERS))


# ------------------------------------------------------------------ valid requests


async def test_generated_manual_and_mixed_topics_are_created_as_asked(harness: Harness) -> None:
    """testValidCreateTopicsRequests: generated assignments (RF 1 and 3, five partitions
    with a config), manual ones, and a request mixing both: every topic is answered NONE
    with its resolved counts and configs (v5+) and is complete on every broker."""
    h = harness
    results = await create(h, [topic("topic1")])
    results |= await create(h, [topic("topic2", rf=3)])
    min_isr = {"min.insync.replicas": "2"}
    results |= await create(h, [topic("topic3", 5, 2, config=min_isr)])
    results |= await create(h, [topic("topic4", assignment={0: [0]})])
    manual = {0: [0, 1], 1: [1, 0], 2: [1, 2]}
    results |= await create(h, [topic("topic5", assignment=manual, config=min_isr)])
    results |= await create(
        h, [topic("topic6"), topic("topic7", 5, 2), topic("topic8", assignment=manual)]
    )
    await expect_created(
        h,
        results,
        {
            "topic1": (1, 1),
            "topic2": (1, 3),
            "topic3": (5, 2),
            "topic4": (1, 1),
            "topic5": (3, 2),
            "topic6": (1, 1),
            "topic7": (5, 2),
            "topic8": (3, 2),
        },
    )
    assert await stored_assignment(h, "topic5") == manual
    assert await stored_assignment(h, "topic4") == {0: [0]}
    for name in ("topic3", "topic5"):
        configs = {c.name: c for c in results[name].configs or ()}
        assert configs["min.insync.replicas"].value == "2"
        assert configs["min.insync.replicas"].source is ConfigSource.TOPIC_CONFIG
        assert configs["cleanup.policy"].source is ConfigSource.DEFAULT_CONFIG
    # The rest of Kafka's topic configs come back too, as the v5 response lists them.
    assert len(results["topic1"].configs or ()) > 20


async def test_minus_one_takes_the_broker_defaults(harness: Harness) -> None:
    """testValidCreateTopicsRequests' defaults: -1 partitions and/or -1 RF take
    num.partitions and default.replication.factor."""
    h = harness
    results = await create(
        h, [topic("topic12", -1, -1), topic("topic13", -1, 2), topic("topic14", 2, -1)]
    )
    await expect_created(
        h,
        results,
        {
            "topic12": (DEFAULT_PARTITIONS, DEFAULT_RF),
            "topic13": (DEFAULT_PARTITIONS, 2),
            "topic14": (2, DEFAULT_RF),
        },
    )


async def test_validate_only_answers_as_a_creation_but_writes_nothing(harness: Harness) -> None:
    """A validateOnly request of generated, counted and manual topics is answered NONE with
    the counts a creation would have, and no topic znode, config or log appears."""
    h = harness
    manual = {0: [0, 1], 1: [1, 0], 2: [1, 2]}
    results = await create(
        h,
        [topic("topic9"), topic("topic10", 5, 2), topic("topic11", assignment=manual)],
        validate_only=True,
    )
    shapes = {n: (r.error_code, r.num_partitions, r.replication_factor) for n, r in results.items()}
    assert shapes == {"topic9": (NONE, 1, 1), "topic10": (NONE, 5, 2), "topic11": (NONE, 3, 2)}
    for name in results:
        assert not await exists(h, name)
        assert await h.probe.exists(zkdata.topic_config_path(TopicName(name))) is None
    assert not list(h.logs.glob("broker-*/topic*"))
    request = MetadataRequestData(
        topics=tuple(TopicName(n) for n in results), allow_auto_topic_creation=False
    )
    for broker in BROKERS:
        reply = await h.client.ask(broker_ref(broker), request, timeout=5)
        assert isinstance(reply, MetadataResponseData)
        assert {t.error_code for t in reply.topics} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


# ------------------------------------------------------------------ errors


async def test_each_error_has_kafkas_code_and_nothing_is_written(harness: Harness) -> None:
    """testErrorCreateTopicsRequests: an existing topic (with Kafka's message), partitions
    -2, RF above the brokers, an unknown config, a bad config value and unequal replica
    lists each get their code, and none of them writes anything."""
    h = harness
    await expect_created(h, await create(h, [topic("existing-topic")]), {"existing-topic": (1, 1)})
    cases = {
        "existing-topic": (topic("existing-topic"), ErrorCode.TOPIC_ALREADY_EXISTS),
        "error-partitions": (topic("error-partitions", -2), ErrorCode.INVALID_PARTITIONS),
        "error-replication": (
            topic("error-replication", rf=len(BROKERS) + 1),
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        "error-config": (
            topic("error-config", config={"not.a.property": "error"}),
            ErrorCode.INVALID_CONFIG,
        ),
        "error-config-value": (
            topic("error-config-value", config={"retention.ms": "abc"}),
            ErrorCode.INVALID_CONFIG,
        ),
        "error-assignment": (
            topic("error-assignment", assignment={0: [0, 1], 1: [0]}),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    }
    before = await h.probe.children(zkdata.TOPICS_PATH)
    for name, (request, code) in cases.items():
        (result,) = (await create(h, [request])).values()
        assert result.error_code is code, (name, result)
        assert (result.num_partitions, result.replication_factor, result.configs) == (-1, -1, None)
        if name == "existing-topic":
            assert result.error_message == "Topic 'existing-topic' already exists."
        else:
            assert result.error_message, name
    assert await h.probe.children(zkdata.TOPICS_PATH) == before
    for name in cases:
        if name != "existing-topic":
            assert await h.probe.exists(zkdata.topic_config_path(TopicName(name))) is None


async def test_a_partial_batch_keeps_one_result_per_topic(harness: Harness) -> None:
    """The Partial case: in one request an existing topic, bad partitions, a bad RF and a
    bad assignment fail with their codes while the one good topic is created."""
    h = harness
    await create(h, [topic("existing-topic")])
    results = await create(
        h,
        [
            topic("existing-topic"),
            topic("partial-partitions", -2),
            topic("partial-replication", rf=len(BROKERS) + 1),
            topic("partial-assignment", assignment={0: [0, 1], 1: [0]}),
            topic("partial-none"),
        ],
    )
    assert {n: r.error_code for n, r in results.items()} == {
        "existing-topic": ErrorCode.TOPIC_ALREADY_EXISTS,
        "partial-partitions": ErrorCode.INVALID_PARTITIONS,
        "partial-replication": ErrorCode.INVALID_REPLICATION_FACTOR,
        "partial-assignment": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "partial-none": NONE,
    }
    await expect_created(h, results, {"partial-none": (1, 1)})
    for name in ("partial-partitions", "partial-replication", "partial-assignment"):
        assert not await exists(h, name)


async def test_counts_with_an_assignment_are_an_invalid_request(harness: Harness) -> None:
    """testInvalidCreateTopicsRequests: partitions and RF given together with an
    assignment is INVALID_REQUEST, with and without validateOnly."""
    h = harness
    bad = CreatableTopic(
        name=TopicName("bad-args-topic"),
        num_partitions=10,
        replication_factor=3,
        assignments=creatable("bad-args-topic", {0: [0]}).assignments,
    )
    for validate_only in (False, True):
        (result,) = (await create(h, [bad], validate_only=validate_only)).values()
        assert result.error_code is ErrorCode.INVALID_REQUEST
    assert not await exists(h, "bad-args-topic")


# ------------------------------------------------------------------ timeouts


async def test_timeouts_answer_request_timed_out_and_the_topics_are_still_created(
    harness: Harness,
) -> None:
    """Timeout 0 and -1 answer at once, 1 ms as soon as it passes (the controller is held
    before it gives the topic leaders, so nothing can beat it): REQUEST_TIMED_OUT each
    time, and every topic is created all the same once the controller goes on."""
    h = harness
    for name, timeout_ms in (("error-timeout-zero", 0), ("error-timeout-negative", -1)):
        (result,) = (await create(h, [topic(name, 10, 3)], timeout_ms=timeout_ms)).values()
        assert result.error_code is ErrorCode.REQUEST_TIMED_OUT, result
    controller = await h.cluster.controller_id()
    held = stop_after_states(h, controller, "pause", ["error-timeout"], count=1)
    (result,) = (await create(h, [topic("error-timeout", 10, 3)], timeout_ms=1)).values()
    assert result.error_code is ErrorCode.REQUEST_TIMED_OUT, result
    with anyio.fail_after(10):
        await held.reached.wait()  # the controller got to the topic, and is held there
    status = await h.cluster.status(controller)
    assert status is not None
    h.store.session_of(status.session_id).resume()
    for name in ("error-timeout-zero", "error-timeout-negative", "error-timeout"):
        h.topics[name] = await stored_assignment(h, name)
    await wait_until_complete(h, list(BROKERS))


# ------------------------------------------------------------------ not the controller


async def test_a_broker_that_knows_no_controller_answers_not_controller(tmp_path: Path) -> None:
    """testNotController: a broker that is not the controller and knows of no other (kemu
    forwards to a known controller instead) answers NOT_CONTROLLER for every topic and
    writes nothing."""
    store = EmbeddedStore()
    wire = DirectWire()
    node = Node("broker-0", attach=wire.attach)
    client = Node("client", attach=wire.attach)
    settings = BrokerSettings(
        broker_id=BrokerId(0), log_dirs=(tmp_path / "logs",), config=BrokerConfig()
    )
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(node.run, [Broker(settings, store, with_controller=False)])
            await tg.start(client.run)
            request = CreateTopicsRequestData(
                topics=(topic("topic1"), topic("topic2", 2, 1)), timeout_ms=LONG
            )
            reply = await client.ask(broker_ref(0), request, timeout=10)
            assert isinstance(reply, CreateTopicsResponseData)
            assert [(r.name, r.error_code) for r in reply.topics] == [
                ("topic1", ErrorCode.NOT_CONTROLLER),
                ("topic2", ErrorCode.NOT_CONTROLLER),
            ]
            session = await store.open_session(name="probe")
            assert await session.children(zkdata.TOPICS_PATH) == ()
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()
