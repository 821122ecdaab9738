"""Benchmarks, measured side by side in one run and printed as ratios.

Run with ``scripts/bench.sh`` (or ``python -m cluster.bench``). Every kemu number is
printed next to a baseline measured in the same process, right before or after it, so the
ratio holds on a noisy machine even when absolute numbers move:

* in-process actor ask/reply vs a raw ``asyncio.Queue`` ping-pong (goal >= 0.5x);
* actor ask/reply over kemu's TCP transport vs a raw asyncio-streams request/response echo
  (goal >= 0.5x);
* embedded-store create+get vs the same through aiozk on a local ZooKeeper (and through
  kemu's ZooKeeper adapter);
* bulk topic creation (1,000 topics x 10 partitions x RF 3 on 3 brokers): on the embedded
  store next to the filesystem floor of its 30,000 log directories (the same files made
  with bare ``os`` calls), and on ZooKeeper next to the raw aiozk floor of its znodes;
* the controller event manager's throughput;
* the deterministic chaos campaign (every ``scenarios/*.yaml`` x ``--campaign-seeds``
  seeds): simulated seconds over wall seconds (goal >= 20:1; ``cluster.bench.chaos``);
* 100 brokers holding 100,000 partitions in one process: time to launch, time to create,
  peak RSS (goal < 4 GB; ``cluster.bench.scale``), next to the filesystem floor of its
  300,000 log directories;
* the trace analysis and diff of a pair of 10M-event traces (``--analysis-events``), by
  Spark on ``local[*]`` and by the same analysis in pandas in one process: their times,
  Spark's session start apart, and the peak memory of each process tree (goal: Spark no
  slower, <= 2 GB; ``cluster.bench.analysis``);
* the data plane through confluent-kafka, against ``kemu up`` and librdkafka's mock
  cluster: produce MB/s and messages/s (acks=all, RF 3; goal: kemu >= 0.5x the mock's
  MB/s), produce-to-consume latency p50/p99, a consumer reading the log from the start
  (``--data-messages``; ``cluster.bench.data``);
* bulk topic deletion (the topics of the creation row, deleted with one DeleteTopics)
  next to their creation in the same child process: until DeleteTopics answers, until no
  topic znode is left, until every log is renamed and removed (goal < 3 s embedded and no
  slower than the creation; ``cluster.bench.deletion``), and on ZooKeeper the raw aiozk
  floor of the same znode deletes (goal: within 2x);
* the deterministic campaign (``--spark-campaign-seeds``) as a Spark job on a standalone
  master with two one-core workers, on one executor and on two (goal >= 1.7x), next to
  ``kemu chaos run`` in one process and in two (``cluster.bench.spark_campaign``);
* failover on 10 brokers holding 100,000 partitions (``--failover-topics`` of 100,
  RF 3, ``zookeeper.session.timeout.ms=500``): the controlled shutdown of a broker leading
  10,000 of them (goal < 3 s until its leaderships are moved), then the controller
  crashed: from its session's expiry until a new controller is elected, until the other
  brokers know it, and until every partition is led by a live broker in another broker's
  Metadata (goal < 5 s; ``cluster.bench.failover``).

Rows [7] to [13] run in child processes (the RSS is the measured run's alone). Each other
measurement runs for a fixed number of operations, best of ``--repeat`` runs. Logs go to
stderr at WARNING, as ``kemu up`` configures them. ``--only 5,8`` runs only those rows
(``--creation-only`` is ``--only 5``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import struct
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio
import msgspec

from actors.runtime.actor import Actor, Context, Node
from actors.runtime.clock import RealClock
from actors.runtime.tracer import Tracer
from cluster.bench.process import exit_with, run_child
from cluster.bench.scale import bulk_create_request, fast_tmp, wait_controller
from cluster.logging import configure_logging
from protocol.base import Message

if TYPE_CHECKING:
    from cluster.bench.deletion import DeletionResult

# Bench code measures wall time on purpose: it is the one place that must.
_now = time.perf_counter

_T = TypeVar("_T")


class BenchPing(Message, frozen=True, kw_only=True):
    n: int


@dataclass(frozen=True)
class Result:
    name: str
    ops: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else float("inf")


async def best_of(repeat: int, name: str, ops: int, fn: Callable[[int], Awaitable[None]]) -> Result:
    best = float("inf")
    for _ in range(repeat):
        t0 = _now()
        await fn(ops)
        best = min(best, _now() - t0)
    return Result(name, ops, best)


# ----------------------------------------------------------------- baselines


async def raw_queue_pingpong(ops: int) -> None:
    """Two tasks, two asyncio.Queues: the floor for one in-process request/response."""
    requests: asyncio.Queue[int] = asyncio.Queue()
    replies: asyncio.Queue[int] = asyncio.Queue()

    async def server() -> None:
        while True:
            n = await requests.get()
            replies.put_nowait(n)

    async with anyio.create_task_group() as tg:
        tg.start_soon(server)
        for i in range(ops):
            requests.put_nowait(i)
            await replies.get()
        tg.cancel_scope.cancel()


async def raw_streams_echo(ops: int) -> None:
    """A length-prefixed request/response echo over asyncio streams on loopback."""
    header = struct.Struct(">I")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = header.unpack(await reader.readexactly(4))
                body = await reader.readexactly(size)
                writer.write(header.pack(len(body)) + body)
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    payload = b"x" * 64  # about the size of a small envelope
    for _ in range(ops):
        writer.write(header.pack(len(payload)) + payload)
        (size,) = header.unpack(await reader.readexactly(4))
        await reader.readexactly(size)
    writer.close()
    server.close()
    await server.wait_closed()


# ----------------------------------------------------------------- kemu actors


class _EchoActor(Actor):
    async def receive(self, msg: Message, ctx: Context) -> Message | None:
        return msg


async def actor_pingpong(ops: int, *, tcp: bool) -> None:
    from cluster.network import InProcessTransport, Network, TcpTransport

    tracer = Tracer()
    clock = RealClock()
    transport = TcpTransport() if tcp else InProcessTransport()
    network = Network(transport, tracer=tracer, rng=random.Random(0), clock=clock)
    async with network, anyio.create_task_group() as tg:
        server = Node("server", attach=network.attach, tracer=tracer, clock=clock)
        client = Node("client", attach=network.attach, tracer=tracer, clock=clock)
        echo = _EchoActor("echo")
        await tg.start(server.run, [echo])
        await tg.start(client.run)
        ref = echo.ref
        for i in range(ops):
            await client.ask(ref, BenchPing(n=i))
        client.stop()
        server.stop()


# ----------------------------------------------------------------- stores


async def embedded_create_get(ops: int) -> None:
    from cluster.store import EmbeddedStore

    store = EmbeddedStore()
    session = await store.open_session(name="bench")
    await session.create("/bench", b"")
    for i in range(ops):
        path = f"/bench/n{i}"
        await session.create(path, b"payload")
        await session.get(path)
    await store.aclose()


def zookeeper_adapter_create_get(hosts: str) -> Callable[[int], Awaitable[None]]:
    async def run(ops: int) -> None:
        from cluster.store import ZooKeeperStore

        store = ZooKeeperStore(hosts, chroot=f"/bench-{uuid.uuid4().hex}")
        session = await store.open_session(timeout=10.0, name="bench")
        await session.create("/bench", b"")
        for i in range(ops):
            path = f"/bench/n{i}"
            await session.create(path, b"payload")
            await session.get(path)
        await session.delete("/bench", recursive=True)
        await store.aclose()

    return run


def raw_aiozk_create_get(hosts: str) -> Callable[[int], Awaitable[None]]:
    async def run(ops: int) -> None:
        import aiozk

        client = aiozk.ZKClient(hosts, chroot=f"/bench-raw-{uuid.uuid4().hex}")
        await client.start()
        await client.ensure_path("/bench")
        for i in range(ops):
            path = f"/bench/n{i}"
            await client.create(path, b"payload")
            await client.get_data(path)
        await client.deleteall("/bench")
        await client.close()

    return run


# ----------------------------------------------------------------- cluster


async def cluster_ready_seconds(zookeeper: str | None = None) -> float:
    """Wall time from nothing to a ready 3-broker cluster (every broker registered and
    knowing the controller and each other), as ``kemu up`` waits for it."""
    import tempfile
    from pathlib import Path

    from cluster.launch.cluster import Cluster, ClusterSpec

    with tempfile.TemporaryDirectory(dir=fast_tmp()) as tmp:
        spec = ClusterSpec(brokers=3, base_port=0, log_dir=Path(tmp), zookeeper=zookeeper)
        t0 = _now()
        async with anyio.create_task_group() as tg:
            await tg.start(Cluster(spec).run)
            elapsed = _now() - t0
            tg.cancel_scope.cancel()
    return elapsed


async def create_topics_seconds(
    topics: int, partitions: int, rf: int, zookeeper: str | None = None
) -> float:
    """Wall time for one CreateTopics of ``topics`` topics to be answered, i.e. until every
    partition has a leader in the answering broker's metadata cache."""
    import tempfile
    from pathlib import Path

    from actors.broker.broker import broker_ref
    from cluster.launch.cluster import Cluster, ClusterSpec
    from protocol.kafka_api import CreateTopicsResponseData

    with tempfile.TemporaryDirectory(dir=fast_tmp()) as tmp:
        spec = ClusterSpec(
            brokers=3, base_port=0, log_dir=Path(tmp), zookeeper=zookeeper, listeners=False
        )
        async with anyio.create_task_group() as tg:
            cluster = await tg.start(Cluster(spec).run)
            controller = await wait_controller(cluster)
            request = bulk_create_request("bench", topics, partitions, rf, 600.0)
            t0 = _now()
            reply = await cluster.nodes[controller].ask(
                broker_ref(controller), request, timeout=600
            )
            elapsed = _now() - t0
            assert isinstance(reply, CreateTopicsResponseData)
            failed = [t for t in reply.topics if t.error_code != 0]
            if failed:
                raise RuntimeError(f"{len(failed)} topics failed, e.g. {failed[0]}")
            tg.cancel_scope.cancel()
    return elapsed


def raw_log_dirs_seconds(logs: int, replication_factor: int = 3) -> float:
    """The filesystem floor of the creation bench: ``logs`` directories, each with the files
    of a new log (three empty segment files and a ``leader-epoch-checkpoint``: a leader's,
    one log in ``replication_factor``, holding its epoch, a follower's empty), made with
    bare ``os`` calls in one loop on the same kind of directory: no actors, no store."""
    import os
    import stat
    import tempfile

    names = [f"00000000000000000000.{suffix}" for suffix in ("log", "index", "timeindex")]
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    empty = stat.S_IFREG | 0o666
    with tempfile.TemporaryDirectory(dir=fast_tmp()) as tmp:
        t0 = _now()
        for i in range(logs):
            log = f"{tmp}/bench-{i // 10}-{i % 10}"
            os.mkdir(log)
            for name in names:
                os.mknod(f"{log}/{name}", empty)
            if i % replication_factor:
                os.mknod(f"{log}/leader-epoch-checkpoint", empty)
                continue
            fd = os.open(f"{log}/leader-epoch-checkpoint", flags, 0o666)
            os.write(fd, b"0\n1\n0 0\n")
            os.close(fd)
        return _now() - t0


def raw_aiozk_topic_writes(
    hosts: str, topics: int, partitions: int, chroot: str | None = None
) -> Callable[[int], Awaitable[None]]:
    """The same znodes a creation writes (config, assignment, partitions parent, and per
    partition its node and state), written with raw aiozk, 100 at a time concurrently: the
    plain creates, without the controller's epoch check, its reads or its watches."""

    async def run(_: int) -> None:
        import aiozk

        client = aiozk.ZKClient(hosts, chroot=chroot or f"/bench-floor-{uuid.uuid4().hex}")
        await client.start()
        await client.ensure_path("/config/topics")
        await client.ensure_path("/brokers/topics")
        for start in range(0, topics, 100):
            batch = range(start, min(start + 100, topics))
            await asyncio.gather(*(client.create(f"/config/topics/t{i}", b"{}") for i in batch))
            await asyncio.gather(*(client.create(f"/brokers/topics/t{i}", b"{}") for i in batch))
            await asyncio.gather(
                *(client.create(f"/brokers/topics/t{i}/partitions", b"") for i in batch)
            )
            for p in range(partitions):
                await asyncio.gather(
                    *(client.create(f"/brokers/topics/t{i}/partitions/{p}", b"") for i in batch)
                )
                await asyncio.gather(
                    *(
                        client.create(f"/brokers/topics/t{i}/partitions/{p}/state", b"{}")
                        for i in batch
                    )
                )
        await client.close()

    return run


@dataclass(frozen=True)
class DeleteFloor:
    """Row [11]'s floor on ZooKeeper: its wall seconds, the CPU seconds of this process
    (the raw aiozk client) over them, and the server's (None unless it is a process of
    this machine)."""

    seconds: float
    client_cpu: float
    server_cpu: float | None


async def raw_aiozk_topic_deletes(hosts: str, topics: int, partitions: int) -> DeleteFloor:
    """The floor of row [11] on ZooKeeper: the znodes a deletion removes (per partition its
    state and node, per topic its partitions parent, its assignment, its config and its
    ``/admin/delete_topics`` marker), removed with raw aiozk, 100 topics at a time
    concurrently, children before parents: plain deletes, without the markers' creation,
    the ISR writes of phase 1, the controller's epoch check or its reads. The znodes are
    written first, untimed (``raw_aiozk_topic_writes`` and the markers)."""
    import aiozk

    from cluster.bench.deletion import local_server_cpu

    chroot = f"/bench-floor-{uuid.uuid4().hex}"
    await raw_aiozk_topic_writes(hosts, topics, partitions, chroot)(0)
    client = aiozk.ZKClient(hosts, chroot=chroot)
    await client.start()
    await client.ensure_path("/admin/delete_topics")
    batches = [range(start, min(start + 100, topics)) for start in range(0, topics, 100)]
    for batch in batches:
        await asyncio.gather(*(client.create(f"/admin/delete_topics/t{i}", b"") for i in batch))
    server_cpu = local_server_cpu(hosts)
    server0 = server_cpu()
    t0, cpu0 = _now(), time.process_time()
    for batch in batches:
        for p in range(partitions):
            partition = "/brokers/topics/t{}/partitions/" + str(p)
            await asyncio.gather(*(client.delete(partition.format(i) + "/state") for i in batch))
            await asyncio.gather(*(client.delete(partition.format(i)) for i in batch))
        for path in (
            "/brokers/topics/t{}/partitions",
            "/brokers/topics/t{}",
            "/config/topics/t{}",
            "/admin/delete_topics/t{}",
        ):
            await asyncio.gather(*(client.delete(path.format(i)) for i in batch))
    elapsed, client_cpu, server1 = _now() - t0, time.process_time() - cpu0, server_cpu()
    await client.close()
    spent = None if server0 is None or server1 is None else server1 - server0
    return DeleteFloor(elapsed, client_cpu, spent)


async def controller_events_per_second(events: int) -> float:
    from cluster.bench.controller_events import run_event_benchmark

    t0 = _now()
    await run_event_benchmark(events)
    return events / (_now() - t0)


# ----------------------------------------------------------------- report


def ratio_line(kemu: Result, base: Result, goal: float | None) -> str:
    ratio = kemu.rate / base.rate
    verdict = "" if goal is None else ("  OK" if ratio >= goal else f"  BELOW GOAL {goal}x")
    return (
        f"  {kemu.name:<34} {kemu.rate:>11,.0f} ops/s\n"
        f"  {base.name:<34} {base.rate:>11,.0f} ops/s\n"
        f"  ratio {ratio:.2f}x{verdict}"
    )


async def main_async(args: argparse.Namespace) -> int:
    configure_logging()  # WARNING to stderr, as `kemu up` does by default
    print(f"kemu bench — python {sys.version.split()[0]}, best of {args.repeat}")
    ok = True
    for row in args.only:
        ok = await ROWS[row](args) is not False and ok
    return 0 if ok else 1


async def _row_inprocess(args: argparse.Namespace) -> None:
    print("\n[1] ask/reply in-process: actor runtime vs raw asyncio.Queue ping-pong")
    base = await best_of(args.repeat, "raw asyncio.Queue ping-pong", args.ops, raw_queue_pingpong)
    kemu = await best_of(
        args.repeat, "kemu ask/reply (in-process)", args.ops, lambda n: actor_pingpong(n, tcp=False)
    )
    print(ratio_line(kemu, base, 0.5))


async def _row_tcp(args: argparse.Namespace) -> None:
    print("\n[2] ask/reply over TCP loopback: kemu transport vs raw asyncio-streams echo")
    base = await best_of(args.repeat, "raw asyncio streams echo", args.ops // 2, raw_streams_echo)
    kemu = await best_of(
        args.repeat, "kemu ask/reply (TCP)", args.ops // 2, lambda n: actor_pingpong(n, tcp=True)
    )
    print(ratio_line(kemu, base, 0.5))


async def _row_store(args: argparse.Namespace) -> None:
    print("\n[3] store create+get (one op = create + get of a new znode)")
    emb = await best_of(args.repeat, "embedded store", args.store_ops, embedded_create_get)
    print(f"  {emb.name:<34} {emb.rate:>11,.0f} ops/s")
    if args.zookeeper:
        raw = await best_of(
            args.repeat,
            "raw aiozk on local ZooKeeper",
            args.store_ops // 10,
            raw_aiozk_create_get(args.zookeeper),
        )
        ada = await best_of(
            args.repeat,
            "kemu ZooKeeperStore adapter",
            args.store_ops // 10,
            zookeeper_adapter_create_get(args.zookeeper),
        )
        print(f"  {raw.name:<34} {raw.rate:>11,.0f} ops/s")
        print(f"  {ada.name:<34} {ada.rate:>11,.0f} ops/s")
        print(
            f"  embedded / raw aiozk: {emb.rate / raw.rate:.1f}x;"
            f" adapter / raw aiozk: {ada.rate / raw.rate:.2f}x"
        )
    else:
        print("  (no --zookeeper HOST:PORT given: ZooKeeper rates skipped)")


async def _row_ready(args: argparse.Namespace) -> None:
    print("\n[4] kemu up --brokers 3: time to a ready cluster (goal < 0.3 s, embedded)")
    ready = min([await cluster_ready_seconds() for _ in range(args.repeat)])
    print(f"  embedded store                     {ready:>8.3f} s")
    if args.zookeeper:
        zk_ready = min([await cluster_ready_seconds(_chroot(args.zookeeper)) for _ in range(2)])
        print(f"  real ZooKeeper                     {zk_ready:>8.3f} s")


async def _creation_rows(args: argparse.Namespace) -> None:
    """Row [5]: bulk topic creation, embedded and (with ``--zookeeper``) on ZooKeeper."""
    n, parts = args.topics, 10
    print(
        f"\n[5] create {n} topics x {parts} partitions x RF 3 on 3 brokers"
        " (goal < 3 s embedded; ZooKeeper within 2x of the raw aiozk floor)"
    )
    emb_create = min([await create_topics_seconds(n, parts, 3) for _ in range(args.repeat)])
    fs_floor = min(raw_log_dirs_seconds(n * parts * 3) for _ in range(args.repeat))
    verdict = "OK" if emb_create < 3.0 else "BELOW GOAL (3 s)"
    print(f"  embedded store                     {emb_create:>8.3f} s  {verdict}")
    label = f"its {n * parts * 3:,} log dirs alone"
    print(f"  {label:<34} {fs_floor:>8.3f} s  (the same files, bare os calls: part of it)")
    if args.zookeeper:
        zk_runs: list[float] = []
        floors: list[float] = []
        for _ in range(2):  # interleaved, so that both see the same machine
            zk_runs.append(await create_topics_seconds(n, parts, 3, _chroot(args.zookeeper)))
            floor = await best_of(1, "floor", n, raw_aiozk_topic_writes(args.zookeeper, n, parts))
            floors.append(floor.seconds)
        zk_create, zk_floor = min(zk_runs), min(floors)
        ratio = zk_create / zk_floor
        verdict = "OK" if ratio <= 2.0 else "BELOW GOAL (2x)"
        print(f"  real ZooKeeper                     {zk_create:>8.3f} s")
        print(f"  raw aiozk, same znodes             {zk_floor:>8.3f} s")
        print(f"  ratio {ratio:.2f}x of the floor  {verdict}")


async def _row_events(args: argparse.Namespace) -> None:
    print("\n[6] controller event manager throughput (goal >= 20k events/s)")
    rate = max([await controller_events_per_second(args.ops) for _ in range(args.repeat)])
    print(f"  {rate:>11,.0f} events/s")


CAMPAIGN_GOAL = 20.0
"""Simulated seconds per wall second the deterministic campaign must reach."""


async def _row_campaign(args: argparse.Namespace) -> bool:
    """Row [7]: the deterministic chaos campaign's simulated-to-wall time ratio."""
    from cluster.bench.chaos import CampaignResult

    seeds = args.campaign_seeds
    print(
        f"\n[7] chaos campaign, deterministic: every {args.campaign_scenarios}/*.yaml"
        f" x {seeds} seeds"
        f" (here; the full campaign runs 50): simulated / wall time"
        f" (goal >= {CAMPAIGN_GOAL:g}:1)"
    )
    command = ["-m", "cluster.bench.chaos", "--seeds", str(seeds)]
    command += ["--scenarios", args.campaign_scenarios, *_quiet(args)]
    found = await _child(command, CampaignResult)
    if found is None:
        return False
    result, _ = found
    verdict = "OK" if result.ratio >= CAMPAIGN_GOAL else f"BELOW GOAL ({CAMPAIGN_GOAL:g}:1)"
    print(f"  simulated, summed over the runs    {result.simulated_seconds:>10,.1f} s")
    print(f"  wall, around each run_scenario     {result.wall_seconds:>10,.1f} s")
    print(f"  ratio {result.ratio:,.0f}:1  {verdict}")
    print(
        f"  {result.runs} runs ({result.scenarios} scenarios x {result.seeds} seeds):"
        f" {result.passed} passed"
    )
    for line in result.not_passed:
        print(f"    not passed: {line}")
    return True


SCALE_RSS_GOAL = 1024**3
"""The most resident memory the scale run may take (bytes)."""

SCALE_CREATE_GOAL_S = 10.0
"""The longest the scale run's CreateTopics may take until it is answered (seconds)."""


async def _row_scale(args: argparse.Namespace) -> bool:
    """Row [8]: 100 brokers and 100,000 partitions in one process (a child process)."""
    from cluster.bench.scale import ScaleResult

    brokers, topics, parts, rf = args.scale_brokers, args.scale_topics, 100, 3
    print(
        f"\n[8] {brokers} brokers in one process, {topics:,} topics x {parts} partitions"
        f" x RF {rf} ({topics * parts:,} partitions), embedded store"
        f" (goal: CreateTopics answered in < {SCALE_CREATE_GOAL_S:g} s,"
        f" peak RSS < {SCALE_RSS_GOAL / 1024**3:g} GB)"
    )
    command = ["-m", "cluster.bench.scale", "--brokers", str(brokers), "--topics", str(topics)]
    command += ["--partitions", str(parts), "--replication-factor", str(rf)]
    if args.no_uvloop:
        command.append("--no-uvloop")
    found = await _child([*command, *_quiet(args)], ScaleResult)
    if found is None:
        return False
    result, whole = found
    fs_floor = raw_log_dirs_seconds(result.partitions * rf, rf)
    rss = result.peak_rss_bytes
    verdict = "OK" if rss < SCALE_RSS_GOAL else "ABOVE GOAL"
    fast = "OK" if result.create_seconds < SCALE_CREATE_GOAL_S else "ABOVE GOAL"
    print(f"  launch, to a ready cluster         {result.launch_seconds:>8.3f} s")
    print(f"  create, until CreateTopics answers {result.create_seconds:>8.3f} s  {fast}")
    print(f"  the process's CPU time meanwhile   {result.create_cpu_seconds:>8.3f} s")
    print(
        f"  until every partition is online    {result.online_seconds:>8.3f} s"
        f"  ({result.online_partitions:,} with a live leader in another broker's Metadata)"
    )
    label = f"its {result.partitions * rf:,} log dirs alone"
    print(f"  {label:<34} {fs_floor:>8.3f} s  (the same files, bare os calls: part of it)")
    print(f"  {_scale_time_split(result.create_seconds, fs_floor)}")
    print(f"  the child process, with teardown   {whole:>8.3f} s")
    print(f"  peak RSS                           {rss / 1024**3:>8.2f} GB  {verdict}")
    return True


def _scale_time_split(answered: float, floor: float) -> str:
    """Row [8]'s answer split in two: the log dirs' bare system calls (measured apart, the
    floor no kemu change removes) and the rest, kemu's own work; then by how much the
    answer met or missed its goal, so that a miss says what it is made of."""
    split = f"answered in {answered:.3f} s, of which the floor {floor:.3f} s"
    if floor < answered:
        split += f" and kemu's own work {answered - floor:.3f} s"
    else:  # measured apart: on a busy machine the floor can take longer than the answer
        split += " (the floor measured apart took longer)"
    goal = SCALE_CREATE_GOAL_S
    if answered < goal:
        return f"{split}: within the {goal:g} s goal by {goal - answered:.3f} s"
    return f"{split}: the {goal:g} s goal missed by {answered - goal:.3f} s"


async def _child(command: list[str], kind: type[_T]) -> tuple[_T, float] | None:
    """Run ``python COMMAND`` in a child process (its stderr passes through), decode the
    JSON line it prints as ``kind``; with the child's wall time. None if it failed."""
    t0 = _now()
    status, stdout = await run_child(command)
    whole = _now() - t0
    if status != 0:
        print(f"  failed: python {' '.join(command)} exited with {status}")
        return None
    return msgspec.json.decode(stdout.splitlines()[-1], type=kind), whole


async def _row_analysis(args: argparse.Namespace) -> bool:
    """Row [9]: trace analysis and diff at scale, Spark vs pandas (``cluster.bench.analysis``)."""
    from pathlib import Path

    from cluster.bench.analysis import row_analysis

    return await row_analysis(
        args.analysis_events,
        Path(args.campaign_scenarios),
        args.spark_driver_memory,
        quiet=args.quiet,
    )


async def _row_data(args: argparse.Namespace) -> bool:
    """Row [10]: confluent-kafka's produce, latency and read against ``kemu up`` and the
    mock cluster (``cluster.bench.data``)."""
    from cluster.bench.data import MOCK_PARTITIONS, THROUGHPUT_GOAL, DataResult, report

    print(
        f"\n[10] data plane, confluent-kafka: kemu up (3 brokers, one process) vs librdkafka's"
        f" mock cluster (test.mock.num.brokers=3); {args.data_messages:,} x 100-byte values,"
        f" acks=all, linger.ms 5, RF 3, {MOCK_PARTITIONS} partitions"
        f" (goal: kemu >= {THROUGHPUT_GOAL:g}x the mock's produce MB/s)"
    )
    found = await _child(
        ["-m", "cluster.bench.data", "--messages", str(args.data_messages), *_quiet(args)],
        DataResult,
    )
    if found is None:
        return False
    report(found[0])
    return True


DELETION_GOAL = 3.0
"""Seconds (embedded store) until no topic znode is left and every log is renamed."""


async def _row_deletion(args: argparse.Namespace) -> bool:
    """Row [11]: bulk deletion next to the creation of the same topics, in one child
    process per store (``cluster.bench.deletion``)."""
    from cluster.bench.deletion import DeletionResult

    n, parts = args.topics, 10
    print(
        f"\n[11] delete {n} topics x {parts} partitions x RF 3 on 3 brokers with one"
        " DeleteTopics, next to their creation (log.segment.delete.delay.ms=0;"
        f" goal < {DELETION_GOAL:g} s embedded until no topic znode is left and every log is"
        " renamed, and no slower than the creation; ZooKeeper until no topic znode is left"
        " within 2x of the raw aiozk floor of the same deletes)"
    )
    stores: list[tuple[str, list[str]]] = [("embedded store", [])]
    if args.zookeeper:
        stores.append(("real ZooKeeper", ["--zookeeper", _chroot(args.zookeeper)]))
    for label, extra in stores:
        command = ["-m", "cluster.bench.deletion", "--topics", str(n), "--partitions", str(parts)]
        found = await _child([*command, *extra, *_quiet(args)], DeletionResult)
        if found is None:
            return False
        r = found[0]
        done = max(r.delete_znodes, r.delete_renamed)
        create = max(r.create_answered, r.create_logs)
        print(f"  {label}")
        print(f"    create, until CreateTopics answers {r.create_answered:>8.3f} s")
        print(f"    create, until every log dir exists {r.create_logs:>8.3f} s")
        print(f"    delete, until DeleteTopics answers {r.delete_answered:>8.3f} s")
        print(f"    delete, until no topic znode left  {r.delete_znodes:>8.3f} s")
        print(f"    delete, until every log renamed    {r.delete_renamed:>8.3f} s")
        print(f"    delete, until every log removed    {r.delete_removed:>8.3f} s")
        print(
            f"    process CPU: create {r.create_logs_cpu:.3f} s; delete until no znode"
            f" {r.delete_znodes_cpu:.3f} s, every log renamed {r.delete_renamed_cpu:.3f} s,"
            f" removed {r.delete_removed_cpu:.3f} s"
        )
        verdicts = []
        if r.store != "zookeeper" and done >= DELETION_GOAL:
            verdicts.append(f"BELOW GOAL ({DELETION_GOAL:g} s)")
        if done > create:
            verdicts.append("SLOWER THAN CREATION")
        print(f"    deletion / creation {done / create:.2f}x  {' '.join(verdicts) or 'OK'}")
        if r.store == "zookeeper" and args.zookeeper:
            floor = await raw_aiozk_topic_deletes(args.zookeeper, n, parts)
            ratio = r.delete_znodes / floor.seconds
            verdict = "OK" if ratio <= DELETION_ZK_GOAL else f"BELOW GOAL ({DELETION_ZK_GOAL:g}x)"
            print(f"    raw aiozk, the same znode deletes  {floor.seconds:>8.3f} s")
            print(f"    no topic znode left / floor {ratio:.2f}x  {verdict}")
            print(f"    {_deletion_zk_split(r, floor)}")
    return True


DELETION_ZK_GOAL = 2.0
"""Row [11] on ZooKeeper: no topic znode left within this many times the raw aiozk floor."""


def _deletion_zk_split(r: DeletionResult, floor: DeleteFloor, load: float | None = None) -> str:
    """Row [11]'s ZooKeeper result on one line, with what it is made of: by how much it met
    or missed the goal, then the CPU seconds each side spent meanwhile, kemu's process and
    the ZooKeeper server's, next to the floor's client and server (the machine's cores
    are shared by both sides: a server busier than the floor's, or a kemu process busier
    than its wall time allows, says where the time went). ``load``: the machine's load
    average (read now if not given)."""
    load = os.getloadavg()[0] if load is None else load
    goal = DELETION_ZK_GOAL * floor.seconds
    margin = abs(goal - r.delete_znodes)
    if r.delete_znodes <= goal:
        head = f"within the {DELETION_ZK_GOAL:g}x goal ({goal:.3f} s) by {margin:.3f} s"
    else:
        head = f"the {DELETION_ZK_GOAL:g}x goal ({goal:.3f} s) missed by {margin:.3f} s"

    def server(cpu: float | None) -> str:
        return "not readable" if cpu is None else f"{cpu:.2f} s"

    return (
        f"{head}: over the {r.delete_znodes:.2f} s kemu's process spent"
        f" {r.delete_znodes_cpu:.2f} s of CPU and the ZooKeeper server"
        f" {server(r.delete_znodes_server_cpu)}; over the floor's {floor.seconds:.2f} s its"
        f" client {floor.client_cpu:.2f} s and the server {server(floor.server_cpu)}"
        f" (load average {load:.1f} on {os.cpu_count()} CPUs)"
    )


SCALING_GOAL = 1.7
"""Runs per second on two Spark executors over one (row [12])."""


async def _row_spark_campaign(args: argparse.Namespace) -> bool:
    """Row [12]: the same campaign on one and two Spark executors, next to the process
    fan-out of ``scripts/chaos.sh --jobs`` (``cluster.bench.spark_campaign``)."""
    from cluster.bench.spark_campaign import SparkCampaignResult

    seeds = args.spark_campaign_seeds
    print(
        f"\n[12] chaos campaign as a Spark job: every {args.campaign_scenarios}/*.yaml x {seeds}"
        " seeds on a standalone master with two 1-core workers (loopback), 1 executor vs 2,"
        f" next to kemu chaos run processes, 1 vs 2 (goal: 2 executors >= {SCALING_GOAL:g}x 1)"
    )
    command = ["-m", "cluster.bench.spark_campaign", "--seeds", str(seeds)]
    found = await _child([*command, "--scenarios", args.campaign_scenarios], SparkCampaignResult)
    if found is None:
        return False
    result = found[0]
    for way in result.ways:
        print(
            f"  {way.name:<12} {way.runs:>5} runs ({way.passed} passed) in"
            f" {way.wall_seconds:>8.1f} s  {way.rate:>7.2f} runs/s"
        )
    processes = result.way("processes-2").rate / max(result.way("processes-1").rate, 1e-9)
    verdict = "OK" if result.ratio >= SCALING_GOAL else f"BELOW GOAL ({SCALING_GOAL:g}x)"
    print(f"  processes: 2 / 1 {processes:.2f}x")
    print(f"  spark: 2 executors / 1 {result.ratio:.2f}x  {verdict}")
    return True


SHUTDOWN_GOAL = 3.0
"""Seconds until a controlled shutdown moved the leaderships of a broker leading 10,000
partitions (row [13])."""

FAILOVER_GOAL = 5.0
"""Seconds from a crashed controller's session expiry until every partition is led again
(row [13])."""


async def _row_failover(args: argparse.Namespace) -> bool:
    """Row [13]: a controlled shutdown and a controller failover on 10 brokers holding
    100,000 partitions, in a child process (``cluster.bench.failover``)."""
    from cluster.bench.failover import FailoverResult

    brokers, topics, parts = 10, args.failover_topics, 100
    print(
        f"\n[13] {brokers} brokers, {topics:,} topics x {parts} partitions x RF 3"
        f" ({topics * parts:,} partitions), embedded store, zookeeper.session.timeout.ms=500:"
        f" controlled shutdown of a broker (goal < {SHUTDOWN_GOAL:g} s), then the controller"
        f" crashed (goal < {FAILOVER_GOAL:g} s from its session's expiry to every partition"
        " led again)"
    )
    command = ["-m", "cluster.bench.failover", "--brokers", str(brokers)]
    command += ["--topics", str(topics), "--partitions", str(parts)]
    if args.no_uvloop:
        command.append("--no-uvloop")
    found = await _child([*command, *_quiet(args)], FailoverResult)
    if found is None:
        return False
    r = found[0]
    moved = "OK" if r.shutdown_moved < SHUTDOWN_GOAL else f"BELOW GOAL ({SHUTDOWN_GOAL:g} s)"
    online = "OK" if r.failover_online < FAILOVER_GOAL else f"BELOW GOAL ({FAILOVER_GOAL:g} s)"
    print(f"  create, until every partition led  {r.create_seconds:>8.3f} s")
    print(f"  controlled shutdown of a broker leading {r.shutdown_leaders:,} partitions:")
    print(f"    until its leaderships were moved   {r.shutdown_moved:>8.3f} s  {moved}")
    print(f"    until it had stopped               {r.shutdown_stopped:>8.3f} s")
    print(
        f"    CPU until then (full GCs)          {r.shutdown_cpu:>8.3f} s  ({r.shutdown_gc:.3f} s)"
    )
    print(f"  the controller crashed, leading {r.failover_leaders:,} partitions:")
    print(f"    from the crash to its expiry       {r.session_expiry:>8.3f} s")
    print(f"    expiry to a new controller         {r.failover_elected:>8.3f} s")
    print(f"    expiry to brokers knowing it       {r.failover_known:>8.3f} s")
    print(f"    expiry to every partition led      {r.failover_online:>8.3f} s  {online}")
    print(
        f"    CPU until then (full GCs)          {r.failover_cpu:>8.3f} s  ({r.failover_gc:.3f} s)"
    )
    print(f"  peak RSS                             {r.peak_rss_bytes / 1024**2:>8.0f} MB")
    return True


ROWS: dict[int, Callable[[argparse.Namespace], Awaitable[bool | None]]] = {
    1: _row_inprocess,
    2: _row_tcp,
    3: _row_store,
    4: _row_ready,
    5: _creation_rows,
    6: _row_events,
    7: _row_campaign,
    8: _row_scale,
    9: _row_analysis,
    10: _row_data,
    11: _row_deletion,
    12: _row_spark_campaign,
    13: _row_failover,
}
"""The rows, by number; each prints itself (a goal missed included), and returns False
only if it could not measure (the exit status is then 1)."""


def _quiet(args: argparse.Namespace) -> list[str]:
    """What tells a child row to draw no progress (it draws on a terminal stderr only)."""
    return ["--quiet"] if args.quiet else []


def _chroot(hosts: str) -> str:
    return f"{hosts}/kemu-bench-{uuid.uuid4().hex}"


def _rows(text: str) -> list[int]:
    try:
        rows = [int(part) for part in text.split(",")]
    except ValueError:
        rows = []
    if not rows or any(row not in ROWS for row in rows):
        raise argparse.ArgumentTypeError(f"rows are numbers 1 to {len(ROWS)}, e.g. 5,8")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kemu-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000, help="asks per ping-pong run")
    parser.add_argument("--store-ops", type=int, default=20_000, help="create+get per store run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--zookeeper", metavar="HOST:PORT", help="a local ZooKeeper to compare")
    parser.add_argument("--topics", type=int, default=1000, help="topics in the creation bench")
    parser.add_argument(
        "--campaign-seeds", type=int, default=5, help="seeds per scenario in the campaign row"
    )
    parser.add_argument(
        "--spark-campaign-seeds",
        type=int,
        default=2,
        help="seeds per scenario in the Spark campaign row [12]",
    )
    parser.add_argument(
        "--campaign-scenarios", metavar="DIR", default="scenarios", help="the campaign's scenarios"
    )
    parser.add_argument("--scale-brokers", type=int, default=100, help="brokers in the scale row")
    parser.add_argument(
        "--scale-topics", type=int, default=1000, help="topics (of 100 partitions) in the scale row"
    )
    parser.add_argument(
        "--analysis-events",
        type=int,
        default=10_000_000,
        help="events in each trace of the analysis row",
    )
    parser.add_argument(
        "--spark-driver-memory", default="768m", help="spark.driver.memory in the analysis row"
    )
    parser.add_argument(
        "--data-messages", type=int, default=200_000, help="messages produced in the data row"
    )
    parser.add_argument(
        "--failover-topics",
        type=int,
        default=1000,
        help="topics (of 100 partitions) in the failover row [13]",
    )
    parser.add_argument(
        "--only", type=_rows, default=list(ROWS), metavar="ROWS", help="only these rows, e.g. 5,8"
    )
    parser.add_argument(
        "--creation-only", action="store_true", help="run only the topic creation rows ([5])"
    )
    parser.add_argument("--no-uvloop", action="store_true", help="measure on asyncio's own loop")
    parser.add_argument(
        "--quiet", action="store_true", help="no progress of the long rows on stderr"
    )
    args = parser.parse_args(argv)
    if args.creation_only:
        args.only = [5]
    counts = (
        args.campaign_seeds,
        args.spark_campaign_seeds,
        args.scale_brokers,
        args.scale_topics,
        args.analysis_events,
    )
    if min(*counts, args.data_messages, args.failover_topics) < 1:
        parser.error(
            "--campaign-seeds, --spark-campaign-seeds, --scale-brokers, --scale-topics,"
            " --analysis-events, --data-messages and --failover-topics must be >= 1"
        )
    if args.scale_brokers < 3:
        parser.error("--scale-brokers must be >= 3 (the scale row's replication factor)")
    return anyio.run(
        main_async, args, backend="asyncio", backend_options={"use_uvloop": not args.no_uvloop}
    )


if __name__ == "__main__":
    exit_with(main)
