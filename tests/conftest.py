"""Shared fixtures. The real ZooKeeper server fixture lives in tests/support/zookeeper.py;
tests/support/kafka_python.py pre-imports kafka-python's protocol modules (their
import-time deprecation warning would otherwise fail the warnings-as-errors suite)."""

from __future__ import annotations

import tests.support.kafka_python  # noqa: F401 - imported for its side effect

pytest_plugins = ["tests.support.zookeeper"]
