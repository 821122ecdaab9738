"""``KemuCluster``: a kemu cluster for tests and scripts, in one ``with`` line.

The cluster runs on an event loop of its own, on a daemon thread (``_LoopThread``), and the
caller reaches it through an anyio ``BlockingPortal``. So the same object serves plain
synchronous code (``with KemuCluster() as c``, blocking methods) and async code
(``async with KemuCluster() as c`` gives an ``AsyncKemuCluster``, whose methods are
coroutines that wait without blocking the caller's loop). The cluster's loop is a
``FreezableEventLoop`` (``actors.runtime.freeze``), so in-process brokers can be paused,
and it never competes with the caller's loop: a blocking client (kafka-python) called
from an async test cannot stall the brokers it talks to.

What runs is what ``kemu up`` runs: ``Cluster`` (every broker in this process) or, with
``processes=True``, ``ProcessCluster`` (one OS process per broker), on free ports, with
the embedded store or a real ZooKeeper. Broker commands go through the same ``Launcher``
operations as ``kemu broker stop|kill|start|pause|resume`` (``cluster.launch.control.
carry_out``): the same refusals, the same waits. docs/python-api.md is the reference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self, TypeVar, overload

import anyio
import anyio.abc
import anyio.to_thread
from anyio.from_thread import BlockingPortal

from actors.controller.recording import CONTROLLER_INPUTS
from actors.runtime.clock import RealClock
from actors.runtime.freeze import FreezableEventLoop
from actors.runtime.tracer import Tracer
from cluster.kafka.client import KafkaAdminClient
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.control import ClusterLauncher, Launcher, LauncherError, carry_out
from cluster.launch.processes import ProcessCluster
from cluster.logging import configure_logging
from cluster.trace_files import JsonlTraceWriter
from protocol.errors import ErrorCode, KemuError, sole_error
from protocol.ids import BrokerId, TopicName
from protocol.kafka_api import ClientApiKey, CreatableTopic, CreateTopicResult, TopicConfig
from protocol.launcher import BrokerAction, BrokerCommand, BrokerState
from protocol.trace import TraceEvent, TraceHeader

__all__ = ["AsyncKemuCluster", "ConfigValue", "KemuCluster", "KemuClusterError"]

T = TypeVar("T")

ConfigValue = str | int | float | bool
"""A broker or topic config value: strings as Kafka's properties files have them, or
Python values (``True`` is ``"true"``)."""

STOP_TIMEOUT: Final = 60.0
"""Seconds ``close`` waits for the cluster to stop (broker processes: SIGTERM, then
SIGKILL after ``cluster.launch.processes.STOP_TIMEOUT``)."""

LEADER_POLL: Final = 0.01
"""Seconds between two Metadata requests while ``create_topic`` waits for leaders."""

REAPER: Final = """\
import os, shutil, sys, time
directory = sys.argv[1]
sys.stdin.buffer.read()
deadline = time.monotonic() + float(sys.argv[2])
while os.path.lexists(directory):
    shutil.rmtree(directory, ignore_errors=True)
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.1)
"""
"""The program of a ``_Reaper`` process (``python -I -S -c``: the standard library only,
so it starts in milliseconds): wait for the end of its stdin, then remove the directory,
again and again while broker processes that outlived their launcher still write into it,
at most ``REAPER_PATIENCE`` seconds."""

REAPER_PATIENCE: Final = 60.0
"""Seconds a ``_Reaper`` keeps removing a directory that something still writes into
(broker processes stop by themselves within ``cluster.launch.processes.STOP_TIMEOUT``
once their launcher is gone)."""


class KemuClusterError(KemuError):
    """A cluster that did not start, a broker command that was refused or failed, a
    topic that was not created (``code``: the Kafka error code, when there is one)."""

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def _config_text(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _rack_map(racks: Mapping[int, str] | Sequence[str] | None, brokers: int) -> dict[int, str]:
    if racks is None:
        return {}
    if isinstance(racks, str):
        raise KemuClusterError("racks: a mapping {broker id: rack} or a sequence of racks")
    by_broker = dict(racks.items()) if isinstance(racks, Mapping) else dict(enumerate(racks))
    unknown = sorted(b for b in by_broker if not 0 <= b < brokers)
    if unknown:
        raise KemuClusterError(
            f"racks: no broker {unknown[0]} in a cluster of {brokers} (ids 0-{brokers - 1})"
        )
    return by_broker


class _LoopThread:
    """An anyio event loop (a ``FreezableEventLoop``) on a daemon thread, reached through a
    ``BlockingPortal``. A daemon thread: a script that never closes its cluster still
    exits (broker processes stop by themselves once their launcher is gone)."""

    def __init__(self, name: str) -> None:
        self._handover: queue.Queue[BlockingPortal | BaseException] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        got = self._handover.get()
        if isinstance(got, BaseException):
            self._thread.join()
            raise got
        self.portal = got

    def _main(self) -> None:
        try:
            anyio.run(
                self._serve, backend="asyncio", backend_options={"loop_factory": FreezableEventLoop}
            )
        except BaseException as exc:  # the loop did not start: the opener raises it
            if self._handover.empty():
                self._handover.put(exc)

    async def _serve(self) -> None:
        async with BlockingPortal() as portal:
            self._handover.put(portal)
            await portal.sleep_until_stopped()

    def close(self) -> None:
        """Cancel whatever still runs on the loop, end it and join its thread."""
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                self.portal.call(self.portal.stop, True)
        self._thread.join()


class _Reaper:
    """A process that removes a temporary log directory once its ``KemuCluster`` is done
    with it, however that happens: it waits for the end of a pipe whose only writer is
    the ``KemuCluster``'s process, and a process SIGKILLed (or a script that never calls
    ``close``) closes its pipes as surely as ``close`` does. ``close`` removes the
    directory itself first; the reaper is for when it never gets to. In a session of its
    own, so a terminal's Ctrl-C meant for the program does not stop it."""

    def __init__(self, directory: Path) -> None:
        self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and program
            [sys.executable, "-I", "-S", "-c", REAPER, str(directory), str(REAPER_PATIENCE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self._process.pid

    def close(self) -> None:
        """End the pipe (the reaper removes whatever is left, at once) and wait for the
        reaper to exit."""
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        try:
            self._process.wait(timeout=REAPER_PATIENCE)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class KemuCluster:
    """A local kemu cluster: ``with KemuCluster(brokers=3) as c: ... c.bootstrap_servers``.

    ``config``: broker configs (Kafka's names, as in ``server.properties``); ``racks``:
    ``{broker id: rack}`` or one rack per broker in id order; ``zookeeper``: a real
    ZooKeeper's ``HOST:PORT[/chroot]`` (None: the embedded store); ``processes``: one OS
    process per broker instead of every broker in this process; ``log_dir``: where the
    brokers' log dirs go, kept afterwards (None: a temporary directory, removed on close,
    or by its ``_Reaper`` if this process ends without closing); ``trace``: a JSONL trace
    file (docs/trace-schema.md) of the run. Bad arguments raise ``KemuClusterError`` here,
    a failed start in ``open``/``with``.
    """

    def __init__(
        self,
        brokers: int = 3,
        config: Mapping[str, ConfigValue] | None = None,
        racks: Mapping[int, str] | Sequence[str] | None = None,
        zookeeper: str | None = None,
        processes: bool = False,
        log_dir: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        seed: int = 0,
        trace: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
            raise KemuClusterError(f"brokers: a positive number of brokers, not {brokers!r}")
        self._given_log_dir = Path(log_dir) if log_dir is not None else None
        self._spec = ClusterSpec(
            brokers=brokers,
            base_port=0,  # every listener on a free port
            host=host,
            log_dir=self._given_log_dir or Path("."),  # the temporary one is made by open
            zookeeper=zookeeper or None,
            racks=_rack_map(racks, brokers),
            config={name: _config_text(value) for name, value in (config or {}).items()},
            seed=seed,
        )
        try:
            self._spec.broker_config()
        except KemuError as exc:
            raise KemuClusterError(f"config: {exc}") from None
        self.processes = processes
        self._trace = Path(trace) if trace is not None else None
        self._writer: JsonlTraceWriter | None = None
        self._tracer_in_use: Tracer | None = None
        self._loop: _LoopThread | None = None
        self._runner: Future[None] | None = None
        self._launcher: Launcher | None = None
        self._stop_requested: anyio.Event | None = None
        self._temp_dir: Path | None = None
        self._reaper: _Reaper | None = None
        self._ports: dict[int, int] = {}
        self._aio = AsyncKemuCluster(self)

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> Self:
        """Start the cluster; return once every broker is registered and all agree on
        the controller and the live brokers. ``KemuClusterError`` if it did not start
        (nothing of it is left running)."""
        if self._loop is not None or self._runner is not None:
            raise KemuClusterError("this KemuCluster was already opened (make a new one)")
        configure_logging()  # WARNING to stderr unless the process configured it already
        if self._given_log_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="kemu-"))
            self._spec = dataclasses.replace(self._spec, log_dir=self._temp_dir)
        try:
            if self._temp_dir is not None:
                self._reaper = _Reaper(self._temp_dir)
            self._loop = _LoopThread(f"kemu-cluster-{id(self):x}")
            self._runner, ports = self._loop.portal.start_task(self._run)
            self._ports = dict(ports)
        except Exception as exc:
            self._discard()
            error = sole_error(exc)
            what = (
                str(error) if isinstance(error, KemuError) else f"{type(error).__name__}: {error}"
            )
            raise KemuClusterError(f"the kemu cluster did not start: {what}") from error
        except BaseException:
            self._discard()
            raise
        return self

    def close(self) -> None:
        """Stop every broker and the store, end the cluster's thread, remove the temporary
        log directory (a ``log_dir`` given is kept). Nothing if it is not running."""
        loop, runner = self._loop, self._runner
        if loop is None:
            return
        failure: BaseException | None = None
        try:
            if runner is not None and not runner.done():
                loop.portal.call(self._request_stop)
            if runner is not None:
                runner.result(timeout=STOP_TIMEOUT)
        except FutureTimeoutError:
            failure = KemuClusterError(f"the kemu cluster did not stop within {STOP_TIMEOUT:g}s")
        except Exception as exc:
            failure = exc
        finally:
            self._discard()
        if failure is not None:
            error = sole_error(failure)
            raise KemuClusterError(f"the kemu cluster failed: {error}") from error

    def _discard(self) -> None:
        """Whatever an open left behind: the loop's thread, the trace file, the temporary
        log directory and its ``_Reaper``."""
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.close()
        self._launcher = None
        self._tracer_in_use = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.close()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> AsyncKemuCluster:
        await anyio.to_thread.run_sync(self.open)
        return self._aio

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.close)

    # ------------------------------------------------------------------ on the cluster's loop

    def _tracer(self) -> Tracer:
        if self._trace is None:
            tracer = Tracer()
        else:
            # As `kemu up --trace`: the controllers record their inputs, for `kemu trace
            # replay`.
            tracer = Tracer(details={CONTROLLER_INPUTS})
            self._writer = JsonlTraceWriter(
                self._trace, TraceHeader(run="kemu-python", seed=self._spec.seed, clock="real")
            )
            tracer.add_sink(self._writer)
        self._tracer_in_use = tracer  # wait_until listens to it
        return tracer

    async def _run(
        self, *, task_status: anyio.abc.TaskStatus[dict[int, int]] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        self._stop_requested = anyio.Event()
        if self.processes:
            await self._run_processes(task_status)
        else:
            await self._run_in_process(task_status)

    async def _run_in_process(self, task_status: anyio.abc.TaskStatus[dict[int, int]]) -> None:
        assert self._stop_requested is not None
        cluster = Cluster(self._spec, tracer=self._tracer())
        async with anyio.create_task_group() as tg:
            await tg.start(cluster.run)
            launcher = ClusterLauncher(cluster)
            self._launcher = launcher
            task_status.started(dict(cluster.ports))
            await self._stop_requested.wait()
            launcher.stopping = True  # no more broker commands
            cluster.stop_brokers()
            tg.cancel_scope.cancel()

    async def _run_processes(self, task_status: anyio.abc.TaskStatus[dict[int, int]]) -> None:
        stop_requested = self._stop_requested
        assert stop_requested is not None
        cluster = ProcessCluster(self._spec, tracer=self._tracer(), clock=RealClock())
        self._launcher = cluster

        async def ready() -> None:
            task_status.started(cluster.ports)

        async def stop_when_asked() -> None:
            await stop_requested.wait()
            cluster.stop()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_asked)
            await cluster.run(ready)  # until stopped; raises ClusterError if it never started
            tg.cancel_scope.cancel()

    def _request_stop(self) -> None:
        if self._stop_requested is not None:
            self._stop_requested.set()

    def _on_loop(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        loop = self._loop
        if loop is None or self._launcher is None:
            raise KemuClusterError(
                "the kemu cluster is not running (use it inside `with KemuCluster(...) as c`)"
            )
        return loop.portal.call(fn, *args)

    def _running_launcher(self) -> Launcher:
        if self._launcher is None:
            raise KemuClusterError("the kemu cluster is not running")
        return self._launcher

    # ------------------------------------------------------------------ what clients need

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT,...`` of every broker's Kafka listener, as clients take it (a
        restarted broker listens on the same port)."""
        if not self._ports:
            raise KemuClusterError("the kemu cluster has not started")
        host = self._spec.host
        return ",".join(f"{host}:{port}" for _, port in sorted(self._ports.items()))

    @property
    def zookeeper_connect(self) -> str | None:
        """The real ZooKeeper's connection string the cluster was given, or None on the
        embedded store (kemu's own store, which speaks no ZooKeeper protocol)."""
        return self._spec.zookeeper

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker's id, 0 to ``brokers - 1``, running or not."""
        return tuple(range(self._spec.brokers))

    @property
    def log_dir(self) -> Path:
        """The root of the brokers' log dirs (broker ``i``'s is ``log_dir/broker-i``)."""
        return self._spec.log_dir

    @property
    def aio(self) -> AsyncKemuCluster:
        """The same cluster with coroutine methods, for async code."""
        return self._aio

    def address_of(self, broker_id: int) -> str:
        """``HOST:PORT`` of one broker's Kafka listener."""
        if broker_id not in self._ports:
            raise KemuClusterError(f"no broker {broker_id} (ids {list(self.broker_ids)})")
        return f"{self._spec.host}:{self._ports[broker_id]}"

    # ------------------------------------------------------------------ observation

    def controller_id(self) -> int:
        """The active controller's broker id as the running brokers know it (-1: none)."""
        return self._on_loop(self._controller_id)

    async def _controller_id(self) -> int:
        status = await self._running_launcher().cluster_status()
        return int(status.controller_id)

    def running_brokers(self) -> tuple[int, ...]:
        """The ids of the brokers that run now (a paused broker does not count)."""
        return self._on_loop(self._running_brokers)

    async def _running_brokers(self) -> tuple[int, ...]:
        states = self._running_launcher().broker_states()
        return tuple(b for b, s in sorted(states.items()) if s is BrokerState.RUNNING)

    def wait_until(self, condition: Callable[[], T], timeout: float = 10.0) -> T:
        """Call ``condition`` until it returns something true, and return that.

        It is called at once, then again whenever the cluster changed: each time the
        cluster's tracer reports an event that is not a mere observation (``_Changes``:
        a broker crashed, a store write or watch, a controller event, a message between
        actors, a produce), never on a timer; with ``processes=True`` also after a
        growing pause (``_Changes.recheck``), since the broker processes' own events do
        not reach this process. Once ``timeout`` seconds have passed it is called one
        last time, then ``TimeoutError`` names the last value. ``condition`` should
        observe the cluster (metadata, a poll), not change it."""
        deadline = time.monotonic() + timeout
        with self._watching_changes() as changes:
            while True:
                seen = changes.count
                last = condition()
                if last:
                    return last
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _not_met(timeout, last)
                changes.wait_past(seen, remaining)

    @contextlib.contextmanager
    def _watching_changes(self) -> Iterator[_Changes]:
        changes = self._watch_changes()
        try:
            yield changes
        finally:
            self._unwatch_changes(changes)

    def _watch_changes(self) -> _Changes:
        """A ``_Changes`` sink on the cluster's tracer (added on the cluster's loop, which
        alone iterates the sinks); tracing is on while a sink listens."""
        changes = _Changes(recheck=self.processes)
        tracer = self._running_tracer()
        self._on_loop(_call_async, tracer.add_sink, changes)
        return changes

    def _unwatch_changes(self, changes: _Changes) -> None:
        tracer = self._running_tracer()
        with contextlib.suppress(KemuClusterError, RuntimeError):  # the cluster ended meanwhile
            self._on_loop(_call_async, tracer.remove_sink, changes)

    def _running_tracer(self) -> Tracer:
        if self._tracer_in_use is None:
            raise KemuClusterError("the kemu cluster is not running")
        return self._tracer_in_use

    # ------------------------------------------------------------------ broker commands

    def stop(self, broker_id: int) -> str:
        """Stop a broker gracefully (controlled shutdown moves its leaders away first);
        returns once it is down and the other brokers agree again. Returns the one line
        ``kemu broker stop`` prints."""
        return self._command(BrokerAction.STOP, broker_id)

    def kill(self, broker_id: int) -> str:
        """Kill a broker (no graceful step): its store session expires after
        ``zookeeper.session.timeout.ms``, and only then does the controller see it gone."""
        return self._command(BrokerAction.KILL, broker_id)

    def start(self, broker_id: int) -> str:
        """Start a stopped or killed broker again, on its port and log dir; after a kill,
        first waits for its old session to expire (as Kafka would refuse to register)."""
        return self._command(BrokerAction.START, broker_id)

    def pause(self, broker_id: int) -> str:
        """Freeze a broker whole, as SIGSTOP freezes a JVM: it answers nothing and sends
        nothing; its session expires after its timeout unless resumed first. In process
        mode on the embedded store only; with ``processes=True`` a real SIGSTOP."""
        return self._command(BrokerAction.PAUSE, broker_id)

    def resume(self, broker_id: int) -> str:
        """Undo ``pause``; returns once the brokers agree again."""
        return self._command(BrokerAction.RESUME, broker_id)

    def _command(self, action: BrokerAction, broker_id: int) -> str:
        command = BrokerCommand(action=action, broker_id=BrokerId(broker_id))
        return self._on_loop(self._carry_out, command)

    async def _carry_out(self, command: BrokerCommand) -> str:
        try:
            return await carry_out(self._running_launcher(), command)
        except LauncherError as exc:
            what = f"{command.action.value} broker {command.broker_id}"
            raise KemuClusterError(f"{what}: {exc}") from None

    # ------------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, ConfigValue] | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic through the Kafka wire (kemu's admin client, CreateTopics to the
        controller), then wait until every running broker's metadata names a leader for
        each of its partitions. ``KemuClusterError`` with the Kafka error ``code`` if the
        controller refused it."""
        topic = CreatableTopic(
            name=TopicName(name),
            num_partitions=partitions,
            replication_factor=replication_factor,
            configs=tuple(
                TopicConfig(name=key, value=_config_text(value))
                for key, value in (config or {}).items()
            ),
        )
        self._on_loop(self._create_topic, topic, timeout)

    async def _create_topic(self, topic: CreatableTopic, timeout: float) -> None:
        running = await self._running_brokers()
        addresses = [(self._spec.host, self._ports[b]) for b in running]
        if not addresses:
            raise KemuClusterError(f"topic {topic.name!r}: no broker is running")
        try:
            with anyio.fail_after(timeout):
                async with KafkaAdminClient(addresses) as admin:
                    (result,) = await admin.create_topics([topic])
                partitions = _created(result)
                for address in addresses:
                    await _wait_for_leaders(address, topic.name, partitions)
        except TimeoutError:
            raise KemuClusterError(
                f"topic {topic.name!r}: not created with a leader for every partition on"
                f" every running broker within {timeout:g}s"
            ) from None
        except KemuClusterError:
            raise
        except KemuError as exc:
            raise KemuClusterError(f"topic {topic.name!r} was not created: {exc}") from None

    def partition_leaders(self, topic: str) -> dict[int, int]:
        """``{partition: leader broker id}`` of a topic (-1: no leader), as the Metadata
        of a running broker says."""
        return self._on_loop(self._partition_leaders, topic)

    async def _partition_leaders(self, topic: str) -> dict[int, int]:
        running = await self._running_brokers()
        addresses = [(self._spec.host, self._ports[b]) for b in running]
        if not addresses:
            raise KemuClusterError("no broker is running")
        async with KafkaAdminClient(addresses) as admin:
            try:
                found = await admin.describe_topics([topic])
            except KemuError as exc:
                raise KemuClusterError(f"topic {topic!r}: {exc}") from None
        return {p.partition: int(p.leader) for p in found[TopicName(topic)].partitions}


def _created(result: CreateTopicResult) -> int | None:
    """The partition count of a created topic (None if the answer does not say);
    ``KemuClusterError`` with the code if it was not created."""
    if result.error_code is not ErrorCode.NONE:
        why = result.error_code.name
        if result.error_message:
            why += f": {result.error_message}"
        raise KemuClusterError(
            f"topic {result.name!r} was not created: {why}", code=result.error_code
        )
    return result.num_partitions if result.num_partitions > 0 else None


async def _wait_for_leaders(address: tuple[str, int], topic: str, partitions: int | None) -> None:
    """Until the broker at ``address`` answers Metadata for ``topic`` with every partition
    (``partitions`` of them, if known) led; the caller bounds the wait."""
    async with KafkaAdminClient([address]) as admin:
        while True:
            response = await admin.metadata([topic])
            found = [t for t in response.topics if t.name == topic]
            if found and found[0].error_code is ErrorCode.NONE:
                led = found[0].partitions
                complete = partitions is None or len(led) == partitions
                if led and complete and all(p.leader >= 0 for p in led):
                    return
            await anyio.sleep(LEADER_POLL)


class AsyncKemuCluster:
    """A ``KemuCluster`` for async code (``async with KemuCluster(...) as c``): the same
    properties, and coroutine methods that wait in a worker thread, so the caller's loop
    (and the async clients on it) keep running meanwhile."""

    def __init__(self, cluster: KemuCluster) -> None:
        self.sync = cluster
        """The blocking ``KemuCluster`` (for a blocking client in a worker thread)."""

    @property
    def bootstrap_servers(self) -> str:
        return self.sync.bootstrap_servers

    @property
    def zookeeper_connect(self) -> str | None:
        return self.sync.zookeeper_connect

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return self.sync.broker_ids

    @property
    def log_dir(self) -> Path:
        return self.sync.log_dir

    def address_of(self, broker_id: int) -> str:
        return self.sync.address_of(broker_id)

    async def controller_id(self) -> int:
        return await anyio.to_thread.run_sync(self.sync.controller_id)

    async def running_brokers(self) -> tuple[int, ...]:
        return await anyio.to_thread.run_sync(self.sync.running_brokers)

    async def stop(self, broker_id: int) -> str:
        return await anyio.to_thread.run_sync(self.sync.stop, broker_id)

    async def kill(self, broker_id: int) -> str:
        return await anyio.to_thread.run_sync(self.sync.kill, broker_id)

    async def start(self, broker_id: int) -> str:
        return await anyio.to_thread.run_sync(self.sync.start, broker_id)

    async def pause(self, broker_id: int) -> str:
        return await anyio.to_thread.run_sync(self.sync.pause, broker_id)

    async def resume(self, broker_id: int) -> str:
        return await anyio.to_thread.run_sync(self.sync.resume, broker_id)

    async def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: Mapping[str, ConfigValue] | None = None,
        *,
        timeout: float = 30.0,
    ) -> None:
        create = functools.partial(
            self.sync.create_topic, name, partitions, replication_factor, config, timeout=timeout
        )
        await anyio.to_thread.run_sync(create)

    async def partition_leaders(self, topic: str) -> dict[int, int]:
        return await anyio.to_thread.run_sync(self.sync.partition_leaders, topic)

    @overload
    async def wait_until(
        self, condition: Callable[[], Awaitable[T]], timeout: float = ...
    ) -> T: ...

    @overload
    async def wait_until(self, condition: Callable[[], T], timeout: float = ...) -> T: ...

    async def wait_until(self, condition: Callable[[], Any], timeout: float = 10.0) -> Any:
        """As ``KemuCluster.wait_until``, waiting for the cluster's events in a worker
        thread (the caller's loop runs meanwhile); ``condition`` may be a coroutine
        function, called on the caller's loop."""
        deadline = anyio.current_time() + timeout
        changes = await anyio.to_thread.run_sync(self.sync._watch_changes)
        try:
            while True:
                seen = changes.count
                last = condition()
                if inspect.isawaitable(last):
                    last = await last
                if last:
                    return last
                remaining = deadline - anyio.current_time()
                if remaining <= 0:
                    raise _not_met(timeout, last)
                await anyio.to_thread.run_sync(
                    changes.wait_past, seen, remaining, abandon_on_cancel=True
                )
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.sync._unwatch_changes, changes)


class _Changes:
    """A trace sink that counts the events which may change what a ``wait_until``
    condition sees, and wakes the threads waiting for the count to move.

    Observations do not count: the messages and requests that only read the cluster
    (``OBSERVATIONS``: a broker's status, Metadata and ApiVersions requests, connections
    opened and closed). They are what conditions send, and counting them would wake a
    waiter with its own probes, polling as fast as the condition runs. Everything else
    counts, messages between actors included: a broker learns a new controller from an
    UpdateMetadata request, which no other event announces."""

    RECHECK_FIRST: Final = 0.05
    RECHECK_MOST: Final = 1.0

    def __init__(self, *, recheck: bool) -> None:
        self.count = 0
        self._recheck = recheck
        self._pause = self.RECHECK_FIRST
        self._moved = threading.Condition()

    def __call__(self, event: TraceEvent) -> None:  # on the cluster's loop
        if _observes(event):
            return
        with self._moved:
            self.count += 1
            self._moved.notify_all()

    def wait_past(self, seen: int, timeout: float) -> None:
        """Until ``count`` exceeds ``seen`` or ``timeout`` seconds have passed. With
        ``recheck`` (broker processes, whose events stay in their processes), at most a
        pause that doubles from ``RECHECK_FIRST`` to ``RECHECK_MOST`` while nothing is
        seen, and starts over once something is."""
        if self._recheck:
            timeout = min(timeout, self._pause)
        with self._moved:
            moved = self._moved.wait_for(lambda: self.count > seen, timeout)
        if self._recheck:
            self._pause = self.RECHECK_FIRST if moved else min(2 * self._pause, self.RECHECK_MOST)


OBSERVATIONS: Final = frozenset(
    {
        "BrokerStatusRequest",
        "BrokerStatus",
        "MetadataRequestData",
        "MetadataResponseData",
        "kafka_connection_opened",
        "kafka_connection_closed",
    }
)
"""The traced messages and events that only observe the cluster (``_Changes``)."""
OBSERVING_APIS: Final = frozenset({int(ClientApiKey.METADATA), int(ClientApiKey.API_VERSIONS)})
"""The Kafka requests that only observe, unless they create a topic (whose writes count)."""


def _observes(event: TraceEvent) -> bool:
    if event.type in OBSERVATIONS:
        return True
    return event.type == "kafka_request" and event.fields.get("api_key") in OBSERVING_APIS


def _not_met(timeout: float, last: object) -> TimeoutError:
    return TimeoutError(f"condition not met within {timeout:g}s; last value: {last!r}")


async def _call_async(fn: Callable[..., None], *args: Any) -> None:
    fn(*args)
