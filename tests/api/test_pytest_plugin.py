"""kemu's pytest plugin: ``kemu_cluster`` is a running three-broker cluster (or what
``@pytest.mark.kemu`` says) that real clients use from sync and async tests;
``kemu_cluster_factory`` makes more and closes every one at teardown; the plugin is
declared as the ``pytest11`` entry point ``kemu`` and, once kemu is installed, serves a
suite outside this repository that names nothing but the fixture."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped]

from cluster import KemuCluster
from cluster.testing.pytest_plugin import KemuClusterFactory
from tests.support.clients import confluent_leaders, kafka_python_consume, kafka_python_produce
from tests.support.kemu_commands import REPO
from tests.support.zookeeper import ZooKeeperServer

# Inner pytest runs load the plugin by module, never through the entry point, so that they
# work whether or not this environment's install has it (and never register it twice).
PLUGIN_ARGS = (
    "-p", "no:kemu", "-p", "cluster.testing.pytest_plugin", "-p", "no:randomly",
    "-o", "asyncio_default_fixture_loop_scope=function",
)  # fmt: skip


def test_kemu_cluster_is_three_brokers_on_the_embedded_store_in_tmp_path(
    kemu_cluster: KemuCluster, tmp_path: Path
) -> None:
    """The default fixture: three in-process brokers, the embedded store, log dirs under
    the test's own tmp_path; kafka-python writes and reads through it."""
    assert kemu_cluster.broker_ids == (0, 1, 2)
    assert kemu_cluster.zookeeper_connect is None
    assert kemu_cluster.log_dir.is_relative_to(tmp_path)
    kemu_cluster.create_topic("fixture", partitions=2, replication_factor=3)
    kafka_python_produce(kemu_cluster.bootstrap_servers, "fixture", [b"a", b"b"])
    assert sorted(kafka_python_consume(kemu_cluster.bootstrap_servers, "fixture", 2)) == [
        b"a",
        b"b",
    ]


@pytest.mark.kemu(brokers=5, config={"num.partitions": 4, "default.replication.factor": 2})
def test_the_kemu_marker_configures_the_cluster(kemu_cluster: KemuCluster) -> None:
    """``@pytest.mark.kemu(...)`` gives ``kemu_cluster`` its arguments: five brokers, and
    broker defaults that a topic created with -1/-1 takes."""
    assert kemu_cluster.broker_ids == (0, 1, 2, 3, 4)
    kemu_cluster.create_topic("defaults", partitions=-1, replication_factor=-1)
    leaders = confluent_leaders(kemu_cluster.bootstrap_servers, "defaults")
    assert sorted(leaders) == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_the_fixture_serves_async_tests(kemu_cluster: KemuCluster) -> None:
    """In a pytest-asyncio test the same fixture's ``aio`` view is awaited while aiokafka
    runs on the test's loop."""
    cluster = kemu_cluster.aio
    await cluster.create_topic("async-fixture", replication_factor=3)
    producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    await producer.start()
    try:
        sent = await producer.send_and_wait("async-fixture", b"x")
    finally:
        await producer.stop()
    assert sent.offset == 0
    await cluster.stop(sent_leader := (await cluster.partition_leaders("async-fixture"))[0])
    assert sent_leader not in await cluster.running_brokers()


def test_the_factory_makes_clusters_with_racks_and_real_zookeeper(
    kemu_cluster_factory: KemuClusterFactory, zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """The factory starts as many clusters as asked, each with its own arguments and log
    dir under tmp_path: one on racks, one on the real ZooKeeper (whose address it
    gives back as ``zookeeper_connect``)."""
    racked = kemu_cluster_factory(brokers=2, racks=["r0", "r1"])
    chroot = f"{zookeeper_server.hosts}/kemu-factory-{os.getpid()}"
    on_zookeeper = kemu_cluster_factory(brokers=1, zookeeper=chroot)
    assert on_zookeeper.zookeeper_connect == chroot
    assert racked.log_dir != on_zookeeper.log_dir
    assert racked.log_dir.is_relative_to(tmp_path)
    on_zookeeper.create_topic("zk")
    assert on_zookeeper.partition_leaders("zk") == {0: 0}
    racked.create_topic("racked", partitions=2, replication_factor=2)
    assert sorted(racked.partition_leaders("racked")) == [0, 1]


def test_the_factory_closes_every_cluster_at_teardown(pytester: pytest.Pytester) -> None:
    """Clusters a test made with the factory are all closed when it ends (their threads
    are gone), also when the test failed."""
    pytester.makepyfile(
        """
        import threading

        def test_makes_two(kemu_cluster_factory):
            kemu_cluster_factory(brokers=1)
            kemu_cluster_factory(brokers=2)
            assert len([t for t in threading.enumerate() if t.name.startswith("kemu-")]) == 2
            raise AssertionError("failing on purpose")
        """
    )
    before = {t for t in threading.enumerate() if t.name.startswith("kemu-")}
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*failing on purpose*"])
    assert {t for t in threading.enumerate() if t.name.startswith("kemu-")} == before


def test_a_marker_with_positional_arguments_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """``@pytest.mark.kemu`` takes KemuCluster's keyword arguments only; anything else
    fails the test's setup with one line saying so, and no cluster starts."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.kemu(5)
        def test_positional(kemu_cluster):
            pass
        """
    )
    result = pytester.runpytest_inprocess(*PLUGIN_ARGS)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.kemu takes keyword arguments only*"])


def test_the_plugin_is_declared_as_the_pytest11_entry_point_kemu() -> None:
    """pyproject.toml declares the entry point pytest loads plugins from, and
    ``-p no:kemu`` is its name."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"kemu": "cluster.testing.pytest_plugin"}


@pytest.mark.slow
@pytest.mark.processes  # a pytest child process, in a directory outside the repository
@pytest.mark.timeout(180)
def test_an_installed_kemu_serves_a_suite_that_only_names_the_fixture(tmp_path: Path) -> None:
    """Installed kemu's entry point is what loads the plugin: a suite in a directory of
    its own, with no conftest and no ``-p``, uses ``kemu_cluster`` and kafka-python, and
    passes. (Fails until kemu is installed again after the entry point was added:
    ``pip install -e .``.)"""
    installed = importlib.metadata.entry_points(group="pytest11", name="kemu")
    assert [e.value for e in installed] == ["cluster.testing.pytest_plugin"], (
        "the kemu installed in this environment has no pytest11 entry point 'kemu':"
        " reinstall it (pip install -e .)"
    )
    suite = tmp_path / "outside"
    suite.mkdir()
    (suite / "test_uses_kemu.py").write_text(
        "from kafka import KafkaConsumer, KafkaProducer, TopicPartition\n"
        "\n"
        "def test_round_trip(kemu_cluster):\n"
        "    kemu_cluster.create_topic('t', replication_factor=3)\n"
        "    producer = KafkaProducer(bootstrap_servers=kemu_cluster.bootstrap_servers)\n"
        "    producer.send('t', b'hello').get(timeout=30)\n"
        "    producer.close()\n"
        "    consumer = KafkaConsumer(bootstrap_servers=kemu_cluster.bootstrap_servers)\n"
        "    consumer.assign([TopicPartition('t', 0)])\n"
        "    consumer.seek_to_beginning()\n"
        "    records = kemu_cluster.wait_until(lambda: consumer.poll(timeout_ms=200), 30)\n"
        "    consumer.close()\n"
        "    assert [r.value for r in records[TopicPartition('t', 0)]] == [b'hello']\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = str(REPO)  # this tree's kemu, as the installed one's entry point names
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(suite)],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
