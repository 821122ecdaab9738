"""``kemu topics --delete --zookeeper`` marks topics as AdminZkClient does, on a store with
no controller to act on the marks (a real ZooKeeper and the embedded store): the marker
node, Kafka's messages, the internal-topic guard, and how list and describe show a marked
topic. Topics are created with manual assignments, which need no registered broker."""

from __future__ import annotations

import pytest

from tests.support.topics_harness import STORE, Harness, Result

pytestmark = pytest.mark.asyncio

MARKED = (
    "Topic {t} is marked for deletion.\n"
    "Note: This will have no impact if delete.topic.enable is not set to true.\n"
)


async def _create(store: Harness, topic: str, assignment: str = "0:1") -> None:
    result = await store.topics(
        "--create", "--topic", topic, "--replica-assignment", assignment, via=STORE
    )
    assert result.rc == 0, result


async def test_delete_marks_the_topic_once(bare_store: Harness) -> None:
    """The first delete creates /admin/delete_topics/<t> (empty) and says so; the second
    reports the topic as already marked and changes nothing."""
    await _create(bare_store, "doomed")
    first = await bare_store.topics("--delete", "--topic", "doomed", via=STORE)
    assert first == Result(0, MARKED.format(t="doomed"), "")
    assert await bare_store.read("/admin/delete_topics/doomed") == b""
    before = await bare_store.snapshot()
    again = await bare_store.topics("--delete", "--topic", "doomed", via=STORE)
    assert again == Result(0, "Topic doomed is already marked for deletion.\n", "")
    assert await bare_store.snapshot() == before
    assert await bare_store.exists("/brokers/topics/doomed")  # only a controller removes it


async def test_internal_topics_are_never_marked(bare_store: Harness) -> None:
    """Deleting __consumer_offsets fails with Kafka's AdminOperationException message and
    leaves no marker; of a regex's matches, those sorted before it are marked, the rest not."""
    await _create(bare_store, "__consumer_offsets")
    await _create(bare_store, "_-first")
    await _create(bare_store, "_later")
    guard = (
        "Error while executing topic command : Topic __consumer_offsets is a kafka internal"
        " topic and is not allowed to be marked for deletion.\n"
    )
    before = await bare_store.snapshot()
    refused = await bare_store.topics("--delete", "--topic", "__consumer_offsets", via=STORE)
    assert refused == Result(1, guard, "")
    assert await bare_store.snapshot() == before
    matched = await bare_store.topics("--delete", "--topic", "_.*", via=STORE)
    assert matched == Result(1, MARKED.format(t="_-first") + guard, "")
    assert await bare_store.children("/admin/delete_topics") == ("_-first",)


async def test_list_and_describe_show_marked_topics(bare_store: Harness) -> None:
    """A marked topic is listed with " - marked for deletion" and described with
    MarkedForDeletion on its topic and partition lines (also under report filters)."""
    await _create(bare_store, "kept", "0")
    await _create(bare_store, "gone", "1:0,0:1")
    await bare_store.topics("--delete", "--topic", "gone", via=STORE)
    assert await bare_store.topics("--list", via=STORE) == Result(
        0, "gone - marked for deletion\nkept\n", ""
    )
    described = await bare_store.topics("--describe", "--topic", "gone", via=STORE)
    assert described.lines == [
        "Topic: gone\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: \tMarkedForDeletion: true",
        "\tTopic: gone\tPartition: 0\tLeader: none\tReplicas: 1,0\tIsr: \tMarkedForDeletion: true",
        "\tTopic: gone\tPartition: 1\tLeader: none\tReplicas: 0,1\tIsr: \tMarkedForDeletion: true",
    ]
    unavailable = await bare_store.topics(
        "--describe", "--unavailable-partitions", "--topic", "gone", via=STORE
    )
    assert unavailable.lines == described.lines[1:]


async def test_regex_delete_marks_every_match(bare_store: Harness) -> None:
    """--topic is a regex for delete too: every matching topic is marked, in name order."""
    for name in ("logs-a", "logs-b", "metrics"):
        await _create(bare_store, name)
    result = await bare_store.topics("--delete", "--topic", "logs-.*", via=STORE)
    assert result.out == MARKED.format(t="logs-a") + MARKED.format(t="logs-b")
    assert await bare_store.children("/admin/delete_topics") == ("logs-a", "logs-b")
