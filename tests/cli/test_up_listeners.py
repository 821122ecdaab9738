"""``kemu up --listeners`` / ``--advertised-listeners`` (Kafka's ``listeners`` and
``advertised.listeners``): a value kemu cannot serve is one line and exit 1 before anything
starts (another security protocol than PLAINTEXT, another listener name, more than one,
a bad syntax or port, 0.0.0.0 advertised), ``--port`` with ``--listeners`` is a usage
error; listeners off loopback get one warning line, and a real client (kcat) bootstrapped
anywhere reaches the brokers at the advertised address, in one process and with
``--processes``."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.cli.listeners import loopback
from cluster.launch.cluster import Advertised, ClusterSpec
from cluster.launch.connect import ClusterFile
from tests.support.kemu_commands import KemuUp, kemu, running_up

ADVERTISED = "127.0.0.2"  # a loopback address of its own: where the brokers say they are
KCAT_TIMEOUT = 30.0


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--listeners", "SSL://127.0.0.1:9092"],
            "--listeners SSL://127.0.0.1:9092: kemu serves PLAINTEXT only (it has no TLS and"
            " no SASL), not SSL",
        ),
        (
            ["--listeners", "sasl_plaintext://127.0.0.1:9092"],
            "--listeners sasl_plaintext://127.0.0.1:9092: kemu serves PLAINTEXT only (it has"
            " no TLS and no SASL), not SASL_PLAINTEXT",
        ),
        (
            ["--listeners", "INTERNAL://127.0.0.1:9092"],
            "--listeners INTERNAL://127.0.0.1:9092: No security protocol defined for listener"
            " INTERNAL",
        ),
        (
            ["--listeners", "127.0.0.1:9092"],
            "--listeners 127.0.0.1:9092: Unable to parse 127.0.0.1:9092 to a broker endpoint",
        ),
        (
            ["--listeners", "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"],
            "--listeners PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093: kemu serves"
            " exactly one listener, PLAINTEXT://HOST:PORT",
        ),
        (
            ["--listeners", "PLAINTEXT://127.0.0.1:70000"],
            "--listeners PLAINTEXT://127.0.0.1:70000: port 70000 is not a TCP port (0-65535)",
        ),
        (
            ["--listeners", "PLAINTEXT://0.0.0.0:9092"],
            "--listeners PLAINTEXT://0.0.0.0:9092: advertised.listeners cannot use the"
            " nonroutable meta-address 0.0.0.0. Use a routable IP address.",
        ),
        (
            ["--advertised-listeners", "PLAINTEXT://0.0.0.0:0"],
            "--advertised-listeners PLAINTEXT://0.0.0.0:0: advertised.listeners cannot use"
            " the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
        ),
        (
            ["--advertised-listeners", "SSL://127.0.0.2:0"],
            "--advertised-listeners SSL://127.0.0.2:0: kemu serves PLAINTEXT only (it has no"
            " TLS and no SASL), not SSL",
        ),
    ],
)
def test_a_listener_kemu_cannot_serve_is_one_line_and_exit_1(
    tmp_path: Path, argv: list[str], error: str
) -> None:
    """Each refusal: exit 1, Kafka's message (or why kemu does not serve it) in one line,
    no warning, and nothing written (no log dir, no cluster file)."""
    done = kemu(*_up_args(tmp_path), *argv)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"Error: {error}\n"
    assert not (tmp_path / "logs").exists()
    assert not (tmp_path / "cluster.json").exists()


def test_port_and_listeners_together_are_a_usage_error(tmp_path: Path) -> None:
    """--port and --listeners both name the port: refused (exit 2) rather than one winning."""
    done = kemu(*_up_args(tmp_path), "--port", "0", "--listeners", "PLAINTEXT://127.0.0.1:0")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "Error: --port and --listeners cannot be given together: the port is the listener's\n"
    )
    assert not (tmp_path / "logs").exists()


def _up_args(tmp: Path) -> list[str]:
    return ["up", "--log-dir", str(tmp / "logs"), "--cluster-file", str(tmp / "cluster.json")]


@pytest.fixture(params=["one-process", pytest.param("processes", marks=pytest.mark.processes)])
def everywhere(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KemuUp]:
    """Listeners on every IPv4 interface (0.0.0.0, any port), advertised at 127.0.0.2."""
    extra = ("--processes",) if request.param == "processes" else ()
    listeners = (
        "--listeners", "PLAINTEXT://0.0.0.0:0",
        "--advertised-listeners", f"PLAINTEXT://{ADVERTISED}:0",
    )  # fmt: skip
    with running_up(tmp_path, *listeners, *extra) as up:
        yield up


def kcat(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kcat", *argv], capture_output=True, text=True, timeout=KCAT_TIMEOUT, check=False
    )


@pytest.mark.slow
def test_clients_bootstrapped_elsewhere_reach_the_advertised_address(everywhere: KemuUp) -> None:
    """One warning line; the table, the cluster file and Metadata give 127.0.0.2; kcat,
    bootstrapped through 127.0.0.1, produces to and consumes from the leaders there."""
    up = everywhere
    warnings = [line for line in up.output.splitlines() if "warning" in line]
    assert warnings == [
        "kemu: warning: --listeners PLAINTEXT://0.0.0.0:0: the Kafka listeners are not on"
        " loopback, and anyone who can reach them can use them (PLAINTEXT, no authentication)"
    ]
    info = ClusterFile.read(up.cluster_file)
    assert {b.host for b in info.brokers} == {ADVERTISED}
    assert up.bootstrap.split(",") == [f"{ADVERTISED}:{b.port}" for b in info.brokers]

    bootstrap = f"127.0.0.1:{info.brokers[0].port}"  # not the advertised address
    listed = kcat("-L", "-J", "-b", bootstrap, "-m", "10")
    assert listed.returncode == 0, listed.stderr
    brokers = json.loads(listed.stdout)["brokers"]
    assert sorted((b["id"], b["name"]) for b in brokers) == [
        (b.id, f"{ADVERTISED}:{b.port}") for b in info.brokers
    ]

    created = kemu(
        "topics", "--bootstrap-server", bootstrap, "--create", "--topic", "t",
        "--partitions", "3", "--replication-factor", "2",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    produced = subprocess.run(
        [
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            "t",
            "-p",
            "1",
            "-X",
            "topic.request.required.acks=-1",
        ],
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=KCAT_TIMEOUT,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = kcat("-C", "-b", bootstrap, "-t", "t", "-p", "1", "-o", "beginning", "-e", "-q")
    assert (consumed.returncode, consumed.stdout) == (0, "hello\n"), consumed.stderr
    assert up.stop() == 0


def test_what_is_advertised_follows_kafkas_rules() -> None:
    """advertised.listeners: broker i at PORT+i, port 0 the bound one; without it, the
    listener's host, or this machine's canonical name for a listener on every interface."""
    spec = ClusterSpec(listener_host="", advertised=Advertised(host="kafka.example", port=19092))
    assert (spec.bind_host, spec.advertised_host) == ("", "kafka.example")
    assert spec.advertised_ports({0: 5000, 1: 5001}) == {0: 19092, 1: 19093}
    everywhere = ClusterSpec(listener_host="")
    assert everywhere.advertised_host == socket.getfqdn()
    assert everywhere.advertised_ports({0: 5000, 1: 5001}) == {0: 5000, 1: 5001}
    default = ClusterSpec()
    assert (default.bind_host, default.advertised_host) == ("127.0.0.1", "127.0.0.1")


@pytest.mark.parametrize(
    ("host", "expected"),
    [("127.0.0.3", True), ("localhost", True), ("::1", True), ("", False), ("0.0.0.0", False)],  # noqa: S104
)
def test_only_loopback_listeners_go_without_a_warning(host: str, expected: bool) -> None:
    """Loopback means every address the host resolves to is a loopback one."""
    assert loopback(host) is expected
