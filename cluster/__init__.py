"""kemu.

``from cluster import KemuCluster`` is the Python API (docs/python-api.md); it is loaded
on first use, so that a command that does not need it (``python -m cluster.cli ...``) does
not pay for importing it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cluster.api import AsyncKemuCluster, KemuCluster, KemuClusterError

__all__ = ["AsyncKemuCluster", "KemuCluster", "KemuClusterError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import cluster.api

        return getattr(cluster.api, name)
    raise AttributeError(f"module 'cluster' has no attribute {name!r}")
