"""Crash safety: ``kemu up --zookeeper`` (brokers in one process) and ``kemu up --processes
--zookeeper`` SIGKILLed whole, launcher and broker processes at once, at a random moment
while topics are being created and deleted through the Kafka API, then started again on
the same log dirs and ZooKeeper chroot. Each seed picks the topics and the moment. The
cluster must converge: every pending deletion completes, every topic in ZooKeeper is fully
created (assignment, partition states with leader in ISR, a log dir for every replica),
no orphan znode, no log dir of a topic ZooKeeper does not assign to its broker, no
``-delete`` dir left, every ``meta.properties`` intact (the broker's id, the cluster id
ZooKeeper holds), and the logs recovered: every record a producer had acknowledged
(acks=all, to a topic produced to through every crash) is read back at its offset.

Seeds run in a chain: each starts from the state the previous one converged to, so a
cluster is started once per seed rather than twice. A seed that found a bug stays in
``SEEDS`` with what it found.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from actors.invariants import (
    FinalState,
    Violation,
    no_orphan_log_dirs,
    no_orphan_znodes,
    pending_deletions,
    store_leadership,
)
from actors.runtime.tracer import read_trace
from actors.zk.kafka_zk import get_controller_id
from cluster.chaos.conditions import read_log_dirs, store_view
from cluster.kafka.client import AdminClientConfig, KafkaAdminClient, KafkaDataClient
from cluster.launch.connect import ClusterFile, open_store
from protocol import zkdata
from protocol.errors import ErrorCode, KemuError, NoNodeError
from protocol.ids import TopicName
from protocol.kafka_api import CreatableTopic
from tests.support.kemu_commands import KemuUp, alive
from tests.support.record_batches import client_batch, decode_batches
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.slow, pytest.mark.processes]  # kemu up as a child process

BROKERS = 3
SESSION_MS = 3000  # short, for the killed registrations to go; a loaded machine needs 3 s
CONFIG = (
    "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
    "--config", "log.segment.delete.delay.ms=0",  # -delete dirs go at once
)  # fmt: skip
KILL_WINDOW = (0.0, 1.2)  # seconds after the first request: when the SIGKILL comes
EXPIRY_TIMEOUT = 15.0  # for the killed cluster's sessions to expire
CONVERGE_TIMEOUT = 30.0
# ~10 s a seed (3 s for the killed sessions to expire, 3-6 s to start again).
DATA_TOPIC = "data"  # written with acks=all through every crash: nothing acknowledged is lost
CLIENT = AdminClientConfig(request_timeout_ms=5_000, default_api_timeout_ms=5_000)
SEEDS = {"one-process": range(5), "processes": range(100, 102)}
# Seed 4 of the one-process chain found a broker that halted after a restart: its
# -delete names came from its seeded random stream, the same in every run of `kemu up`,
# so the new run's rename of a deleted log collided with the -delete dir the killed run
# had left, and took the log dir offline (now random per run, as Kafka's UUIDs). Whether a
# seed meets it depends on where the kill lands, so tests/unit/test_log_manager.py pins
# it; the seed stays in the chain.


@dataclass
class Rig:
    """One cluster's log dirs, cluster file and ZooKeeper chroot, across its restarts."""

    tmp: Path
    zookeeper: str  # HOST:PORT/chroot
    processes: bool
    up: KemuUp | None = None
    starts: int = 0

    def start(self) -> KemuUp:
        extra = ("--processes",) if self.processes else ()
        trace = ("--trace", str(self.tmp / f"trace-{self.starts}.jsonl"))  # for a failure's reader
        self.starts += 1
        self.up = KemuUp(self.tmp, "--zookeeper", self.zookeeper, *CONFIG, *extra, *trace)
        self.up.start()
        return self.up

    def pids(self) -> list[int]:
        """The launcher's pid and its broker processes'."""
        assert self.up is not None
        assert self.up.process is not None
        brokers = {b.pid for b in ClusterFile.read(self.up.cluster_file).brokers}
        return [self.up.process.pid, *sorted(brokers - {self.up.process.pid})]

    def log_dir(self, broker: int) -> Path:
        return self.tmp / "logs" / f"broker-{broker}"

    def kill(self, pids: list[int]) -> None:
        """SIGKILL every process of the cluster, as a power cut of its processes."""
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        assert self.up is not None
        self.up.kill()  # reaps the launcher and closes its output


@pytest.fixture(params=["one-process", "processes"])
def rig(
    request: pytest.FixtureRequest, tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> Iterator[Rig]:
    chroot = f"{zookeeper_server.hosts}/kemu-crash-{uuid.uuid4().hex}"
    made = Rig(tmp_path, chroot, processes=request.param == "processes")
    try:
        yield made
    finally:
        if made.up is not None and made.up.process is not None and made.up.cluster_file.exists():
            made.kill(made.pids())
        elif made.up is not None:
            made.up.kill()


@pytest.mark.timeout(300)
def test_sigkill_during_topic_changes_then_restart_converges(rig: Rig) -> None:
    """Every seed: churn, SIGKILL, wait for the sessions to expire, start, converge."""
    mode = "processes" if rig.processes else "one-process"
    acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value, of DATA_TOPIC
    anyio.run(_make_data_topic, rig.start().bootstrap)
    for seed in SEEDS[mode]:
        up = rig.up
        assert up is not None
        pids = rig.pids()
        existing = [t for t in anyio.run(_topics, rig.zookeeper) if t != DATA_TOPIC]
        rng = random.Random(seed)
        anyio.run(_churn_then_kill, rig, up.bootstrap, rng, existing, pids, (seed, acked))
        anyio.run(_sessions_gone, rig.zookeeper)
        rig.start()
        final = anyio.run(_converged, rig, seed)
        assert final.store.brokers == tuple(range(BROKERS)), f"seed {seed}"
        anyio.run(_meta_intact, rig, seed)
        assert rig.up is not None
        anyio.run(_acked_kept, rig.up.bootstrap, acked, seed)
    assert acked, "no record was acknowledged before any crash"
    assert rig.up is not None
    assert rig.up.stop() == 0  # its trace is complete now
    if not rig.processes:  # (broker processes trace nothing of their own)
        _queued(rig)


async def _make_data_topic(bootstrap: str) -> None:
    async with KafkaDataClient(bootstrap, CLIENT) as client:
        topic = CreatableTopic(
            name=TopicName(DATA_TOPIC), num_partitions=2, replication_factor=BROKERS
        )
        [created] = await client.create_topics([topic])
        assert created.error_code is ErrorCode.NONE, created
        await client.partitions(DATA_TOPIC)  # until both partitions have a leader


async def _produce(bootstrap: str, seed: int, acked: dict[tuple[int, int], bytes]) -> None:
    """One record per Produce (acks=all), to each partition in turn, until the cluster
    dies; every acknowledged one goes into ``acked``."""
    async with KafkaDataClient(bootstrap, CLIENT) as client:
        for i in itertools.count():
            value = f"{seed}-{i}".encode()
            partition = i % 2
            try:
                answer = await client.produce(
                    DATA_TOPIC, partition, client_batch([value], key=None), acks=-1
                )
            except (KemuError, OSError):
                return
            if answer.error_code is ErrorCode.NONE:
                acked[(partition, answer.base_offset)] = value


async def _acked_kept(bootstrap: str, acked: dict[tuple[int, int], bytes], seed: int) -> None:
    """Every record acknowledged with acks=all, under this crash or an earlier one, is
    read back at its offset: the logs recovered (a SIGKILL loses no written byte)."""
    found: dict[tuple[int, int], bytes | None] = {}
    positions = {0: 0, 1: 0}
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    async with KafkaDataClient(bootstrap, CLIENT) as client:
        while any(found.get(key) != value for key, value in acked.items()):
            if time.monotonic() > deadline:
                lost = sorted(k for k, v in acked.items() if found.get(k) != v)
                raise AssertionError(f"seed {seed}: acknowledged records not read: {lost}")
            answers = await client.fetch_positions(DATA_TOPIC, positions, max_wait_ms=100)
            for partition, data in answers.items():
                for batch in decode_batches(bytes(data.records)):
                    for offset, value in zip(batch.offsets, batch.values, strict=True):
                        found[(partition, offset)] = value
                        positions[partition] = offset + 1


async def _churn_then_kill(
    rig: Rig,
    bootstrap: str,
    rng: random.Random,
    existing: list[str],
    pids: list[int],
    producing: tuple[int, dict[tuple[int, int], bytes]],
) -> None:
    """Create 2-4 topics and delete up to 2 of the existing ones, each its own request
    from its own client at a random offset, produce to DATA_TOPIC all along, and SIGKILL
    the cluster at a random moment."""
    ops: list[tuple[float, str, CreatableTopic | None]] = []
    for _ in range(rng.randint(2, 4)):
        name = f"t{rng.getrandbits(32):08x}"
        topic = CreatableTopic(
            name=TopicName(name),
            num_partitions=rng.randint(1, 6),
            replication_factor=rng.randint(1, BROKERS),
        )
        ops.append((rng.uniform(0, 0.5), name, topic))
    for name in rng.sample(existing, min(len(existing), rng.randint(0, 2))):
        ops.append((rng.uniform(0, 0.5), name, None))
    kill_at = rng.uniform(*KILL_WINDOW)

    async def one(delay: float, name: str, topic: CreatableTopic | None) -> None:
        await anyio.sleep(delay)  # the op's random moment
        try:
            async with KafkaAdminClient(bootstrap, CLIENT) as client:
                if topic is None:
                    await client.delete_topics([name])
                else:
                    await client.create_topics([topic])
        except (KemuError, OSError):
            pass  # the cluster died under it: what it did is for ZooKeeper to say

    async with anyio.create_task_group() as tg:
        tg.start_soon(_produce, bootstrap, *producing)
        for delay, name, creatable in ops:
            tg.start_soon(one, delay, name, creatable)
        await anyio.sleep(kill_at)  # the random moment of the crash
        rig.kill(pids)
        tg.cancel_scope.cancel()


async def _topics(zookeeper: str) -> list[str]:
    async with open_store(zookeeper, name="crash-test") as store:
        session = await store.open_session(timeout=5.0, name="crash-test")
        try:
            return sorted(await session.children(zkdata.TOPICS_PATH))
        except NoNodeError:
            return []


async def _sessions_gone(zookeeper: str) -> None:
    """Until the killed brokers' registrations have expired (a broker cannot register
    while its old ephemeral znode stands, as in Kafka)."""
    async with open_store(zookeeper, name="crash-test") as store:
        session = await store.open_session(timeout=5.0, name="crash-test")
        with anyio.fail_after(EXPIRY_TIMEOUT):
            while True:
                try:
                    if not await session.children(zkdata.BROKER_IDS_PATH):
                        return
                except NoNodeError:
                    return
                await anyio.sleep(0.1)  # polling another process's state in ZooKeeper


_SCHEDULED = "-delete is still on disk"


def _violations(final: FinalState) -> list[Violation]:
    """The end-state rules, but for ``-delete`` dirs: a log manager removes those it finds
    at start-up only ``InitialTaskDelayMs`` (30 s) later, as Kafka's does (``_queued``
    checks that it has them)."""
    return [
        *pending_deletions(final),
        *no_orphan_znodes(final),
        *store_leadership(final),
        *(
            v
            for v in no_orphan_log_dirs(final)
            if not v.message.endswith("-delete is still on disk")
        ),
        *_unled(final),
    ]


def _queued(rig: Rig) -> None:
    """Every ``-delete`` dir left on disk was in its log manager's deletion queue in the
    last run: loaded at start-up or renamed by it (from the run's complete trace)."""
    _, events = read_trace(rig.tmp / f"trace-{rig.starts - 1}.jsonl")
    queued: set[str] = set()
    for event in events:
        if event.kind == "log_dir" and event.type == "load_deleted":
            queued.add(Path(str(event.fields["dir"])).name)
        elif event.kind == "log_dir" and event.type == "rename":
            queued.add(str(event.fields.get("to")))
    left = {
        name
        for broker in range(BROKERS)
        for name in read_log_dirs(rig.log_dir(broker))
        if name.endswith("-delete")
    }
    assert left <= queued, f"-delete dirs no log manager had: {sorted(left - queued)}"


def _unled(final: FinalState) -> list[Violation]:
    """Every partition of every topic has a live leader once converged."""
    out: list[Violation] = []
    for topic, states in sorted(final.store.states.items()):
        for partition in sorted(final.store.topics.get(topic, {})):
            view = states.get(partition)
            if view is None or view.leader not in final.store.brokers:
                out.append(Violation(rule="led", message=f"{topic}-{partition} has no leader"))
    return out


async def _converged(rig: Rig, seed: int) -> FinalState:
    """The store and log dirs once every rule holds; the last violations after the
    deadline otherwise."""
    deadline = time.monotonic() + CONVERGE_TIMEOUT
    async with open_store(rig.zookeeper, name="crash-test") as store:
        session = await store.open_session(timeout=5.0, name="crash-test")
        while True:
            controller = await get_controller_id(session)
            view = await store_view(
                session, controller=None if controller is None else int(controller)
            )
            final = FinalState(
                store=view,
                running=tuple(range(BROKERS)),
                caches={},
                log_dirs={b: read_log_dirs(rig.log_dir(b)) for b in range(BROKERS)},
            )
            violations = _violations(final)
            if not violations and len(view.brokers) == BROKERS:
                return final
            if time.monotonic() > deadline:
                listed = "\n".join(v.message for v in violations)
                raise AssertionError(
                    f"seed {seed}: no convergence within {CONVERGE_TIMEOUT}s:\n{listed}"
                )
            await anyio.sleep(0.1)  # polling the cluster's progress


async def _meta_intact(rig: Rig, seed: int) -> None:
    """Each broker's meta.properties names it and the cluster id ZooKeeper holds."""
    async with open_store(rig.zookeeper, name="crash-test") as store:
        session = await store.open_session(timeout=5.0, name="crash-test")
        data, _ = await session.get(zkdata.CLUSTER_ID_PATH)
    cluster_id = zkdata.ClusterId.decode(data).cluster_id
    for broker in range(BROKERS):
        lines = (rig.log_dir(broker) / "meta.properties").read_text().splitlines()
        props = dict(line.split("=", 1) for line in lines if "=" in line)
        assert props == {"broker.id": str(broker), "version": "0", "cluster.id": cluster_id}, (
            f"seed {seed}: broker {broker}"
        )
