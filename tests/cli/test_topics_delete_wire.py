"""``kemu topics --delete`` over the Kafka wire (``--bootstrap-server``, or the brokers of
the cluster file): Kafka 2.7's AdminClientTopicService sends one DeleteTopics for every
topic the ``--topic`` regex selects and prints nothing on success; a missing topic is the
IllegalArgumentException of ``ensureTopicExists`` unless ``--if-exists``; internal topics
may be deleted; the broker's refusal is one "Error while executing topic command" line.
How ``--list`` and ``--describe`` show a topic marked but not yet deleted differs between
the two paths, as in Kafka: only the ZooKeeper path sees the marker.

The tests that wait for topics to disappear need the controller's TopicDeletionManager.
"""

from __future__ import annotations

import io
import os
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cluster.cli.topics import run_topic_command
from cluster.launch.connect import BrokerEntry, ClusterFile
from tests.support.hosting import hosted_fixture
from tests.support.topics_harness import STORE, WIRE, Harness, Result, running_harness
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio

ERR = "Error while executing topic command : "


async def _create(h: Harness, topic: str, assignment: str = "0:1") -> None:
    result = await h.topics(
        "--create", "--topic", topic, "--replica-assignment", assignment, via=WIRE
    )
    assert result.rc == 0, result


async def _listed(h: Harness, via: str) -> str:
    result = await h.topics("--list", via=via)
    assert result.rc == 0, result
    return result.out


async def _until_listed(h: Harness, via: str, expected: str) -> None:
    await eventually(lambda: _listed(h, via), until=lambda out: out == expected, timeout=20)


@hosted_fixture()
async def disabled_cluster(tmp_path: Path) -> AsyncIterator[Harness]:
    """A 3-broker cluster on the embedded store with delete.topic.enable=false."""
    async for harness in running_harness(tmp_path, None, config={"delete.topic.enable": "false"}):
        yield harness


# ---------------------------------------------------------------------- deleting


async def test_delete_prints_nothing_and_the_topic_leaves_the_cluster(
    store_cluster: Harness,
) -> None:
    """A successful delete prints nothing (exit 0); the topic then disappears from both
    listings, its znodes with it (on a real ZooKeeper and on the embedded store)."""
    h = store_cluster
    await _create(h, "doomed")
    await _create(h, "kept", "1:2")
    assert await h.topics("--delete", "--topic", "doomed", via=WIRE) == Result(0, "", "")
    await _until_listed(h, WIRE, "kept\n")
    await _until_listed(h, STORE, "kept\n")
    assert not await h.exists("/admin/delete_topics/doomed")
    assert not await h.exists("/config/topics/doomed")


async def test_delete_selects_topics_by_regex(embedded_cluster: Harness) -> None:
    """--topic is a regular expression: every match is deleted, the rest stays."""
    h = embedded_cluster
    for name in ("logs-a", "logs-b", "metrics"):
        await _create(h, name)
    assert await h.topics("--delete", "--topic", "logs-.*", via=WIRE) == Result(0, "", "")
    await _until_listed(h, STORE, "metrics\n")


async def test_delete_through_the_cluster_file(embedded_cluster: Harness, tmp_path: Path) -> None:
    """With neither --bootstrap-server nor --zookeeper, the brokers of the cluster file
    are used, as for every other action."""
    h = embedded_cluster
    assert h.cluster is not None
    await _create(h, "filed")
    cluster_file = tmp_path / "cluster.json"
    ClusterFile(
        store="embedded://in-process",
        brokers=tuple(
            BrokerEntry(id=b, host="127.0.0.1", port=port, pid=os.getpid(), log_dir="")
            for b, port in sorted(h.cluster.ports.items())
        ),
        controller=await h.cluster.controller_id(),
        cluster_id="",
        pid=os.getpid(),
    ).write(cluster_file)
    out, err = io.StringIO(), io.StringIO()
    argv = ["--delete", "--topic", "filed", "--cluster-file", str(cluster_file)]
    rc = await run_topic_command(argv, out=out, err=err, rng=random.Random(0))
    assert Result(rc, out.getvalue(), err.getvalue()) == Result(0, "", "")
    await _until_listed(h, STORE, "")


async def test_internal_topics_may_be_deleted_over_the_wire(embedded_cluster: Harness) -> None:
    """Unlike the --zookeeper path, which refuses it, the admin client deletes
    __consumer_offsets."""
    h = embedded_cluster
    await _create(h, "__consumer_offsets", "0:1,1:2")
    refused = await h.topics("--delete", "--topic", "__consumer_offsets", via=STORE)
    assert refused.rc == 1
    assert not await h.exists("/admin/delete_topics/__consumer_offsets")
    assert await h.topics("--delete", "--topic", "__consumer_offsets", via=WIRE) == Result(
        0, "", ""
    )
    await _until_listed(h, STORE, "")


# ---------------------------------------------------------------------- refusals


async def test_a_missing_topic_is_an_error_unless_if_exists(embedded_cluster: Harness) -> None:
    """No topic matching --topic: Kafka's IllegalArgumentException message and exit 1, or,
    with --if-exists, nothing at all; in both cases nothing is written."""
    h = embedded_cluster
    await _create(h, "present")
    before = await h.snapshot()
    missing = await h.topics("--delete", "--topic", "absent", via=WIRE)
    assert missing == Result(1, ERR + "Topic 'absent' does not exist as expected\n", "")
    for pattern in ("absent", "abs.*"):
        quiet = await h.topics("--delete", "--topic", pattern, "--if-exists", via=WIRE)
        assert quiet == Result(0, "", "")
    assert await h.snapshot() == before


async def test_deletion_disabled_is_one_error_line_and_nothing_is_written(
    disabled_cluster: Harness,
) -> None:
    """With delete.topic.enable=false the broker answers TOPIC_DELETION_DISABLED, which the
    command prints as Kafka's exception message (exit 1); no marker is written."""
    h = disabled_cluster
    await _create(h, "stays")
    before = await h.snapshot()
    refused = await h.topics("--delete", "--topic", "stays", via=WIRE)
    assert refused == Result(1, ERR + "Topic deletion is disabled.\n", "")
    assert await h.snapshot() == before
    assert await _listed(h, WIRE) == "stays\n"


# ---------------------------------------------------------------------- a held deletion


async def test_a_held_deletion_is_marked_only_in_the_zookeeper_views(
    embedded_cluster: Harness,
) -> None:
    """While a replica's broker is down the deletion starts (the brokers drop the topic)
    but cannot finish: the wire listing no longer shows the topic, the --zookeeper listing
    shows "marked for deletion" and describe "MarkedForDeletion"; once the broker is back
    the deletion completes."""
    h = embedded_cluster
    assert h.cluster is not None
    controller = await h.cluster.controller_id()
    victim = next(b for b in range(3) if b != controller)
    await _create(h, "held", f"{controller}:{victim}")
    await _create(h, "kept", f"{controller}")
    h.cluster.stop_broker(victim)

    async def live() -> tuple[int, ...]:
        assert h.cluster is not None
        status = await h.cluster.status(controller)
        return () if status is None else tuple(status.live_brokers)

    await eventually(live, until=lambda brokers: victim not in brokers)
    assert await h.topics("--delete", "--topic", "held", via=WIRE) == Result(0, "", "")
    await _until_listed(h, WIRE, "kept\n")  # each broker drops it from its cache
    assert await _listed(h, STORE) == "held - marked for deletion\nkept\n"
    described = await h.topics("--describe", "--topic", "held", via=STORE)
    assert described.lines[0].endswith("\tMarkedForDeletion: true")
    assert all(line.endswith("\tMarkedForDeletion: true") for line in described.lines)
    assert await h.cluster.wait_stopped(victim, timeout=15)
    await h.cluster.start_broker(victim)
    await _until_listed(h, STORE, "kept\n")
    assert not await h.exists("/admin/delete_topics/held")
