"""``kemu topics`` and ``kemu zk`` as separate processes against a ``kemu up`` process:
through the cluster file, ``--bootstrap-server`` and ``--zookeeper`` (the embedded store at
its embedded:// address, and a real ZooKeeper),
with Kafka's output and exit statuses; ``kemu up`` stops cleanly on SIGINT."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kemu_commands import KemuUp, kemu
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [
    pytest.mark.processes,
    pytest.mark.slow,
]  # kemu up and each command in child processes


def outcome(result: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    return result.returncode, result.stdout


@pytest.fixture
def kemu_up(tmp_path: Path) -> Iterator[KemuUp]:
    """`kemu up` on the embedded store."""
    up = KemuUp(tmp_path)
    try:
        up.start()
        yield up
    finally:
        up.kill()


def test_topics_through_the_cluster_file_and_bootstrap_servers(kemu_up: KemuUp) -> None:
    """Without --bootstrap-server the cluster file is used; output and statuses are
    Kafka's; SIGINT stops the cluster, which removes its cluster file."""
    file = ["--cluster-file", str(kemu_up.cluster_file)]
    created = kemu("topics", "--create", "--topic", "e2e", "--partitions", "3",
                   "--replication-factor", "2", *file)  # fmt: skip
    assert outcome(created) == (0, "Created topic e2e.\n")
    described = kemu("topics", "--describe", "--topic", "e2e", "--bootstrap-server",
                     kemu_up.bootstrap.split(",")[1])  # fmt: skip
    lines = described.stdout.splitlines()
    assert lines[0] == "Topic: e2e\tPartitionCount: 3\tReplicationFactor: 2\tConfigs: "
    assert [line.split("\t")[2] for line in lines[1:]] == [
        "Partition: 0",
        "Partition: 1",
        "Partition: 2",
    ]
    assert all("Leader: none" not in line for line in lines)
    assert outcome(kemu("topics", "--list", *file)) == (0, "e2e\n")
    store = ["--zookeeper", kemu_up.store]
    assert kemu_up.store.startswith("embedded://")
    assert outcome(kemu("topics", "--list", *store)) == (0, "e2e\n")
    assert outcome(kemu("zk", "ls", "/brokers/topics", *file)) == (0, "e2e\n")
    stat = kemu("zk", "get", "/brokers/topics/e2e/partitions/0/state", *file)
    assert stat.returncode == 0, stat
    assert stat.stdout.startswith('{"controller_epoch":1,"leader":')
    again = kemu("topics", "--create", "--topic", "e2e", *file)
    assert outcome(again) == (
        1,
        "Error while executing topic command : Topic 'e2e' already exists.\n",
    )
    usage = kemu("topics", "--list", "--describe", *file)
    assert usage.returncode == 1
    assert usage.stderr.splitlines()[0] == (
        "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
    )
    assert "Traceback" not in usage.stderr
    assert kemu_up.stop() == 0
    assert not kemu_up.cluster_file.exists()
    gone = kemu("topics", "--list", *file)
    assert gone.returncode == 1
    assert gone.stderr == (
        f"no cluster file at {kemu_up.cluster_file}: start a cluster with `kemu up`, or give"
        " --bootstrap-server / --zookeeper\n"
    )


@pytest.mark.zookeeper
def test_zookeeper_path_and_zk_inspection_against_kemu_up(
    tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    """`kemu topics --zookeeper` writes what the running cluster acts on, `kemu zk` shows
    it, and a missing node is one error line."""
    address = f"{zookeeper_server.hosts}/kemu-{uuid.uuid4().hex}"
    up = KemuUp(tmp_path, "--zookeeper", address)
    try:
        up.start()
        zk = ["--zookeeper", address]
        created = kemu("topics", "--create", "--topic", "zk.e2e", "--replica-assignment",
                       "0:1,1:2", *zk)  # fmt: skip
        assert created.returncode == 0, created
        assert created.stdout.endswith("Created topic zk.e2e.\n")
        got = kemu("zk", "get", "/brokers/topics/zk.e2e", *zk)
        assert got.returncode == 0, got
        assert got.stdout.splitlines()[0] == (
            '{"version":2,"partitions":{"0":[0,1],"1":[1,2]},"adding_replicas":{},'
            '"removing_replicas":{}}'
        )
        listed = kemu("zk", "ls", "/brokers/ids", *zk)
        assert outcome(listed) == (0, "0\n1\n2\n")
        missing = kemu("zk", "ls", "/nope", *zk)
        assert (missing.returncode, missing.stdout, missing.stderr) == (
            1,
            "",
            "Error: Node does not exist: /nope\n",
        )
        marked = kemu("topics", "--delete", "--topic", "zk.e2e", *zk)
        assert outcome(marked) == (
            0,
            "Topic zk.e2e is marked for deletion.\n"
            "Note: This will have no impact if delete.topic.enable is not set to true.\n",
        )
        assert up.stop() == 0
    finally:
        up.kill()
