"""The benchmark rows that run in child processes: the deterministic chaos campaign
(``cluster.bench.chaos``) and the large in-process cluster (``cluster.bench.scale``), on
their own and as rows [7] and [8] of ``python -m cluster.bench``."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from actors.runtime.clock import Clock, VirtualClock, run_virtual
from cluster.bench import analysis as analysis_row
from cluster.bench import chaos as bench_chaos
from cluster.bench import suite as bench
from cluster.bench.analysis_engine import AnalysisTimes
from cluster.bench.chaos import run_campaign, scenario_files
from cluster.bench.deletion import DeletionResult, local_server_cpu
from cluster.bench.failover import run_failover, wait_controller_created
from cluster.bench.jvm_cpu import CPU_KINDS, listener_pid, process_cpu_seconds
from cluster.bench.scale import run_scale, wait_controller
from cluster.launch.cluster import ClusterError
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from tests.support.bench_scenarios import FAILING, PASSING, write_scenario
from tests.support.zookeeper import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]


def test_analysis_row_says_where_the_time_went_when_it_misses_the_goal() -> None:
    """Row [9]'s line for a miss: the CPU the Spark session used by its biggest kinds
    against what the cores give in the goal's 90 s, its longest steps, the load."""
    times = AnalysisTimes(
        engine="spark",
        session_seconds=9.9,
        analyze_seconds=70.2,
        diff_seconds=31.0,
        events=20,
        violations=0,
        divergent_topics=7,
        cpu={"JIT compiler": 35.0, "GC + VM thread": 12.0, "tasks": 120.4, "other JVM": 20.0},
        steps={
            "analyze: invariant checks and topic lifecycles": 30.2,
            "analyze: reading traces": 3.0,
            "analyze: latencies, message counts, queue times, errors": 36.9,
            "diff: normalised sequences": 30.6,
            "diff: x": 0.1,
        },
    )
    assert analysis_row._why_slow(times, 101.2, 2, 6.04) == (
        "  why: 101 s of wall time; the session used 187 CPU-s (tasks 120, JIT compiler 35,"
        " other JVM 20) of the 180 that 2 cores give in 90 s; longest steps:"
        " analyze: latencies, message counts, queue times, errors 37 s,"
        " diff: normalised sequences 31 s, analyze: invariant checks and topic lifecycles"
        " 30 s, analyze: reading traces 3 s; load average 6.0"
    )


def test_scale_run_counts_every_partition_online_and_removes_its_log_dirs(tmp_path: Path) -> None:
    """A small scale run creates every partition, sees each one led by a live broker in
    another broker's Metadata, reports its peak RSS, and leaves no log directory behind."""
    result = anyio.run(
        lambda: run_scale(4, 5, 6, 3, root=str(tmp_path)),
        backend="asyncio",
    )
    assert (result.brokers, result.topics, result.partitions) == (4, 5, 30)
    assert result.online_partitions == 30
    assert 0 < result.create_seconds <= result.online_seconds
    assert result.create_cpu_seconds > 0  # the process's own CPU time, not the machine's
    assert result.launch_seconds > 0
    assert result.peak_rss_bytes > 10 * 1024**2  # an interpreter with kemu loaded, in bytes
    assert list(tmp_path.iterdir()) == []


def test_scale_row_splits_the_answer_into_the_floor_and_the_rest_and_says_the_miss() -> None:
    """Row [8]'s split line: the answer, the log dirs' floor in it, kemu's own work (the
    rest) and by how much the 10 s goal was missed or met."""
    split = bench._scale_time_split  # the line row [8] prints
    assert split(14.603, 6.969) == (
        "answered in 14.603 s, of which the floor 6.969 s and kemu's own work 7.634 s:"
        " the 10 s goal missed by 4.603 s"
    )
    assert split(4.5, 2.0) == (
        "answered in 4.500 s, of which the floor 2.000 s and kemu's own work 2.500 s:"
        " within the 10 s goal by 5.500 s"
    )
    assert split(12.0, 13.0) == (
        "answered in 12.000 s, of which the floor 13.000 s (the floor measured apart took"
        " longer): the 10 s goal missed by 2.000 s"
    )


def _deletion(znodes: float, cpu: float, server_cpu: float | None) -> DeletionResult:
    return DeletionResult(
        topics=1000,
        partitions=10000,
        replication_factor=3,
        store="zookeeper",
        create_answered=3.0,
        create_logs=3.1,
        delete_answered=0.9,
        delete_znodes=znodes,
        delete_renamed=znodes - 0.5,
        delete_removed=znodes + 0.6,
        create_logs_cpu=2.2,
        delete_znodes_cpu=cpu,
        delete_renamed_cpu=cpu - 0.4,
        delete_removed_cpu=cpu + 0.6,
        delete_znodes_server_cpu=server_cpu,
    )


def test_deletion_row_says_by_how_much_and_where_the_cpu_went_on_zookeeper() -> None:
    """Row [11]'s ZooKeeper line: the 2x goal met or missed and by how much, then the CPU
    seconds of kemu's process and of the server over the deletion, next to the floor's
    client and server; a server whose CPU could not be read is said so."""
    split = bench._deletion_zk_split  # the line row [11] prints under its ratio
    floor = bench.DeleteFloor(seconds=1.811, client_cpu=1.1, server_cpu=1.3)
    cpus = os.cpu_count()
    assert split(_deletion(3.980, 3.404, 2.61), floor, load=0.9) == (
        "the 2x goal (3.622 s) missed by 0.358 s: over the 3.98 s kemu's process spent"
        " 3.40 s of CPU and the ZooKeeper server 2.61 s; over the floor's 1.81 s its client"
        f" 1.10 s and the server 1.30 s (load average 0.9 on {cpus} CPUs)"
    )
    unread = bench.DeleteFloor(seconds=2.054, client_cpu=1.2, server_cpu=None)
    assert split(_deletion(3.575, 3.106, None), unread, load=12.25) == (
        "within the 2x goal (4.108 s) by 0.533 s: over the 3.58 s kemu's process spent"
        " 3.11 s of CPU and the ZooKeeper server not readable; over the floor's 2.05 s its"
        f" client 1.20 s and the server not readable (load average 12.2 on {cpus} CPUs)"
    )


def test_a_local_listener_is_found_by_its_port_and_its_cpu_read() -> None:
    """``listener_pid`` finds the process listening on a port of this machine (here this
    one), and none once the port is closed; ``process_cpu_seconds`` reads a live
    process's CPU time."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert listener_pid(port) == os.getpid()
    assert listener_pid(port) is None
    spent = process_cpu_seconds(os.getpid())
    assert spent is not None
    assert spent > 0


_FORK_A_WORKER = """
import os, signal, sys, time
from spark.worker_daemon import reap_ignored_children
if sys.argv[1] == "reap":
    reap_ignored_children()
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # what pyspark.daemon.manager does
pid = os.fork()
if pid == 0:
    spent = time.process_time() + 0.3
    while time.process_time() < spent:
        pass
    os._exit(0)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        break  # exited and reaped (by the kernel, or by the handler)
    time.sleep(0.01)
else:
    sys.exit("the child was never reaped")
times = os.times()
print(times.children_user + times.children_system)
"""


@pytest.mark.processes
@pytest.mark.parametrize(("mode", "counted"), [("reap", True), ("ignore", False)])
def test_the_bench_daemon_keeps_the_cpu_of_the_workers_it_forked(mode: str, counted: bool) -> None:
    """pyspark's daemon ignores ``SIGCHLD``, so a worker that exits is reaped by the kernel
    and its CPU is lost; with ``spark.worker_daemon`` the same request reaps it by
    ``waitpid`` and its 0.3 s of CPU count in the daemon's children times."""
    result = subprocess.run(
        [sys.executable, "-c", _FORK_A_WORKER, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    children = float(result.stdout)
    if counted:
        assert children >= 0.25
    else:
        assert children == 0.0


def test_deletion_reads_the_cpu_of_its_local_zookeeper_server(
    zookeeper_server: ZooKeeperServer,
) -> None:
    """Row [11] reads the CPU time of the ZooKeeper server it runs against when the server
    is a process of this machine (its first host on loopback, a chroot or not), and reads
    none for a server elsewhere."""
    read = local_server_cpu(zookeeper_server.hosts + "/kemu-bench")
    first = read()
    assert first is not None
    assert first > 0
    later = read()
    assert later is not None
    assert later >= first
    assert local_server_cpu("zk.example.invalid:2181")() is None


@pytest.mark.slow  # six brokers, a shutdown and a failover
def test_failover_run_times_a_controlled_shutdown_and_a_controller_failover(
    tmp_path: Path,
) -> None:
    """A small failover run: the stopped broker led its preferred share of the partitions,
    its controlled shutdown moved them, and after the controller's crash every partition is
    led again by a live broker in another broker's Metadata, each time after the one
    before; no log directory is left behind."""
    result = anyio.run(
        lambda: run_failover(6, 4, 6, 3, root=str(tmp_path)),
        backend="asyncio",
    )
    assert (result.brokers, result.partitions, result.session_timeout_ms) == (6, 24, 500)
    assert result.shutdown_leaders == 4  # one preferred leadership per topic and broker
    assert result.failover_leaders >= 4
    assert 0 < result.shutdown_moved <= result.shutdown_stopped
    assert result.session_expiry >= 0.5  # the session timeout passes first
    assert 0 <= result.failover_elected <= result.failover_known <= result.failover_online
    assert result.shutdown_cpu > 0
    assert result.failover_cpu > 0
    assert 0 <= result.shutdown_gc <= result.shutdown_cpu
    assert 0 <= result.failover_gc <= result.failover_cpu
    assert result.peak_rss_bytes > 10 * 1024**2
    assert list(tmp_path.iterdir()) == []


def test_campaign_sums_every_seed_of_every_scenario_and_names_the_runs_that_fail(
    tmp_path: Path,
) -> None:
    """The campaign runs each scenario with each seed, sums their simulated and wall
    seconds, lists the runs that did not pass, and removes their run directories."""
    scenarios = tmp_path / "scenarios"
    files = [
        write_scenario(scenarios, "a-passing.yaml", PASSING),
        write_scenario(scenarios, "b-failing.yaml", FAILING),
    ]
    runs = tmp_path / "runs"
    runs.mkdir()
    result = run_campaign(files, 2, root=str(runs))
    assert (result.scenarios, result.seeds, result.runs, result.passed) == (2, 2, 4, 2)
    assert result.not_passed == ("bench-failing seed=1: failed", "bench-failing seed=2: failed")
    # Two passing runs sleep 120 s of virtual time each; the failing ones wait 2 s.
    assert result.simulated_seconds >= 2 * 120 + 2 * 2
    assert result.wall_seconds > 0
    assert result.ratio == pytest.approx(result.simulated_seconds / result.wall_seconds)
    assert list(runs.iterdir()) == []


def test_campaign_takes_the_files_of_the_directory_not_of_its_subfolders(tmp_path: Path) -> None:
    """Only ``*.yaml`` directly in the scenarios directory are in the campaign."""
    top = write_scenario(tmp_path, "b.yaml", PASSING)
    first = write_scenario(tmp_path, "a.yaml", PASSING)
    write_scenario(tmp_path / "real", "c.yaml", PASSING)
    write_scenario(tmp_path, "notes.txt", "not a scenario")
    assert scenario_files(tmp_path) == [first, top]


def test_campaign_refuses_an_empty_directory_or_no_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input to the campaign child is one error line and exit status 2."""
    assert bench_chaos.main(["--scenarios", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"Error: no scenario files (*.yaml) in {tmp_path}\n"
    with pytest.raises(SystemExit) as exit_:
        bench_chaos.main(["--seeds", "0"])
    assert exit_.value.code == 2


def test_bench_refuses_an_unknown_row() -> None:
    """``--only`` names rows 1 to 13; anything else is a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--only", "5,14"])
    assert exit_.value.code == 2


def _bench(args: list[str], *, timeout: float) -> str:
    """``python -m cluster.bench ARGS``: its standard output, once it exited with 0."""
    done = subprocess.run(
        [sys.executable, "-m", "cluster.bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timing  # the campaign's ratio and the scale run's CreateTopics against their goals
def test_bench_rows_7_and_8_print_the_campaign_ratio_and_the_scale_run(tmp_path: Path) -> None:
    """``python -m cluster.bench --only 7,8`` runs both rows in child processes and prints
    the campaign's ratio against its goal and the scale run's times and peak RSS."""
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios, "a-passing.yaml", PASSING)
    out = _bench(
        [
            "--only",
            "7,8",
            "--campaign-seeds",
            "1",
            "--campaign-scenarios",
            str(scenarios),
            "--scale-brokers",
            "3",
            "--scale-topics",
            "2",
        ],
        timeout=50,
    )
    assert f"[7] chaos campaign, deterministic: every {scenarios}/*.yaml x 1 seeds" in out
    assert "1 runs (1 scenarios x 1 seeds): 1 passed" in out
    ratio_line = next(line for line in out.splitlines() if line.startswith("  ratio "))
    assert ratio_line.endswith("OK")
    assert "[8] 3 brokers in one process, 2 topics x 100 partitions x RF 3 (200 partitions)" in out
    assert "(200 with a live leader in another broker's Metadata)" in out
    assert "its 600 log dirs alone" in out
    create_line = next(line for line in out.splitlines() if "until CreateTopics answers" in line)
    assert create_line.endswith("s  OK")  # 200 partitions: well inside the 10 s goal
    split = next(line for line in out.splitlines() if line.startswith("  answered in "))
    assert ", of which the floor " in split
    assert "s goal by " in split  # within the goal, by how much
    assert "  the process's CPU time meanwhile " in out
    rss_line = next(line for line in out.splitlines() if line.startswith("  peak RSS"))
    assert rss_line.endswith("GB  OK")


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.processes
@pytest.mark.timeout(300)
def test_bench_row_9_times_spark_and_pandas_on_the_same_pair() -> None:
    """``--only 9`` makes a pair of long traces from real chaos runs, then times the
    analysis and the diff with pandas and with Spark, each in its own process tree, and
    both find the same things (here on 20,000-event traces: a smoke run, not a measure); the
    Spark diff made again with the analyses forgotten finds the same document."""
    out = _bench(
        [
            "--only",
            "9",
            "--analysis-events",
            "20000",
            "--campaign-scenarios",
            str(ROOT / "scenarios"),
        ],
        timeout=280,
    )
    assert "[9] trace analysis: analyze + diff of a pair of 20,000-event traces" in out
    assert "inputs: 2 Parquet traces" in out
    times = next(line for line in out.splitlines() if line.startswith("  analyze + diff"))
    pandas_seconds, spark_seconds = (float(x.rstrip("s")) for x in times.split()[3:5])
    assert pandas_seconds > 0
    assert spark_seconds > 0
    memory = next(line for line in out.splitlines() if "peak memory" in line)
    assert all(float(x.rstrip("GB")) > 0.05 for x in memory.split()[-2:])
    found = next(line for line in out.splitlines() if line.startswith("  both found:"))
    assert ", 0 violations," in found
    assert "(pandas:" not in found  # the two engines agree
    cpu = next(line for line in out.splitlines() if line.startswith("  Spark's CPU seconds"))
    spent = dict(part.rsplit(" ", 1) for part in cpu.split(": ", 1)[1].split(", "))
    assert set(spent) == set(CPU_KINDS)
    assert float(spent["tasks"]) > 0  # Spark's task threads were found and read
    assert float(spent["JIT compiler"]) > 0
    assert float(spent["Python workers"]) > 0
    alone = next(line for line in out.splitlines() if "diff alone, as kemu trace diff" in line)
    assert float(alone.split()[6].rstrip("s")) > 0  # made again, and the same document


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.processes
@pytest.mark.timeout(900)
def test_bench_row_12_runs_one_campaign_four_ways_and_prints_the_scaling_ratio(
    tmp_path: Path,
) -> None:
    """``--only 12`` runs the same campaign with ``kemu chaos run`` in one process and in
    two, then as a Spark job on a standalone master with two one-core workers, on one
    executor and on two, and prints each way's rate and the ratios (here one scenario x
    two seeds: a smoke run, not a measure)."""
    scenarios = tmp_path / "scenarios"
    write_scenario(scenarios, "a-passing.yaml", PASSING)
    out = _bench(
        ["--only", "12", "--spark-campaign-seeds", "2", "--campaign-scenarios", str(scenarios)],
        timeout=880,
    )
    assert f"[12] chaos campaign as a Spark job: every {scenarios}/*.yaml x 2 seeds" in out
    for way in ("processes-1", "processes-2", "spark-1", "spark-2"):
        line = next(line for line in out.splitlines() if line.startswith(f"  {way} "))
        assert "2 runs (2 passed)" in line, line
        assert float(line.split()[-2]) > 0
    assert re.search(r"^  processes: 2 / 1 \d+\.\d\dx$", out, re.M)
    assert re.search(r"^  spark: 2 executors / 1 \d+\.\d\dx  (OK|BELOW GOAL \(1.7x\))$", out, re.M)


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timeout(300)
def test_bench_row_10_measures_kemu_and_the_mock_cluster_side_by_side() -> None:
    """``--only 10`` produces, times single messages end to end and reads from the start
    with confluent-kafka, against a ``kemu up`` child and librdkafka's mock cluster, and
    prints both and the produce ratio (here on 5,000 messages: a smoke run, not a
    measure)."""
    out = _bench(["--only", "10", "--data-messages", "5000"], timeout=280)
    assert "[10] data plane, confluent-kafka" in out
    lines = {line.split()[0]: line for line in out.splitlines() if "produce" in line[:20]}
    for side in ("kemu", "mock"):
        numbers = [float(x.replace(",", "")) for x in re.findall(r"[\d,]+\.?\d*", lines[side])]
        assert all(n > 0 for n in numbers), lines[side]
    assert re.search(r"produce MB/s, kemu / mock: \d+\.\d\dx", out)


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timing  # the shutdown's and the failover's times against their goals
def test_bench_row_13_prints_the_shutdown_and_the_failover_next_to_their_goals() -> None:
    """``--only 13`` runs the failover row in a child process: ten brokers, a controlled
    shutdown and a controller failover, each time printed with its verdict."""
    out = _bench(["--only", "13", "--failover-topics", "1"], timeout=120)
    assert "[13] 10 brokers, 1 topics x 100 partitions x RF 3 (100 partitions)" in out
    assert "controlled shutdown of a broker leading 10 partitions:" in out
    timed = (re.match(r"^\s+(.+?)\s+(\d+\.\d{3}) s(.*)$", line) for line in out.splitlines())
    verdicts = {m[1]: m[3].strip() for m in timed if m is not None}
    assert verdicts["until its leaderships were moved"] == "OK", out
    assert verdicts["expiry to every partition led"] == "OK", out
    for label in ("from the crash to its expiry", "expiry to a new controller"):
        assert verdicts[label] == "", out


@pytest.mark.parametrize("elected_first", [True, False])
def test_failover_sees_the_new_controller_created_before_its_watch_was_set(
    elected_first: bool,
) -> None:
    """After the crashed controller's session expired, a surviving broker may create
    ``/controller`` before the bench sets its ``exists`` watch: the bench must see the
    znode there rather than wait for a watch that fires only at the next election. When
    the znode comes after the watch was set, the watch wakes it."""

    async def body() -> tuple[bool, bool]:
        store = EmbeddedStore()
        bench_session = await store.open_session(name="bench")
        broker = await store.open_session(name="broker")
        seen = anyio.Event()

        async def elect() -> None:
            await broker.create(zkdata.CONTROLLER_PATH, b"{}", ephemeral=True)

        async def wait() -> None:
            await wait_controller_created(bench_session)
            seen.set()

        with anyio.fail_after(60):  # virtual seconds: only a lost wake-up reaches it
            async with anyio.create_task_group() as tg:
                if elected_first:
                    await elect()
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                waited = not seen.is_set()
                if not elected_first:
                    await elect()
        await store.aclose()
        return waited, seen.is_set()

    waited, seen = run_virtual(body)
    assert seen
    assert waited is not elected_first  # no wait for a znode already there


class _NamingCluster:
    """A cluster whose brokers answer the status asks with ``answers`` in turn (-1: they
    name no controller), then with the last one for ever."""

    def __init__(self, answers: list[int]) -> None:
        self.nodes = {0: object(), 1: object(), 2: object()}
        self.clock: Clock = VirtualClock()
        self.answers = answers
        self.asked = 0

    async def controller_id(self) -> int:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


def test_benches_wait_for_a_named_controller_instead_of_using_minus_one() -> None:
    """While the brokers name no controller (-1, as ``Cluster.controller_id`` answers when
    every status ask timed out on a busy machine) or one that is not among the cluster's
    brokers, the benches ask again; they go on with the first broker named."""
    cluster = _NamingCluster([-1, -1, 7, 2])
    assert run_virtual(lambda: wait_controller(cluster)) == 2
    assert cluster.asked == 4


def test_benches_fail_clearly_when_no_controller_is_named_in_time() -> None:
    """When no broker names a controller within the deadline, the bench fails with one
    ``ClusterError`` that says so and what was last answered, not a KeyError on broker -1."""
    cluster = _NamingCluster([-1])
    with pytest.raises(ClusterError, match=r"no broker named a controller .* within 30 s .*-1"):
        run_virtual(lambda: wait_controller(cluster, timeout=30.0))
    assert cluster.asked > 100  # asked again and again until the (virtual) deadline
