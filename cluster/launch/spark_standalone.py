"""A standalone Spark cluster on loopback: one master and N workers, each a JVM started
with pyspark's own ``spark-class`` (pip's pyspark has no start scripts), for the tests and
the bench row that run chaos campaigns and trace analyses on a real cluster.

``standalone_spark(workdir, workers=2)`` starts them and yields a ``StandaloneSpark``:
the master URL, the environment a driver needs (``SPARK_LOCAL_IP``, the quiet logging
configuration, ``PYSPARK_PYTHON``), and each worker's work directory (an executor the
worker launches for an application gets ``app-*/<n>/`` there). They are stopped
(SIGTERM, then SIGKILL after 30 s) when the block ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cluster.launch.ports import free_ports
from protocol.errors import KemuError

__all__ = ["StandaloneSpark", "standalone_spark"]

HOST: Final = "127.0.0.1"
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 30.0
CONF_DIR: Final = Path(__file__).resolve().parents[2] / "spark" / "conf"


@dataclass(frozen=True)
class StandaloneSpark:
    url: str  # spark://127.0.0.1:PORT
    env: dict[str, str]  # for a driver (kemu, spark-submit) on this cluster
    work_dirs: tuple[Path, ...]  # one per worker
    master_pid: int  # the master's JVM (tests stop it to lose the master)


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


@contextmanager
def standalone_spark(
    workdir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"
) -> Iterator[StandaloneSpark]:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each) on loopback,
    their logs in ``workdir/cluster.log``; ``KemuError`` if the master does not listen
    within a minute."""
    spark_class = str(Path(sys.executable).parent / "spark-class")
    master_port, master_ui, *worker_ports = free_ports(2 + 2 * workers, HOST)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(workdir / "logs"),
        "SPARK_CONF_DIR": str(CONF_DIR),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    url = f"spark://{HOST}:{master_port}"
    work_dirs = tuple(workdir / f"worker-{n}" for n in range(1, workers + 1))
    processes: list[subprocess.Popen[bytes]] = []
    with (workdir / "cluster.log").open("wb") as log:
        try:
            master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", HOST,
                      "--port", str(master_port), "--webui-port", str(master_ui)]  # fmt: skip
            processes.append(
                subprocess.Popen(master, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
            )
            if not _listening(master_port, time.monotonic() + START_TIMEOUT):
                raise KemuError(f"the Spark master did not listen on {url} within a minute")
            for n, work in enumerate(work_dirs):
                port, ui = worker_ports[2 * n : 2 * n + 2]
                worker = [spark_class, "org.apache.spark.deploy.worker.Worker", url,
                          "--host", HOST, "--port", str(port), "--webui-port", str(ui),
                          "--cores", str(cores), "--memory", memory,
                          "--work-dir", str(work)]  # fmt: skip
                processes.append(
                    subprocess.Popen(worker, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603
                )
            yield StandaloneSpark(
                url=url, env=env, work_dirs=work_dirs, master_pid=processes[0].pid
            )
        finally:
            for process in reversed(processes):
                process.terminate()
            for process in reversed(processes):
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
