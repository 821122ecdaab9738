"""``kemu trace analyze`` through spark-submit on a real standalone Spark cluster: a master
and a worker on loopback (pip's pyspark has no start scripts: ``spark-class``), the
driver started by spark-submit (``scripts/kemu_submit.py``), the analysis's Python steps
run in the worker's executor. Its result matches the local analysis of the same runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.cli.main import main
from cluster.launch.spark_standalone import StandaloneSpark, standalone_spark
from tests.support.traces import assert_same_trace

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
JOB_TIMEOUT = 600  # seconds a spark-submit or campaign job may take at most


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[StandaloneSpark]:
    """A standalone master and one worker (1 core, 1 GB)."""
    with standalone_spark(tmp_path, workers=1) as cluster:
        yield cluster


# Four JVMs start on two cores (master, worker, driver, executor): the job's own deadline
# (``JOB_TIMEOUT``) bounds the test, pytest's only ends it if something else hangs.
@pytest.mark.timeout(900)
def test_spark_submit_to_a_standalone_master_analyses_like_local(
    standalone: StandaloneSpark, campaign: Path, tmp_path: Path
) -> None:
    url, env = standalone.url, standalone.env
    out = tmp_path / "submitted"
    done = subprocess.run(
        [str(BIN / "spark-submit"), "--master", url,
         "--conf", "spark.executor.memory=512m", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", f"spark.local.dir={tmp_path / 'scratch'}",
         str(ROOT / "scripts" / "kemu_submit.py"),
         "trace", "analyze", str(campaign), "--out", str(out), "--quiet"],
        env=env, capture_output=True, text=True, timeout=JOB_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    submitted = json.loads((out / "analysis.json").read_text())
    # The work ran in the worker's executor (its directory for the application).
    assert list(standalone.work_dirs[0].glob("app-*/*/stderr"))

    local_out = tmp_path / "local"
    assert main(["trace", "analyze", str(campaign), "--out", str(local_out), "--quiet"]) == 0
    local = json.loads((local_out / "analysis.json").read_text())
    assert sorted(submitted["runs"]) == sorted(local["runs"])
    for run, result in local["runs"].items():
        assert submitted["runs"][run]["violations"] == result["violations"] == []
        assert submitted["runs"][run]["lifecycles"] == result["lifecycles"]
        assert submitted["runs"][run]["messages"] == result["messages"]


SCENARIOS = ("create-delete-all-up", "delete-disabled")


@pytest.mark.timeout(900)  # six JVMs on two cores: master, two workers, driver, two executors
def test_a_chaos_campaign_on_two_workers_runs_like_the_local_campaign_and_outlives_its_master(
    tmp_path: Path,
) -> None:
    """Both executors run runs; the master, SIGKILLed once the first run is being
    written, is not needed any more: the executors it gave the application stay the
    driver's (Spark standalone), and the campaign completes."""
    files = [str(ROOT / "scenarios" / f"{name}.yaml") for name in SCENARIOS]
    out = tmp_path / "campaign"
    with standalone_spark(tmp_path, workers=2) as cluster:
        campaign = subprocess.Popen(
            [str(BIN / "kemu"), "chaos", "campaign", *files, "--seeds", "1..2",
             "--master", cluster.url, "--out", str(out), "--log-level", "INFO",
             "--conf", "spark.executor.memory=512m",
             # both executors registered before the first task is handed out
             "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
             "--conf", f"spark.local.dir={tmp_path / 'scratch'}"],
            env=cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 600
            while not list(out.glob("*/.seed-*.partial")):
                assert campaign.poll() is None, campaign.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "no run was seen being written"
                time.sleep(0.02)  # between two looks at the output directory
            os.kill(cluster.master_pid, signal.SIGKILL)
            stdout, stderr = campaign.communicate(timeout=JOB_TIMEOUT)
        finally:
            if campaign.poll() is None:
                campaign.kill()
                campaign.communicate()  # reaped, its pipes closed
    assert campaign.returncode == 0, stderr[-3000:]
    assert "2 scenario(s), 4 run(s): 4 passed, 0 failed" in stdout
    # Each worker's executor ran runs: their clusters' INFO lines are in its stderr.
    for work in cluster.work_dirs:
        stderr_files = list(work.glob("app-*/*/stderr"))
        assert len(stderr_files) == 1, work
        assert "[kemu." in stderr_files[0].read_text(errors="replace"), work
    assert sorted(p.name for p in out.glob("*/.*")) == []

    local = tmp_path / "local"
    assert main(["chaos", "run", *files, "--seeds", "1..2", "--deterministic",
                 "--out", str(local), "--quiet"]) == 0  # fmt: skip
    for name in SCENARIOS:
        for seed in (1, 2):
            run = f"{name}/seed-{seed}"
            assert_same_trace(out / run / "trace.jsonl", local / run / "trace.jsonl")
            remote = json.loads((out / run / "summary.json").read_text())
            here = json.loads((local / run / "summary.json").read_text())
            assert remote["trace_sha256"] == here["trace_sha256"]
            assert remote["status"] == here["status"] == "passed"
