"""``kemu up`` start-up failures are one line and a non-zero exit, leave nothing behind, and
never take over the cluster file of a running cluster; output into a closed pipe ends
quietly. Every case runs the real command in a child process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.processes, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0  # seconds for one command to end


def kemu(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], status: int, text: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == status, result.stderr
    assert "Traceback" not in result.stderr
    assert text in lines[-1]
    # argparse's own refusals add its usage lines above; kemu's are one line alone
    assert len(lines) == 1 or lines[-1].startswith("kemu up: error:"), result.stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def start_up(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A one-broker ``kemu up`` child process, returned once its cluster file exists."""
    cluster_file = tmp_path / "cluster.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli", "up", "--port", "0", "--brokers", "1", *extra,
         "--log-dir", str(tmp_path / "logs"), "--cluster-file", str(cluster_file)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + TIMEOUT
    while not cluster_file.exists():
        assert process.poll() is None, "kemu up ended before it was ready"
        assert time.monotonic() < deadline, "no cluster file within the deadline"
        time.sleep(0.05)  # polling a condition with a deadline, not settling
    return process, cluster_file


def stop_up(process: subprocess.Popen[bytes]) -> None:
    """Ctrl-C, as a user stops ``kemu up``; it must end cleanly."""
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, stderr


@pytest.fixture
def running_up(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    process, cluster_file = start_up(tmp_path)
    yield process, cluster_file
    stop_up(process)


def test_a_busy_port_is_one_line_and_leaves_no_log_dir(busy_port: int, tmp_path: Path) -> None:
    """A port already taken (where a user's real Kafka lives) ends the start with one line
    naming it; the log directories the start created and the cluster file are gone."""
    log_dir = tmp_path / "logs"
    result = kemu(
        "up", "--port", str(busy_port), "--log-dir", str(log_dir),
        "--cluster-file", str(tmp_path / "cluster.json"),
    )  # fmt: skip
    assert_one_line(result, 1, f"cannot listen on 127.0.0.1:{busy_port}")
    assert not log_dir.exists()
    assert not (tmp_path / "cluster.json").exists()


def test_a_busy_metrics_port_is_one_line_and_leaves_no_cluster_file(
    busy_port: int, tmp_path: Path
) -> None:
    """The Prometheus endpoint's port taken: one line naming it, nothing left behind."""
    log_dir = tmp_path / "logs"
    result = kemu(
        "up", "--port", "0", "--metrics-port", str(busy_port), "--log-dir", str(log_dir),
        "--cluster-file", str(tmp_path / "cluster.json"),
    )  # fmt: skip
    assert_one_line(result, 1, f"the Prometheus endpoint cannot listen on 127.0.0.1:{busy_port}")
    assert not log_dir.exists()
    assert not (tmp_path / "cluster.json").exists()


def test_a_log_dir_root_that_existed_is_kept_after_a_failed_start(
    busy_port: int, tmp_path: Path
) -> None:
    """A failed start removes only what it created: a log dir root that was there stays."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "keep").write_text("mine")
    result = kemu(
        "up", "--port", str(busy_port), "--log-dir", str(log_dir),
        "--cluster-file", str(tmp_path / "cluster.json"),
    )  # fmt: skip
    assert result.returncode == 1
    assert (log_dir / "keep").read_text() == "mine"


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("--port", "70000"), "70000 is not a TCP port"),
        (("--port", "http"), "not a port number"),
        (("--port", "65534"), "3 brokers need ports 65534 to 65536"),
        (("--store-port", "-1"), "-1 is not a TCP port"),
        (("--metrics-port", "99999"), "99999 is not a TCP port"),
    ],
)
def test_a_port_out_of_range_is_refused_before_anything_starts(
    args: tuple[str, ...], text: str, tmp_path: Path
) -> None:
    """Ports are checked when the arguments are read, not by a listener halfway up."""
    log_dir = tmp_path / "logs"
    result = kemu("up", *args, "--log-dir", str(log_dir))
    assert_one_line(result, 2, text)
    assert not log_dir.exists()


def test_a_store_port_with_zookeeper_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """``--store-port`` serves the embedded store: with ``--zookeeper`` there is none, so
    the option is refused (exit 2) rather than ignored, before ZooKeeper is tried."""
    log_dir = tmp_path / "logs"
    result = kemu(
        "up", "--zookeeper", "127.0.0.1:1", "--store-port", "0", "--log-dir", str(log_dir),
        "--cluster-file", str(tmp_path / "cluster.json"),
    )  # fmt: skip
    assert_one_line(result, 2, "--store-port serves the embedded store; with --zookeeper")
    assert not log_dir.exists()
    assert not (tmp_path / "cluster.json").exists()


def test_a_log_dir_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    """A log dir under a file cannot be created: Kafka's message, one line, exit 1."""
    (tmp_path / "file").write_text("")
    result = kemu(
        "up", "--port", "0", "--log-dir", str(tmp_path / "file" / "logs"),
        "--cluster-file", str(tmp_path / "cluster.json"),
    )  # fmt: skip
    assert_one_line(result, 1, "none of the specified log dirs can be created or opened")


def test_a_cluster_file_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    """``--cluster-file`` naming a directory is refused before the cluster starts."""
    result = kemu("up", "--port", "0", "--log-dir", str(tmp_path / "logs"),
                  "--cluster-file", str(tmp_path))  # fmt: skip
    assert_one_line(result, 2, "is a directory")
    assert not (tmp_path / "logs").exists()


def test_a_cluster_file_in_a_missing_directory_is_refused(tmp_path: Path) -> None:
    """``--cluster-file`` in a directory that does not exist is refused, not created."""
    missing = tmp_path / "no" / "such"
    result = kemu("up", "--port", "0", "--log-dir", str(tmp_path / "logs"),
                  "--cluster-file", str(missing / "cluster.json"))  # fmt: skip
    assert_one_line(result, 2, f"no directory {missing}")
    assert not missing.parent.exists()


def test_an_unknown_log_level_is_refused_with_the_choices() -> None:
    """``--log-level`` takes one of Python's level names, in any case."""
    result = kemu("--log-level", "verbose", "up")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "DEBUG" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_cluster_file_of_a_running_cluster_is_not_taken_over(
    running_up: tuple[subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    """A second ``kemu up`` given a running cluster's file is refused with its pid, and the
    first cluster's file is left as it was."""
    process, cluster_file = running_up
    before = cluster_file.read_text()
    result = kemu("up", "--port", "0", "--log-dir", str(tmp_path / "other"),
                  "--cluster-file", str(cluster_file))  # fmt: skip
    assert_one_line(result, 2, f"belongs to a running kemu up (pid {process.pid})")
    assert cluster_file.read_text() == before
    assert json.loads(before)["pid"] == process.pid
    assert not (tmp_path / "other").exists()


def test_a_stale_cluster_file_is_taken_over(tmp_path: Path, busy_port: int) -> None:
    """A cluster file whose launcher is gone does not block a new start (here the start
    then fails on a busy port, which shows it got past the cluster file)."""
    cluster_file = tmp_path / "cluster.json"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    cluster_file.write_text(json.dumps({"pid": int(gone.stdout), "brokers": []}))
    result = kemu("up", "--port", str(busy_port), "--log-dir", str(tmp_path / "logs"),
                  "--cluster-file", str(cluster_file))  # fmt: skip
    assert_one_line(result, 1, "cannot listen")


def test_output_into_a_closed_pipe_ends_quietly(
    running_up: tuple[subprocess.Popen[bytes], Path],
) -> None:
    """``kemu zk tree / | head -1``: the reader goes away, kemu ends with SIGPIPE's status
    and no traceback."""
    _, cluster_file = running_up
    created = kemu("topics", "--cluster-file", str(cluster_file), "--create", "--topic", "wide",
                   "--partitions", "400", "--replication-factor", "1")  # fmt: skip
    assert created.returncode == 0, created.stderr
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", "cluster.cli", "zk", "--cluster-file", str(cluster_file),
         "tree", "/"],
        cwd=REPO, stdout=write_fd, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as reader:
        assert reader.readline() == b"/\n"
    _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 128 + signal.SIGPIPE, stderr
    assert b"Traceback" not in stderr
    assert b"Exception ignored" not in stderr


@pytest.mark.parametrize("mode", [(), ("--processes",)], ids=["in-process", "processes"])
def test_a_cluster_that_ran_keeps_the_log_dir_it_created(
    mode: tuple[str, ...], tmp_path: Path
) -> None:
    """Only a failed start removes the log dir root it created: after a clean run and
    Ctrl-C the brokers' directories stay, and the cluster file goes."""
    process, cluster_file = start_up(tmp_path, *mode)
    stop_up(process)
    assert (tmp_path / "logs" / "broker-0" / "meta.properties").is_file()
    assert not cluster_file.exists()


def test_a_log_dir_of_an_earlier_cluster_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """Each embedded store is a new cluster with a fresh id, so a second ``kemu up`` on
    the first one's log dir meets Kafka's ``InconsistentClusterIdException`` in one line,
    and the first cluster's ``meta.properties`` is not rewritten."""
    process, _ = start_up(tmp_path)
    stop_up(process)
    meta = tmp_path / "logs" / "broker-0" / "meta.properties"
    before = meta.read_bytes()
    result = kemu("up", "--port", "0", "--brokers", "1", "--log-dir", str(tmp_path / "logs"),
                  "--cluster-file", str(tmp_path / "cluster.json"))  # fmt: skip
    assert_one_line(result, 1, "doesn't match stored clusterId Some(")
    assert f"give another --log-dir, or remove {tmp_path / 'logs'}" in result.stderr
    assert "The broker is trying to join the wrong cluster." in result.stderr
    assert meta.read_bytes() == before
