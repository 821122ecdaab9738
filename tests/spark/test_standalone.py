"""``kemu trace analyze`` through spark-submit on a real standalone Spark cluster: a master
and a worker on loopback (pip's pyspark has no start scripts: ``spark-class``), the
driver started by spark-submit (``scripts/kemu_submit.py``), the analysis's Python steps
run in the worker's executor. Its result matches the local analysis of the same runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.cli.main import main
from cluster.launch.processes import free_ports

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
START_TIMEOUT = 60.0


def _listening(port: int, deadline: float) -> bool:
    """Whether something accepts connections on ``port`` before ``deadline`` (polls the
    port: the master says nothing else that is machine-readable)."""
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex((HOST, port)) == 0:
                return True
        time.sleep(0.1)  # between two connection attempts, not to let anything settle
    return False


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A standalone master and one worker (1 core, 1 GB); yields the master URL and the
    environment the driver needs."""
    master_port, master_ui, worker_port, worker_ui = free_ports(4, HOST)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_CONF_DIR": str(ROOT / "spark" / "conf"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    url = f"spark://{HOST}:{master_port}"
    log = (tmp_path / "cluster.log").open("wb")
    spark_class = str(BIN / "spark-class")
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST,
         "--port", str(master_port), "--webui-port", str(master_ui)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    worker = None
    try:
        assert _listening(master_port, time.monotonic() + START_TIMEOUT), "no master"
        worker = subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", HOST,
             "--port", str(worker_port), "--webui-port", str(worker_ui),
             "--cores", "1", "--memory", "1g", "--work-dir", str(tmp_path / "work")],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        yield url, env
    finally:
        for process in (worker, master):
            if process is not None:
                process.terminate()
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        log.close()


@pytest.mark.timeout(300)  # four JVMs start on two cores: master, worker, driver, executor
def test_spark_submit_to_a_standalone_master_analyses_like_local(
    standalone: tuple[str, dict[str, str]], campaign: Path, tmp_path: Path
) -> None:
    url, env = standalone
    out = tmp_path / "submitted"
    done = subprocess.run(
        [str(BIN / "spark-submit"), "--master", url,
         "--conf", "spark.executor.memory=512m", "--conf", "spark.sql.shuffle.partitions=2",
         "--conf", f"spark.local.dir={tmp_path / 'scratch'}",
         str(ROOT / "scripts" / "kemu_submit.py"),
         "trace", "analyze", str(campaign), "--out", str(out), "--quiet"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    submitted = json.loads((out / "analysis.json").read_text())
    # The work ran in the worker's executor (its directory for the application).
    assert list((tmp_path / "work").glob("app-*/*/stderr"))

    local_out = tmp_path / "local"
    assert main(["trace", "analyze", str(campaign), "--out", str(local_out), "--quiet"]) == 0
    local = json.loads((local_out / "analysis.json").read_text())
    assert sorted(submitted["runs"]) == sorted(local["runs"])
    for run, result in local["runs"].items():
        assert submitted["runs"][run]["violations"] == result["violations"] == []
        assert submitted["runs"][run]["lifecycles"] == result["lifecycles"]
        assert submitted["runs"][run]["messages"] == result["messages"]
