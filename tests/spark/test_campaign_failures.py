"""``kemu chaos campaign`` when things fail: a task attempt that dies midway (its Python
worker killed) is retried and each run is written once; a run whose own process is
killed is that run's error, not the campaign's end; what is in ``--out`` after the job
failed; bad input (an unreachable master, an ``--out`` that cannot be written or is
a URL of a file system runs are not written through) is one line, changing nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from cluster.chaos.campaign import CAMPAIGN_FILE
from cluster.chaos.runner import RUN_FILES, RunResult
from cluster.chaos.spark_campaign import LOCK_PREFIX, LOCK_SUFFIX, campaign_lock
from cluster.cli.main import main
from cluster.launch.spark_standalone import CONF_DIR
from tests.support.traces import assert_same_trace

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FILES = [str(ROOT / "scenarios" / f"{n}.yaml") for n in ("create-delete-all-up", "delete-disabled")]
SEED_DIRS = {f"{n}/seed-{s}" for n in ("create-delete-all-up", "delete-disabled") for s in (1, 2)}
DEADLINE = 600.0


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(CONF_DIR),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
    }


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    found = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in found and pid not in found:
                found.add(pid)
                grew = True
    return found - {root}


def _writer(pids: set[int], staging: Path) -> int | None:
    """The process that has a file of ``staging`` open (the run's trace): the run's own
    process, which the Python worker forked for it."""
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        if any(link.startswith(f"{staging}/") for link in links):
            return pid
    return None


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _gone(pid: int) -> bool:
    """``pid`` has exited (gone, or a zombie no one has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def _stop_midway(
    campaign: subprocess.Popen[str], out: Path, *, worker: bool
) -> tuple[Path, int, int]:
    """SIGSTOP the first run of ``campaign`` seen being written midway: its Python worker
    (``worker``) or the run's own process, stopped only while its staging directory is
    still there (the run is midway); the staging directory, the stopped process and the
    run's process."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and campaign.poll() is None:
        for staging in out.glob("*/.seed-*.partial"):
            pid = _writer(_descendants(campaign.pid), staging)
            if pid is None:  # not this campaign's, or not being written
                continue
            try:
                victim = _parent(pid) if worker else pid
            except OSError:  # the run ended meanwhile
                continue
            os.kill(victim, signal.SIGSTOP)
            if staging.is_dir():
                return staging, victim, pid
            os.kill(victim, signal.SIGCONT)
        time.sleep(0.02)  # between two looks at the output directory
    pytest.fail("no run was seen being written")


def _kill_midway(
    campaign: subprocess.Popen[str], out: Path, *, worker: bool
) -> tuple[Path, int, int]:
    """SIGKILL the first run seen being written midway: its Python worker (``worker``)
    or the run's own process (``_stop_midway``); the run directory it was writing, the
    run's process and the kill's time (ns)."""
    staging, victim, pid = _stop_midway(campaign, out, worker=worker)
    os.kill(victim, signal.SIGKILL)
    seed = staging.name.split(".")[1]
    return staging.parent / seed, pid, time.time_ns()


def _kill_driver(campaign: subprocess.Popen[str]) -> None:
    """SIGKILL ``campaign``'s driver and everything it started, as if its host were gone."""
    session = _descendants(campaign.pid)  # the driver's JVM, the Python workers
    os.killpg(campaign.pid, signal.SIGKILL)
    campaign.communicate()
    for pid in session:  # any that left the process group
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _campaign_command(tmp_path: Path, out: Path, seeds: str, master: str) -> list[str]:
    """``kemu chaos campaign`` of ``FILES`` over ``seeds`` on ``master`` into ``out``."""
    return [str(BIN / "kemu"), "chaos", "campaign", *FILES, "--seeds", seeds,
            "--master", master, "--out", str(out), "--quiet",
            "--conf", f"spark.local.dir={tmp_path / 'scratch'}"]  # fmt: skip


@pytest.fixture
def start_campaign(tmp_path: Path) -> Iterator[Callable[[list[str]], subprocess.Popen[str]]]:
    """Starts a campaign command in a session of its own; whatever is left of it is
    killed, and its pipes closed, when the test ends."""
    started: list[subprocess.Popen[str]] = []

    def start(command: list[str]) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            command, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True,
        )  # fmt: skip
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_task_whose_python_worker_is_killed_is_retried_and_writes_each_run_once(
    tmp_path: Path, start_campaign: Callable[[list[str]], subprocess.Popen[str]]
) -> None:
    out = tmp_path / "campaign"
    # one core, a task tried twice
    campaign = start_campaign(_campaign_command(tmp_path, out, "1..2", "local[1,2]"))
    run_dir, run_process, killed_at = _kill_midway(campaign, out, worker=True)
    stdout, stderr = campaign.communicate(timeout=DEADLINE)
    assert _gone(run_process)  # the run's process died with its worker
    assert campaign.returncode == 0, stderr[-3000:]
    assert "2 scenario(s), 4 run(s): 4 passed, 0 failed" in stdout

    # Every run once, whole; nothing of the killed attempt left.
    runs = {str(p.parent.relative_to(out)) for p in out.glob("*/*/summary.json")}
    assert runs == SEED_DIRS
    assert sorted(p.name for p in out.glob("*/.*")) == []
    for run in SEED_DIRS:
        assert (out / run / "trace.parquet").is_file()
    # The killed run was written by the attempt Spark ran again, after the kill.
    assert (run_dir / "summary.json").stat().st_mtime_ns > killed_at
    local = tmp_path / "local"
    scenario = next(f for f in FILES if Path(f).stem == run_dir.parent.name)
    seed = run_dir.name.removeprefix("seed-")
    assert main(["chaos", "run", scenario, "--seed", seed, "--deterministic",
                 "--out", str(local), "--quiet"]) == 0  # fmt: skip
    here = local / run_dir.parent.name / run_dir.name / "trace.jsonl"
    assert_same_trace(run_dir / "trace.jsonl", here)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_run_whose_own_process_is_killed_fails_alone(
    tmp_path: Path, start_campaign: Callable[[list[str]], subprocess.Popen[str]]
) -> None:
    """What the kernel's OOM killer does to a run that takes too much memory: its process
    is SIGKILLed. That run is an error with the reason and the command that reproduces
    it; the task goes on with its other runs (in a new process: 8 runs in 4 tasks), and
    the campaign completes."""
    out = tmp_path / "campaign"
    # one try per task: the run must not fail the task
    campaign = start_campaign(_campaign_command(tmp_path, out, "1..4", "local[1]"))
    run_dir, _, _ = _kill_midway(campaign, out, worker=False)
    stdout, stderr = campaign.communicate(timeout=DEADLINE)
    assert campaign.returncode == 1, stderr[-3000:]
    assert "2 scenario(s), 8 run(s): 7 passed, 1 failed" in stdout
    scenario, seed = run_dir.parent.name, run_dir.name.removeprefix("seed-")
    source = next(f for f in FILES if Path(f).stem == scenario)
    failed = stdout[stdout.index("failed runs:") :].splitlines()
    assert failed[1].startswith(f"{scenario} seed={seed}: error")
    assert failed[2] == "  error: the run's process was killed by SIGKILL before it answered"
    assert (
        f"  reproduce: kemu chaos run {source} --seed {seed} --deterministic --out {out}" in failed
    )
    # The other runs are whole; nothing of the killed one is left.
    runs = {str(p.parent.relative_to(out)) for p in out.glob("*/*/summary.json")}
    every = {
        f"{n}/seed-{s}" for n in ("create-delete-all-up", "delete-disabled") for s in range(1, 5)
    }
    assert runs == every - {f"{scenario}/seed-{seed}"}
    assert all(_whole(out / run) for run in runs)
    assert sorted(p.name for p in out.glob("*/.*")) == []
    assert (out / CAMPAIGN_FILE).is_file()


def test_an_unreachable_master_is_one_line_within_the_connect_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "campaign"
    started = time.monotonic()
    status = main(["chaos", "campaign", FILES[0], "--seeds", "1..1", "--out", str(out),
                   "--master", "spark://127.0.0.1:1"])  # fmt: skip
    assert time.monotonic() - started < 10
    assert status == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "Error: cannot reach the Spark master at spark://127.0.0.1:1: nothing accepts connections"
    ]
    assert not out.exists()


@pytest.mark.parametrize("url", ["hdfs://namenode:8020/kemu/campaign", "s3a://bucket/campaign"])
def test_an_out_url_runs_are_not_written_through_is_refused(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    status = main(["chaos", "campaign", FILES[0], "--seeds", "1..1", "--out", url])
    scheme = url.split(":")[0]
    assert status == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"Error: --out {url}: runs are written with the operating system's file calls: give a"
        f" path every executor mounts at the same place (or a file: URL), not a {scheme}: URL"
    ]
    assert list(tmp_path.iterdir()) == []  # no local directory named after the URL


# Root (the tests' user) writes whatever a directory's mode says: without the
# capabilities that let it, it is held to the modes as any user is.
HELD_TO_MODES = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


def test_a_read_only_out_dir_is_one_line(tmp_path: Path) -> None:
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    done = subprocess.run(
        [*HELD_TO_MODES, str(BIN / "kemu"), "chaos", "campaign", FILES[0], "--seeds", "1..1",
         "--out", str(read_only / "campaign")],
        env=_env(tmp_path), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: --out {read_only / 'campaign'}: cannot write there: Permission denied"
    ]
    assert list(read_only.iterdir()) == []


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_read_only_scenario_dir_fails_the_job_in_one_line_and_writes_no_page(
    tmp_path: Path,
) -> None:
    """The driver can write ``--out``; the executor cannot write the scenario's directory
    in it: every try of the task fails, and so does the job."""
    out = tmp_path / "campaign"
    (out / "delete-disabled").mkdir(parents=True, mode=0o555)
    done = subprocess.run(
        [*HELD_TO_MODES, str(BIN / "kemu"), "chaos", "campaign", FILES[1], "--seeds", "1..1",
         "--master", "local[1,2]", "--out", str(out), "--quiet",
         "--conf", f"spark.local.dir={tmp_path / 'scratch'}"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=500, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1:] == [
        f"Error: a run could not be written: {socket.gethostname()} cannot write"
        f" {out / 'delete-disabled' / 'seed-1'}: Permission denied"
    ]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in out.iterdir()) == ["delete-disabled"]  # no campaign.html
    assert list((out / "delete-disabled").iterdir()) == []


def _whole(run: Path) -> bool:
    return all((run / name).is_file() for name in (*RUN_FILES, "trace.parquet"))


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_killed_driver_leaves_whole_runs_and_no_page_and_the_next_campaign_finishes(
    tmp_path: Path, start_campaign: Callable[[list[str]], subprocess.Popen[str]]
) -> None:
    """The whole job fails: the driver (and with it its local executor) is SIGKILLed
    while a run is being written. ``--out`` then holds whole runs only and no campaign
    page (an earlier campaign's is removed before the job starts); the next campaign
    into it replaces them, removes what the cut-off attempt left and writes the page."""
    out = tmp_path / "campaign"
    out.mkdir()
    (out / CAMPAIGN_FILE).write_text("an earlier campaign's page\n")
    command = _campaign_command(tmp_path, out, "1..2", "local[1]")
    campaign = start_campaign(command)
    deadline = time.monotonic() + DEADLINE
    while not list(out.glob("*/.seed-*.partial")):
        assert campaign.poll() is None, campaign.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no run was seen being written"
        time.sleep(0.02)  # between two looks at the output directory
    _kill_driver(campaign)

    assert not (out / CAMPAIGN_FILE).exists()
    runs = [p for p in out.glob("*/*") if not p.name.startswith(".")]
    assert all(_whole(run) for run in runs), runs
    assert len(runs) < len(SEED_DIRS)

    done = subprocess.run(
        command, env=_env(tmp_path), capture_output=True, text=True, timeout=DEADLINE,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 scenario(s), 4 run(s): 4 passed, 0 failed" in done.stdout
    assert {str(p.relative_to(out)) for p in out.glob("*/*")} == SEED_DIRS
    assert all(_whole(out / run) for run in SEED_DIRS)
    assert (out / CAMPAIGN_FILE).read_text().startswith("<!DOCTYPE html>")


# A campaign's driver as far as its lock goes: takes a campaign lock on argv[1], makes a
# staging directory of its token there, says the token and waits for its stdin to end.
HOLDER = """
import sys
from pathlib import Path
from cluster.chaos.spark_campaign import campaign_lock
out = Path(sys.argv[1])
with campaign_lock(out) as token:
    (out / "s" / f".seed-1.{token}.abcd1234.partial").mkdir(parents=True)
    print(token, flush=True)
    sys.stdin.read()
"""


def test_a_campaign_removes_its_own_and_gone_drivers_staging_and_keeps_a_live_ones(
    tmp_path: Path,
) -> None:
    out = tmp_path / "campaign"
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(out)],
            env=_env(tmp_path),
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    live, killed = holders
    try:
        tokens = [holder.stdout.readline().strip() for holder in holders if holder.stdout]
        killed.kill()
        killed.wait()
        # a run of a campaign that ended (its lock removed) but whose executor wrote on
        ended = out / "s" / ".seed-2.0123456789abcdef.efgh5678.replaced"
        ended.mkdir()
        with campaign_lock(out) as mine:
            (out / "s" / f".seed-3.{mine}.ijkl9012.partial").mkdir()
            assert len({*tokens, mine}) == 3
        assert sorted(p.name for p in out.iterdir()) == [
            f"{LOCK_PREFIX}{tokens[0]}{LOCK_SUFFIX}",
            "s",
        ]
        assert [p.name for p in (out / "s").iterdir()] == [f".seed-1.{tokens[0]}.abcd1234.partial"]
        assert live.communicate("", timeout=60)[0] == ""  # it ends: removes its own
        assert live.returncode == 0
        assert [p.name for p in out.iterdir()] == ["s"]
        assert list((out / "s").iterdir()) == []
    finally:
        for holder in holders:
            if holder.poll() is None:
                holder.kill()
            holder.communicate()


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_campaigns_into_one_out_at_once_remove_only_their_own_and_gone_drivers_staging(
    tmp_path: Path, start_campaign: Callable[[list[str]], subprocess.Popen[str]]
) -> None:
    """Three campaigns into one ``--out``, of the same scenarios, other seeds each. The
    first's driver is killed midway through a run (its staging directory stays); the
    second is held midway through a run (its runs' process stopped, its staging
    directory being written) while the third starts, runs and ends. The third removes
    the killed driver's staging directory and lock file, not the live second's; the
    second then goes on and completes. Each run is in ``--out`` once, whole, with its
    own summary; the page is the last finished campaign's."""
    out = tmp_path / "campaign"
    killed = start_campaign(_campaign_command(tmp_path, out, "3..3", "local[1]"))
    left, _, _ = _stop_midway(killed, out, worker=False)
    _kill_driver(killed)
    killed_lock = out / f"{LOCK_PREFIX}{left.name.split('.')[2]}{LOCK_SUFFIX}"
    assert killed_lock.is_file()

    held = start_campaign(_campaign_command(tmp_path, out, "2..2", "local[1]"))
    staging, run_process, _ = _stop_midway(held, out, worker=False)
    done = subprocess.run(
        _campaign_command(tmp_path, out, "1..1", "local[1]"), env=_env(tmp_path),
        capture_output=True, text=True, timeout=DEADLINE, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 scenario(s), 2 run(s): 2 passed, 0 failed" in done.stdout
    assert not left.exists()
    assert not killed_lock.exists()
    assert staging.is_dir()  # the live campaign's run, midway
    assert held.poll() is None

    os.kill(run_process, signal.SIGCONT)
    stdout, stderr = held.communicate(timeout=DEADLINE)
    assert held.returncode == 0, stderr[-3000:]
    assert "2 scenario(s), 2 run(s): 2 passed, 0 failed" in stdout
    assert list(out.glob(".*")) == []
    assert list(out.glob("*/.*")) == []
    runs = {str(p.relative_to(out)) for p in out.glob("*/seed-*")} - {
        f"{name}/seed-3" for name in ("create-delete-all-up", "delete-disabled")
    }  # of the killed campaign: a run it finished before it was killed
    assert runs == SEED_DIRS
    for run in SEED_DIRS:
        assert _whole(out / run)
        result = msgspec.json.decode((out / run / "summary.json").read_bytes(), type=RunResult)
        assert (result.status, result.run_dir) == ("passed", str(out / run))
        assert f"seed-{result.seed}" == Path(run).name
    page = (out / CAMPAIGN_FILE).read_text()
    assert 'data-seed="2"' in page
    assert 'data-seed="1"' not in page


# A writer of one run directory, as a campaign task's last step: argv[1] times, a whole
# run (one file naming the writer and the time) put into place from a staging directory.
MOVER = """
import sys, tempfile
from pathlib import Path
from cluster.chaos.spark_campaign import _move_into_place
run_dir, times, name = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
for n in range(times):
    staging = Path(tempfile.mkdtemp(prefix=".seed-1.campaign.", suffix=".partial",
                                    dir=run_dir.parent))
    (staging / "summary.json").write_text(f"{name} {n}")
    _move_into_place(staging, run_dir)
"""


def test_two_campaigns_writing_one_run_at_once_both_get_it_into_place(tmp_path: Path) -> None:
    """Two campaigns of the same scenario and seed: each puts the run into place while the
    other does (a rename race). Neither fails to; the run directory is always one of the
    writes, whole, and nothing is left beside it."""
    run_dir = tmp_path / "scenario" / "seed-1"
    run_dir.parent.mkdir()
    movers = [
        subprocess.Popen(
            [sys.executable, "-c", MOVER, str(run_dir), "400", name],
            env=_env(tmp_path),
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for mover in movers:
        _, stderr = mover.communicate(timeout=120)
        assert mover.returncode == 0, stderr[-2000:]
    assert [p.name for p in run_dir.parent.iterdir()] == ["seed-1"]
    assert [p.name for p in run_dir.iterdir()] == ["summary.json"]
    assert (run_dir / "summary.json").read_text() in {"a 399", "b 399"}
