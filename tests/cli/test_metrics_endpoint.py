"""The Prometheus endpoint of ``kemu up`` and ``kemu broker status``'s metrics, as a user
meets them: ``kemu up`` in a child process, its endpoint (the cluster file's ``metrics``
address) scraped over HTTP and the answer parsed as Prometheus' exposition format by
``prometheus_client``'s own parser. A broker killed under a topic of replication factor 3
leaves its partitions under-replicated on their leaders, and they are whole again once it
is back; the ISR's shrinks and expands are counted, the controller's elections timed."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster.launch.connect import ClusterFile
from tests.support.kemu_commands import KemuUp, kemu, running_up
from tests.support.waiting import wait_until

SESSION_TIMEOUT_MS = 3000  # a killed broker's registration goes this long after it dies
WAIT = 60.0  # seconds for the cluster to react to a kill or a start

Samples = dict[tuple[str, str], float]
"""(sample name, broker label) -> value."""


def scrape(address: str, path: str = "/metrics") -> Samples:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, sample.labels["broker"]] = sample.value
    return samples


def _raw(address: str, request: bytes) -> bytes:
    """``request`` written as is on a new connection; what the endpoint answers."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def total(samples: Samples, name: str) -> float:
    return sum(value for (sample, _), value in samples.items() if sample == name)


def per_broker(samples: Samples, name: str) -> dict[str, float]:
    return {broker: value for (sample, broker), value in samples.items() if sample == name}


@pytest.fixture
def up(tmp_path: Path) -> Iterator[KemuUp]:
    with running_up(
        tmp_path, "--config", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"
    ) as up:
        yield up


@pytest.mark.slow
def test_under_replicated_partitions_rise_when_a_broker_dies_and_fall_when_it_returns(
    up: KemuUp,
) -> None:
    info = ClusterFile.read(up.cluster_file)
    assert info.metrics.startswith("127.0.0.1:")  # loopback only
    assert f"metrics: http://{info.metrics}/metrics" in up.output
    file = ("--cluster-file", str(up.cluster_file))
    created = kemu(
        "topics", "--create", "--topic", "rf3", "--partitions", "6",
        "--replication-factor", "3", "--bootstrap-server", up.bootstrap,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr

    healthy = wait_until(
        lambda: scrape(info.metrics),
        lambda s: total(s, "kafka_server_replicamanager_leadercount") == 6,
        WAIT,
    )
    assert per_broker(healthy, "kafka_server_replicamanager_partitioncount") == {
        "0": 6,
        "1": 6,
        "2": 6,
    }
    assert total(healthy, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    active = per_broker(healthy, "kafka_controller_kafkacontroller_activecontrollercount")
    assert sorted(active.values()) == [0, 0, 1]
    controller = next(b for b, v in active.items() if v == 1)
    assert healthy["kafka_controller_kafkacontroller_globalpartitioncount", controller] == 6
    assert healthy["kafka_controller_kafkacontroller_globaltopiccount", controller] == 1
    # every ControllerStats timer is there, the TopicChange one counted the creation
    assert (
        healthy["kafka_controller_controllerstats_topicchangerateandtimems_count", controller] >= 1
    )
    assert (
        "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
        controller,
    ) in healthy
    assert healthy["kafka_controller_controllerstats_uncleanleaderelections_total", controller] == 0

    victim = "2" if controller != "2" else "1"
    killed = kemu("broker", "kill", victim, *file)
    assert killed.returncode == 0, killed.stderr
    # the victim's partitions: its 6 replicas leave the ISR of the 6 partitions
    degraded = wait_until(
        lambda: scrape(info.metrics),
        lambda s: total(s, "kafka_server_replicamanager_underreplicatedpartitions") == 6,
        WAIT,
    )
    assert victim not in per_broker(degraded, "kafka_server_replicamanager_leadercount")
    assert total(degraded, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert (
        degraded["kafka_controller_controllerstats_leaderelectionrateandtimems_count", controller]
        > (
            healthy[
                "kafka_controller_controllerstats_leaderelectionrateandtimems_count", controller
            ]
        )
    )  # the BrokerChange that took the dead broker out, timed

    status = kemu("broker", "status", *file)
    assert status.returncode == 0, status.stderr
    lines = [line.strip() for line in status.stdout.splitlines()]
    assert "replica manager (kafka.server:type=ReplicaManager):" in lines
    shown = {
        line.split(":")[0]: dict(field.split("=") for field in line.split(": ", 1)[1].split())
        for line in lines
        if line.startswith("broker ") and "=" in line
    }
    assert set(shown) == {f"broker {b}" for b in ("0", "1", "2") if b != victim}
    assert sum(int(m["UnderReplicatedPartitions"]) for m in shown.values()) == 6
    assert all(m["OfflineReplicaCount"] == "0" for m in shown.values())
    assert all("IsrShrinksPerSec.count" in m for m in shown.values())

    started = kemu("broker", "start", victim, *file)
    assert started.returncode == 0, started.stderr
    whole = wait_until(
        lambda: scrape(info.metrics),
        lambda s: (
            total(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
            and total(s, "kafka_server_replicamanager_partitioncount") == 18
        ),
        WAIT,
    )
    # the returning follower rejoined each ISR through its leader's AlterIsr: one expand each
    assert total(whole, "kafka_server_replicamanager_isrexpands_total") >= 6
    assert total(whole, "kafka_server_replicamanager_failedisrupdates_total") == 0


@pytest.mark.slow
def test_the_endpoint_answers_only_get_of_metrics(up: KemuUp) -> None:
    """Another path is 404, another method 405, a request it cannot read 400, OpenMetrics
    when asked; it serves on after each."""
    address = ClusterFile.read(up.cluster_file).metrics
    with pytest.raises(urllib.error.HTTPError) as missing:
        scrape(address, "/nowhere")
    assert missing.value.code == 404
    missing.value.close()
    request = urllib.request.Request(f"http://{address}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - http, built here
    assert posted.value.code == 405
    assert posted.value.headers["Allow"] == "GET"
    posted.value.close()
    # OpenMetrics when the scraper asks for it, as prometheus_client's own server answers
    request = urllib.request.Request(
        f"http://{address}/metrics", headers={"Accept": "application/openmetrics-text"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - http, built here
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        assert answer.read().decode().endswith("# EOF\n")
    # a head that is not HTTP/1.x, or longer than 8 KiB, is refused with 400
    assert _raw(address, b"hello there\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(address, b"GET /metrics HTTP/1.1\r\nX: " + b"y" * 20000).startswith(
        b"HTTP/1.1 400 "
    )
    # and it still serves after those
    assert total(scrape(address), "kafka_controller_kafkacontroller_activecontrollercount") == 1
