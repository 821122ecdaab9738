"""A broker whose every log dir fails halts (Kafka's ``LogDirFailureChannel`` ends in
``Exit.halt(1)``), in a real ``kemu up`` in one process and with ``--processes``: the
launcher reports it, ``kemu broker status`` shows it down while the other brokers run on
(the same processes), its registration goes once its session expires, and ``kemu broker
start`` brings it back with its log dir repaired."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.launch.connect import ClusterFile
from tests.support.kemu_commands import KemuUp, alive, kemu, parse_status, running_up
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.processes, pytest.mark.slow]  # kemu up and commands as processes

SESSION = "zookeeper.session.timeout.ms=2000"
HALT_TIMEOUT = 20.0  # for the broker to halt once its topic is assigned to it
EXPIRY_TIMEOUT = 30.0  # for its registration to expire and the controller to see it gone
VICTIM = 1


def broker(up: KemuUp, *argv: str) -> tuple[int, str, str]:
    done = kemu("broker", *argv, "--cluster-file", str(up.cluster_file))
    return done.returncode, done.stdout, done.stderr


def registered(up: KemuUp) -> list[int]:
    listing = kemu("zk", "ls", "/brokers/ids", "--cluster-file", str(up.cluster_file))
    assert listing.returncode == 0, listing.stderr
    return sorted(int(line) for line in listing.stdout.split())


@pytest.fixture(params=["one-process", "processes"])
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KemuUp]:
    extra = ("--processes",) if request.param == "processes" else ()
    with running_up(tmp_path, "--config", SESSION, *extra) as launched:
        yield launched


def test_a_broker_whose_log_dirs_all_fail_halts_and_can_be_started_again(
    up: KemuUp, tmp_path: Path
) -> None:
    """Broker 1's log dir replaced by a file, then a partition assigned to it: it halts
    with Kafka's reason, is reported down, the others run on; repaired, it starts again
    and creates the partition's log."""
    processes = "--processes" in up.args
    pids = {b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers}
    log_dir = tmp_path / "logs" / f"broker-{VICTIM}"
    shutil.rmtree(log_dir)
    log_dir.write_bytes(b"not a directory")

    created = kemu(
        "topics", "--zookeeper", up.store, "--create", "--topic", "t",
        "--replica-assignment", str(VICTIM),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    up._read_until(f"kemu: broker {VICTIM} halted: Shutdown broker because all log dirs", 20.0)
    if processes:
        up._read_until(f"kemu: broker {VICTIM} (pid {pids[VICTIM]}) exited unexpectedly", 5.0)
        assert "exited unexpectedly with status 1" in up.output
        assert not alive(pids[VICTIM])
    assert f"{log_dir} have failed" in up.output

    code, out, err = broker(up, "status")
    assert code == 0, err
    rows, _ = parse_status(out)
    assert {b: row.state for b, row in rows.items()} == {0: "running", 1: "exited", 2: "running"}
    assert not next(b for b in ClusterFile.read(up.cluster_file).brokers if b.id == VICTIM).running
    wait_until(lambda: registered(up), lambda ids: ids == [0, 2], EXPIRY_TIMEOUT)
    wait_until(lambda: parse_status(broker(up, "status")[1])[1], lambda c: c in (0, 2), 10.0)
    if processes:  # the other brokers' processes never went down
        assert all(alive(pids[b]) for b in (0, 2))
        assert {
            b.id: b.pid for b in ClusterFile.read(up.cluster_file).brokers if b.id != VICTIM
        } == {b: p for b, p in pids.items() if b != VICTIM}

    log_dir.unlink()  # repaired: the broker makes its log dir again at start-up
    code, out, err = broker(up, "start", str(VICTIM))
    assert code == 0, err
    rows, _ = parse_status(out)
    assert all(row.state == "running" for row in rows.values())
    assert registered(up) == [0, 1, 2]
    wait_until(lambda: (log_dir / "t-0").is_dir(), bool, EXPIRY_TIMEOUT)
    assert (log_dir / "meta.properties").is_file()
    assert up.stop() == 0
