"""How kemu's tests run.

Async tests use pytest-asyncio in strict mode: ``@pytest.mark.asyncio`` (or a module's
``pytestmark``) on each test, ``@pytest_asyncio.fixture`` on each async fixture; anyio
code runs on its asyncio loop. anyio's own pytest plugin is switched off (``-p no:anyio``
in pyproject.toml), so ``@pytest.mark.anyio`` is an unknown marker and fails collection.
A fixture that keeps a cluster (any task group) running across a test enters it with
``tests.support.hosting.hosted``: pytest-asyncio sets a fixture up and tears it down in two
different tasks. Tests that pause a broker ask for kemu's freezable loop with
``@pytest.mark.asyncio(loop_factories=["freezable"])`` (``pytest_asyncio_loop_factories``
below).

Deterministic tests on the virtual clock are plain functions that call
``actors.runtime.clock.run_virtual`` (a fresh ``VirtualEventLoop`` per run): that is the one
way to run on the virtual clock, where time only moves when every task waits.

Markers (registered in pyproject.toml): ``slow`` (left out of the inner loop,
``pytest -m "not slow"``), ``spark``, ``processes`` (spawns kemu or broker processes),
``zookeeper`` (uses a real ZooKeeper server; given here to every test that asks for the
``zookeeper_server`` or ``zookeeper_ensemble`` fixture, and by hand to the parameters that
reach one another way), ``timing`` (holds a measured wall-clock time against a goal: a
bench row's test, to be run with the machine to itself).

kemu's own pytest plugin (``cluster.testing.pytest_plugin``: the ``kemu_cluster`` fixtures,
docs/python-api.md) is loaded through its ``pytest11`` entry point once kemu is installed;
``pytest_configure`` below loads it in an environment installed before the entry point
existed, under the same name, so it is never registered twice. pytest's ``pytester`` runs
the small suites that test the plugin.

Helpers shared by test modules live in ``tests/support`` (no test module imports another);
``tests.support.zookeeper`` provides the session's real ZooKeeper server;
``tests.support.kafka_python`` pre-imports kafka-python's protocol modules (their
import-time deprecation warning would otherwise fail the warnings-as-errors suite).

Subprocesses (fresh interpreters, ``kemu`` commands, Spark's executors) import the kemu
checkout this process imports: ``pytest_configure`` puts it first on ``PYTHONPATH``, and
takes the fingerprint of its source that a failed trace comparison checks
(``tests.support.source``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import threading
from collections.abc import Mapping

import pytest
import structlog
from pytest_asyncio.plugin import LoopFactory

import tests.support.kafka_python  # imported for its side effect
import tests.support.source
from actors.runtime.freeze import FreezableEventLoop

pytest_plugins = ["tests.support.zookeeper", "pytester"]

KEMU_PLUGIN = "kemu"
"""The name of kemu's pytest plugin (its ``pytest11`` entry point in pyproject.toml)."""


def pytest_configure(config: pytest.Config) -> None:
    """Load kemu's pytest plugin if the installed distribution did not (see above), and
    keep in-process clusters' logs at WARNING, as ``kemu up`` prints them by default:
    structlog unconfigured prints every level, the DEBUG messages between actors too, into
    each test's captured output. Loggers are not cached, so ``capture_logs`` still sees
    them; a test that calls ``configure_logging`` replaces this. Subprocesses are pinned
    to this checkout, and its source fingerprinted (see above)."""
    tests.support.source.pin_subprocesses()
    tests.support.source.session_fingerprint = tests.support.source.source_fingerprint()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    manager = config.pluginmanager
    if not manager.has_plugin(KEMU_PLUGIN) and not manager.is_blocked(KEMU_PLUGIN):
        manager.register(importlib.import_module("cluster.testing.pytest_plugin"), KEMU_PLUGIN)


LOOP_FACTORIES: Mapping[str, LoopFactory] = {
    "asyncio": asyncio.new_event_loop,
    "freezable": FreezableEventLoop,
}
"""The loops an async test can ask for by name; "asyncio" unless it names another."""


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, LoopFactory]:
    """Only the loops a test names in ``@pytest.mark.asyncio(loop_factories=[...])``, or
    the default one (pytest-asyncio would otherwise run every test once on each loop)."""
    marker = item.get_closest_marker("asyncio")
    names = marker.kwargs.get("loop_factories", ["asyncio"]) if marker else ["asyncio"]
    unknown = [name for name in names if name not in LOOP_FACTORIES]
    if unknown:
        raise pytest.UsageError(
            f"{item.nodeid}: no event loop named {unknown}: {[*LOOP_FACTORIES]}"
        )
    return {name: LOOP_FACTORIES[name] for name in names}


ZOOKEEPER_FIXTURES = frozenset({"zookeeper_server", "zookeeper_ensemble"})
"""The fixtures that start real ZooKeeper servers (tests.support.zookeeper)."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses a real ZooKeeper server carries the ``zookeeper`` marker."""
    for item in items:
        if ZOOKEEPER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.zookeeper)


_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A non-daemon thread a failed test left running (a client polling a stopped
    cluster) would keep the interpreter, and CI, from ever exiting: name it and end the
    process with the session's own exit status instead of hanging."""
    status = config.stash.get(_EXIT_STATUS, None)
    stray = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if stray and status is not None:
        names = ", ".join(sorted(t.name for t in stray))
        print(f"tests: non-daemon threads outlived the session: {names}", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
