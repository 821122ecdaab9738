"""Shared fixtures. The real ZooKeeper server fixture lives in tests/support/zookeeper.py."""

from __future__ import annotations

pytest_plugins = ["tests.support.zookeeper"]
