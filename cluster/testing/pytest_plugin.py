"""kemu's pytest plugin: a local kemu cluster per test (docs/python-api.md, "pytest").

Installed with kemu, pytest loads it through the ``pytest11`` entry point named ``kemu``
(``-p no:kemu`` turns it off). It gives:

* ``kemu_cluster``: a running ``KemuCluster`` for the test, three brokers in the test's
  process on the embedded store and free ports, log dirs under the test's ``tmp_path``;
  ``@pytest.mark.kemu(brokers=5, config={...})`` sets its arguments (any of
  ``KemuCluster``'s);
* ``kemu_cluster_factory``: ``kemu_cluster_factory(brokers=..., config=..., racks=...,
  zookeeper=..., processes=...)`` starts one more cluster each call; every cluster it
  made is closed when the test ends.

Both are plain (synchronous) fixtures: the cluster runs on a thread of its own, so sync
and async tests use them alike (``.aio`` is the async view). The cluster module is
imported only when a test asks for a fixture: a suite that never does pays nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cluster.api import KemuCluster

MARKER = "kemu"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**kwargs): the KemuCluster arguments of the test's kemu_cluster fixture"
        " (brokers=3, config=None, racks=None, zookeeper=None, processes=False)",
    )


class KemuClusterFactory:
    """Starts clusters for one test, each with its log dirs in its own directory under
    the test's ``tmp_path`` unless ``log_dir`` is given; ``close_all`` stops them all."""

    def __init__(self, tmp_path: Path) -> None:
        self._tmp_path = tmp_path
        self.clusters: list[KemuCluster] = []

    def __call__(self, brokers: int = 3, **kwargs: Any) -> KemuCluster:
        from cluster.api import KemuCluster

        kwargs.setdefault("log_dir", self._tmp_path / f"kemu-{len(self.clusters)}")
        cluster = KemuCluster(brokers, **kwargs)
        cluster.open()
        self.clusters.append(cluster)
        return cluster

    def close_all(self) -> None:
        """Close every cluster, the last made first; the first failure is raised once
        all were tried."""
        failure: BaseException | None = None
        while self.clusters:
            try:
                self.clusters.pop().close()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


@pytest.fixture
def kemu_cluster_factory(tmp_path: Path) -> Iterator[KemuClusterFactory]:
    """Starts kemu clusters for the test; all of them are stopped when it ends."""
    factory = KemuClusterFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.fixture
def kemu_cluster(
    request: pytest.FixtureRequest, kemu_cluster_factory: KemuClusterFactory
) -> KemuCluster:
    """A running three-broker kemu cluster (or as ``@pytest.mark.kemu(...)`` says)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        raise pytest.UsageError(
            f"{request.node.nodeid}: @pytest.mark.{MARKER} takes keyword arguments only"
            f" (KemuCluster's), not {marker.args!r}"
        )
    return kemu_cluster_factory(**(marker.kwargs if marker is not None else {}))
