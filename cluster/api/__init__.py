"""kemu from Python: ``KemuCluster`` starts a local cluster for a test or a script in one
``with`` line (docs/python-api.md). ``cluster.testing.pytest_plugin`` builds its pytest
fixtures on it."""

from cluster.api.kemu_cluster import AsyncKemuCluster, ConfigValue, KemuCluster, KemuClusterError

__all__ = ["AsyncKemuCluster", "ConfigValue", "KemuCluster", "KemuClusterError"]
