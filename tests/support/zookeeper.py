"""A real ZooKeeper server for tests (``cluster.launch.zookeeper_server``, re-exported here).

The session-scoped ``zookeeper_server`` fixture shares one server across the test run.
Tests that stop or restart a server use their own ``ZooKeeperServer`` instead; the
``zookeeper_ensemble`` fixture is a 3-server ensemble of the test's own (its servers may
be stopped and started again). ZooKeeper
missing is never a reason to skip: the package is installed (``scripts/zookeeper.sh
install``) or the fixture fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cluster.launch.zookeeper_server import (
    READY_TIMEOUT,
    REPO_ROOT,
    SCRIPT,
    STOP_TIMEOUT,
    ZOOKEEPER_JAR,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    ensure_installed,
    four_letter_word,
    free_port,
)

__all__ = [
    "READY_TIMEOUT",
    "REPO_ROOT",
    "SCRIPT",
    "STOP_TIMEOUT",
    "STORES",
    "ZOOKEEPER_JAR",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ensure_installed",
    "four_letter_word",
    "free_port",
    "zookeeper_ensemble",
    "zookeeper_server",
]

STORES = ["embedded", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]
"""The metadata stores a cluster test runs on, as a fixture's ``params``: the embedded
store and a real ZooKeeper (the ``zookeeper_server`` fixture), marked ``zookeeper``."""


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper server for the whole test run. Tests that stop or restart a
    server use their own ``ZooKeeperServer`` instead."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def zookeeper_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """A 3-server ensemble on loopback, for one test."""
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zookeeper-ensemble"))
    try:
        ensemble.start()
        yield ensemble
    finally:
        ensemble.close()
