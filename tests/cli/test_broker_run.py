"""``kemu broker run`` (``kafka-server-start.sh``): brokers started one by one, each its own
process on a loopback address of its own (127.0.0.2, .3, .4 stand for three hosts: Linux
routes all of 127.0.0.0/8 to ``lo``), with its own log dir, join the cluster a real
ZooKeeper holds. The first creates ``/cluster/id``, the others join it; they find each
other through their registrations; a real client (confluent-kafka) creates a topic of
replication factor 3, produces with acks=all and consumes it back. SIGTERM is Kafka's
graceful stop (controlled shutdown, exit 0); after SIGKILL the log dir is recovered and
the broker rejoins. Bad input (an unreachable ensemble, a broker id that is registered,
a listener that cannot be bound, no secret) is one line, exit 1, nothing written."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ClusterMetadata,
    NewTopic,
)

from actors.broker.names import INTERNAL_LISTENER
from actors.log.manager import META_PROPERTIES
from actors.log.partition_log import CLEAN_SHUTDOWN_FILE
from cluster.store.zookeeper import ZooKeeperStore
from protocol import zkdata
from protocol.errors import NoNodeError
from protocol.ids import BrokerId
from tests.support.broker_run import READY_TIMEOUT, REPO, BrokerRun, run_command, run_env
from tests.support.clients import confluent_consume, confluent_produce
from tests.support.waiting import wait_until
from tests.support.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, free_port

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "offsets.topic.replication.factor": "3",
    "controlled.shutdown.retry.backoff.ms": "200",
}
CLIENT_TIMEOUT = 60.0
MESSAGES = 30


def zk_read(hosts: str, path: str) -> tuple[bytes, int] | None:
    """A znode's data and czxid (None if missing), read through a session of our own."""

    async def read() -> tuple[bytes, int] | None:
        store = ZooKeeperStore(hosts)
        try:
            session = await store.open_session(timeout=10.0, name="test-reader")
            try:
                data, stat = await session.get(path)
            except NoNodeError:
                return None
            return data, stat.czxid
        finally:
            await store.aclose()

    return anyio.run(read)


def zk_children(hosts: str, path: str) -> tuple[str, ...]:
    async def read() -> tuple[str, ...]:
        store = ZooKeeperStore(hosts)
        try:
            session = await store.open_session(timeout=10.0, name="test-reader")
            try:
                return await session.children(path)
            except NoNodeError:
                return ()
        finally:
            await store.aclose()

    return anyio.run(read)


@pytest.fixture
def chroot(zookeeper_server: ZooKeeperServer) -> str:
    """The shared test ZooKeeper, in a chroot of this test's own."""
    return f"{zookeeper_server.hosts}/kemu-run-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[list[BrokerRun]]:
    """The broker children a test starts; whatever is left running is killed after it."""
    started: list[BrokerRun] = []
    yield started
    for broker in started:
        broker.kill()


def start_brokers(
    started: list[BrokerRun],
    zookeeper: str,
    tmp: Path,
    ids: tuple[int, ...] = (1, 2, 3),
    *,
    log_level: str = "warning",
) -> list[BrokerRun]:
    runs = [
        BrokerRun(
            broker_id,
            zookeeper,
            host,
            tmp / f"host{broker_id}" / "kafka-logs",
            tmp / f"broker-{broker_id}.out",
            config=CONFIG,
            log_level=log_level,
        )
        for broker_id, host in zip(ids, HOSTS, strict=False)
    ]
    started.extend(runs)
    for run in runs:
        run.launch()
    for run in runs:
        run.wait_ready()
    return runs


def metadata(bootstrap: str, topic: str | None = None) -> ClusterMetadata | None:
    """What a fresh Metadata request tells confluent-kafka (None if it gets no answer:
    a broker that went away). confluent-kafka, not kafka-python, because kafka-python
    3.0.12 leaves the socket of a refused connect open, and brokers go away here."""
    try:
        return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    except KafkaException:
        return None


def partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Each partition's leader and ISR, as the cluster's Metadata tells a client."""
    found = metadata(bootstrap, topic)
    if found is None or topic not in found.topics or found.topics[topic].error is not None:
        return {}
    return {p: (m.leader, tuple(sorted(m.isrs))) for p, m in found.topics[topic].partitions.items()}


def fully_replicated(state: dict[int, tuple[int, tuple[int, ...]]]) -> bool:
    """Three partitions, each with every broker in its ISR."""
    return len(state) == 3 and all(isr == (1, 2, 3) for _, isr in state.values())


def create_replicated(bootstrap: str, topic: str) -> None:
    """Create ``topic`` (3 partitions, replication factor 3); until every ISR is full."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (created,) = admin.create_topics([NewTopic(topic, 3, 3)], request_timeout=30).values()
    created.result(CLIENT_TIMEOUT)
    wait_until(lambda: partitions(bootstrap, topic), fully_replicated, CLIENT_TIMEOUT)


def live_brokers(bootstrap: str) -> tuple[int, int]:
    """The controller and the number of brokers the cluster's Metadata lists ((-1, 0)
    without an answer)."""
    found = metadata(bootstrap)
    return (-1, 0) if found is None else (found.controller_id, len(found.brokers))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Every value with acks=all, each acknowledged."""
    confluent_produce(bootstrap, topic, values)


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """``count`` records of ``topic``'s three partitions from the start, sorted."""
    return sorted(confluent_consume(bootstrap, topic, 3, count))


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.zookeeper
@pytest.mark.timeout(300)
def test_brokers_on_three_hosts_form_one_cluster_stop_gracefully_and_recover(
    chroot: str, brokers: list[BrokerRun], tmp_path: Path
) -> None:
    """Three `kemu broker run` on three addresses form one cluster a real client uses;
    SIGTERM moves leaderships away and exits 0; a SIGKILLed broker recovers its log dir
    and rejoins with its data."""
    one, two, three = start_brokers(brokers, chroot, tmp_path, log_level="info")

    # One cluster id, created by the first broker, in every log dir's meta.properties.
    cluster_id = zk_read(chroot, zkdata.CLUSTER_ID_PATH)
    assert cluster_id is not None
    cid = zkdata.ClusterId.decode(cluster_id[0]).cluster_id
    for run in (one, two, three):
        assert f"cluster.id={cid}" in (run.log_dir / META_PROPERTIES).read_text()
        # and Kafka's server.log, its start and registration (docs/logging.md)
        assert " registered [kemu.server] " in (run.log_dir / "server.log").read_text()
    # Each registers its Kafka listener first and its internal endpoint on its own host.
    for run in (one, two, three):
        found = zk_read(chroot, zkdata.broker_path(BrokerId(run.broker_id)))
        assert found is not None
        registration = zkdata.BrokerRegistration.decode(found[0])
        first, internal = registration.endpoints
        assert (first.listener, first.host, first.port) == ("PLAINTEXT", run.host, run.port)
        assert (internal.listener, internal.host) == (INTERNAL_LISTENER, run.host)

    admin = ",".join(run.bootstrap for run in (one, two, three))  # where Metadata is asked
    create_replicated(admin, "scaled")
    values = [f"m{i:03}".encode() for i in range(MESSAGES)]
    produce(two.bootstrap, "scaled", values)
    assert consume(three.bootstrap, "scaled", MESSAGES) == sorted(values)

    # SIGTERM to the controller: controlled shutdown, exit 0; the others carry on.
    controller, _ = wait_until(
        lambda: live_brokers(admin), lambda c: c[0] in (1, 2, 3), CLIENT_TIMEOUT
    )
    stopped = {run.broker_id: run for run in (one, two, three)}[controller]
    assert stopped.terminate() == 0, stopped.output[-4000:]
    assert "controlled_shutdown_succeeded" in stopped.output
    wait_until(
        lambda: live_brokers(admin),
        lambda c: c[0] not in (-1, stopped.broker_id) and c[1] == 2,
        CLIENT_TIMEOUT,
    )
    after = wait_until(
        lambda: partitions(admin, "scaled"),
        lambda p: (
            len(p) == 3
            and all(
                leader != stopped.broker_id and stopped.broker_id not in isr
                for leader, isr in p.values()
            )
        ),
        CLIENT_TIMEOUT,
    )
    assert all(leader in isr for leader, isr in after.values())

    # It starts again with the same log dir and id, and rejoins every ISR.
    stopped.start()
    wait_until(
        lambda: partitions(admin, "scaled"),
        fully_replicated,
        CLIENT_TIMEOUT,
    )

    # SIGKILL: no graceful step. Once its session expired, it starts again on the same
    # log dir (recovered after the unclean shutdown) and catches up.
    killed = next(run for run in (one, two, three) if run is not stopped)
    killed.kill()
    wait_until(lambda: live_brokers(admin)[1], lambda n: n == 2, CLIENT_TIMEOUT)
    produce(stopped.bootstrap, "scaled", [b"after-kill"])
    killed.start()
    wait_until(
        lambda: partitions(admin, "scaled"),
        fully_replicated,
        CLIENT_TIMEOUT,
    )
    assert consume(killed.bootstrap, "scaled", MESSAGES + 1) == sorted([*values, b"after-kill"])
    assert zk_read(chroot, zkdata.CLUSTER_ID_PATH) == cluster_id  # created once
    for run in (one, two, three):
        assert run.terminate() == 0, run.output[-4000:]
    assert zk_children(chroot, zkdata.BROKER_IDS_PATH) == ()


def run_once(args: list[str], timeout: float = 120.0) -> tuple[int, str, str, float]:
    """Run a command to its end: exit status, stdout, stderr, seconds taken."""
    began = time.monotonic()
    done = subprocess.run(
        args, cwd=REPO, env=run_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - began


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


@pytest.mark.processes
def test_an_unreachable_ensemble_is_one_line_within_the_connection_timeout(
    tmp_path: Path,
) -> None:
    """No server of the ensemble answers: one line naming it, exit 1, after
    zookeeper.connection.timeout.ms, and no log dir made."""
    ensemble = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
    log_dir = tmp_path / "kafka-logs"
    args = run_command(
        7, ensemble, "127.0.0.2", log_dir, config={"zookeeper.connection.timeout.ms": "1500"}
    )
    status, stdout, stderr, took = run_once(args)
    assert status == 1
    assert error_lines(stderr) == [
        f"Error: broker 7 cannot connect to ZooKeeper at {ensemble}: Timed out waiting for"
        " connection while in state: CONNECTING (1500 ms)"
    ], stderr
    assert stdout == ""
    assert took >= 1.5
    assert not log_dir.exists()


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.zookeeper
@pytest.mark.timeout(180)
def test_a_registered_broker_id_or_a_taken_listener_fails_with_one_line_and_writes_nothing(
    chroot: str, brokers: list[BrokerRun], tmp_path: Path
) -> None:
    """A second broker with a registered id ends with Kafka's "node already exists" line,
    exit 1, the first one's registration untouched and no log dir made; so does a broker
    whose listener address is taken, with no registration left behind; and one with no
    secret."""
    (first,) = start_brokers(brokers, chroot, tmp_path, ids=(1,))
    before = zk_read(chroot, zkdata.broker_path(BrokerId(1)))
    assert before is not None

    log_dir = tmp_path / "duplicate" / "kafka-logs"
    status, stdout, stderr, _ = run_once(run_command(1, chroot, "127.0.0.3", log_dir))
    assert status == 1
    (line,) = error_lines(stderr)
    assert line.startswith(
        "Error: Error while creating ephemeral at /brokers/ids/1, node already exists and owner '"
    ), stderr
    assert "does not match current session" in line
    assert "ready" not in stdout
    assert not log_dir.exists()
    assert zk_read(chroot, zkdata.broker_path(BrokerId(1))) == before
    assert first.alive

    with socket.socket() as taken:
        taken.bind(("127.0.0.5", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log_dir = tmp_path / "taken" / "kafka-logs"
        args = run_command(2, chroot, "127.0.0.5", log_dir, port=port)
        status, stdout, stderr, _ = run_once(args)
    assert status == 1
    assert error_lines(stderr) == [
        f"Error: broker-2 cannot listen on 127.0.0.5:{port}: [Errno 98] Address already in use"
    ], stderr
    assert not log_dir.exists()
    assert zk_children(chroot, zkdata.BROKER_IDS_PATH) == ("1",)

    env = {k: v for k, v in run_env().items() if k != "KEMU_CLUSTER_SECRET"}
    done = subprocess.run(
        run_command(3, chroot, "127.0.0.6", tmp_path / "nosecret"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    (line,) = error_lines(done.stderr)
    assert line.startswith("Error: no cluster secret in KEMU_CLUSTER_SECRET:"), done.stderr
    assert zk_children(chroot, zkdata.BROKER_IDS_PATH) == ("1",)
    assert first.terminate() == 0


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its content (None for a directory)."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


def stopped_log_dir(log_dir: Path, logs: int) -> None:
    """A log dir of ``logs`` empty partition logs that was shut down cleanly."""
    for partition in range(logs):
        log = log_dir / f"kept-{partition}"
        log.mkdir(parents=True)
        for suffix in ("log", "index", "timeindex"):
            (log / f"00000000000000000000.{suffix}").write_bytes(b"")
        (log / "leader-epoch-checkpoint").write_text("0\n0\n")
    (log_dir / CLEAN_SHUTDOWN_FILE).write_bytes(b"")


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.zookeeper
@pytest.mark.timeout(180)
def test_the_loser_of_two_brokers_racing_for_one_id_leaves_its_log_dir_as_it_found_it(
    chroot: str, brokers: list[BrokerRun], tmp_path: Path
) -> None:
    """Two brokers start with one id: the one that registers second fails at its own
    registration, as Kafka's does, with Kafka's "node already exists" line and exit 1,
    and its log dir is as it found it: no meta.properties, no checkpoint, no log file
    (Kafka writes meta.properties after registerBroker; kemu also holds the rest of
    start-up's writes until then). The race is made certain: the loser is frozen after it
    passed the check for a registered id (its listener answers: it binds it next) and
    before it registered, the winner registers meanwhile, and the loser is thawed. Its
    cleanly stopped log dir stays clean: the marker is still there."""
    slow = {"zookeeper.session.timeout.ms": "30000"}  # the loser's session outlives the freeze
    loser_dir = tmp_path / "loser" / "kafka-logs"
    stopped_log_dir(loser_dir, 500)
    before = snapshot(loser_dir)
    port = free_port()
    loser = BrokerRun(
        1, chroot, "127.0.0.3", loser_dir, tmp_path / "loser.out", config=slow, port=port
    )
    brokers.append(loser)
    loser.launch()
    deadline = time.monotonic() + READY_TIMEOUT
    while True:  # polling the child's listener: it binds it once it passed the check
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.3", port)) == 0:
                break
        assert loser.alive, loser.output[-4000:]
        assert time.monotonic() < deadline, loser.output[-4000:]
        time.sleep(0.005)
    loser.freeze()
    assert zk_read(chroot, zkdata.broker_path(BrokerId(1))) is None, "registered too soon"

    (winner,) = start_brokers(brokers, chroot, tmp_path, ids=(1,))
    registration = zk_read(chroot, zkdata.broker_path(BrokerId(1)))
    assert registration is not None
    loser.thaw()
    assert loser.process is not None
    assert loser.process.wait(READY_TIMEOUT) == 1
    lines = error_lines(loser.output)
    assert len(lines) == 1, loser.output[-4000:]
    assert lines[0].startswith(
        "Error: Error while creating ephemeral at /brokers/ids/1, node already exists and owner '"
    ), loser.output[-4000:]
    assert " ready pid " not in loser.output
    assert snapshot(loser_dir) == before
    assert zk_read(chroot, zkdata.broker_path(BrokerId(1))) == registration
    assert (winner.log_dir / META_PROPERTIES).is_file()
    assert winner.terminate() == 0


@pytest.mark.slow
@pytest.mark.processes
@pytest.mark.timeout(400)
def test_brokers_on_an_ensemble_outlive_a_zookeeper_server_and_a_host_that_drops_out(
    zookeeper_ensemble: ZooKeeperEnsemble, brokers: list[BrokerRun], tmp_path: Path
) -> None:
    """Three brokers on three addresses over a 3-server ensemble: the ZooKeeper leader is
    SIGKILLed and the brokers' sessions, registrations and controller carry on, as do
    acks=all produce and consume; then one broker's host stops answering (its process
    SIGSTOPped: nothing it holds answers or sends, as a host cut off the network), its
    session expires, the controller moves its leaderships and shrinks the ISRs; when it
    answers again it registers anew and rejoins every ISR with all the records."""
    ensemble = f"{zookeeper_ensemble.hosts}/kemu"
    runs = start_brokers(brokers, ensemble, tmp_path)
    by_id = {run.broker_id: run for run in runs}
    admin = runs[0].bootstrap  # where the test asks the cluster's Metadata
    create_replicated(admin, "ensemble")
    first = [f"before-{i:02}".encode() for i in range(MESSAGES)]
    produce(runs[1].bootstrap, "ensemble", first)
    controller, _ = wait_until(
        lambda: live_brokers(admin), lambda c: c[0] in by_id and c[1] == 3, CLIENT_TIMEOUT
    )
    registrations = {
        b: zk_read(zookeeper_ensemble.hosts, f"/kemu{zkdata.broker_path(BrokerId(b))}")
        for b in by_id
    }

    # The ZooKeeper leader dies: the followers elect another, the clients' sessions
    # move to the servers left, and nothing in the cluster notices.
    leader = zookeeper_ensemble.leader()
    assert leader is not None
    leader.kill()
    wait_until(
        lambda: [s.mode for s in zookeeper_ensemble.servers if s.running],
        lambda modes: sorted(modes) == ["follower", "leader"],
        CLIENT_TIMEOUT,
    )
    second = [f"after-zk-{i:02}".encode() for i in range(MESSAGES)]
    produce(runs[2].bootstrap, "ensemble", second)
    assert consume(runs[0].bootstrap, "ensemble", 2 * MESSAGES) == sorted(first + second)
    # (waited for only because a client call may fail on a loaded machine: the
    # answer must be the same controller and every broker)
    wait_until(lambda: live_brokers(admin), lambda c: c == (controller, 3), CLIENT_TIMEOUT)
    for b in by_id:  # the same registrations: no session expired
        path = f"/kemu{zkdata.broker_path(BrokerId(b))}"
        assert zk_read(zookeeper_ensemble.hosts, path) == registrations[b]

    # A broker that is not the controller drops off the network.
    cut = next(run for run in runs if run.broker_id != controller)
    survivor = by_id[controller]
    admin = survivor.bootstrap
    cut.freeze()
    wait_until(
        lambda: live_brokers(admin),
        lambda c: c == (controller, 2),
        CLIENT_TIMEOUT,
    )
    wait_until(
        lambda: partitions(admin, "ensemble"),
        lambda p: (
            len(p) == 3
            and all(
                leader != cut.broker_id and cut.broker_id not in isr and leader in isr
                for leader, isr in p.values()
            )
        ),
        CLIENT_TIMEOUT,
    )
    third = [f"while-cut-{i:02}".encode() for i in range(MESSAGES)]
    produce(survivor.bootstrap, "ensemble", third)

    # It answers again: its session expired meanwhile, so it registers anew, and
    # catches up into every ISR.
    cut.thaw()
    wait_until(
        lambda: (live_brokers(admin), partitions(admin, "ensemble")),
        lambda s: (
            s[0] == (controller, 3)
            and len(s[1]) == 3
            and all(isr == (1, 2, 3) for _, isr in s[1].values())
        ),
        CLIENT_TIMEOUT,
    )
    path = f"/kemu{zkdata.broker_path(BrokerId(cut.broker_id))}"
    again = zk_read(zookeeper_ensemble.hosts, path)
    before = registrations[cut.broker_id]
    assert again is not None
    assert before is not None
    assert again[1] != before[1]  # a new czxid: a new broker epoch
    assert consume(cut.bootstrap, "ensemble", 3 * MESSAGES) == sorted(first + second + third)
    for run in runs:
        assert run.terminate() == 0, run.output[-4000:]


@pytest.mark.processes
@pytest.mark.parametrize(
    ("options", "status", "error"),
    [
        (
            ["--zookeeper", "embedded://127.0.0.1:1"],
            2,
            "Error: --zookeeper embedded://127.0.0.1:1: `kemu broker run` joins a ZooKeeper"
            " ensemble (HOST:PORT[,HOST:PORT...][/chroot]); an embedded store's brokers are"
            " `kemu up`'s",
        ),
        (
            ["--id", "1001"],
            2,
            "Error: --id 1001: broker.id must be equal or greater than -1 and not greater than"
            " reserved.broker.max.id (1000)",
        ),
        (
            ["--id", "-1"],
            2,
            "Error: --id -1: kemu generates no broker ids (broker.id.generation.enable): give"
            " one from 0 to reserved.broker.max.id (1000)",
        ),
        (
            ["--listeners", "SSL://127.0.0.2:0"],
            1,
            "Error: --listeners SSL://127.0.0.2:0: kemu serves PLAINTEXT only (it has no TLS"
            " and no SASL), not SSL",
        ),
        (
            ["--config", "no.such.config=1"],
            2,
            "Error: Unknown broker config name: no.such.config",
        ),
    ],
)
def test_bad_options_are_one_line_before_anything_starts(
    options: list[str], status: int, error: str, tmp_path: Path
) -> None:
    """An option kemu cannot serve ends the command before it connects to anything: one
    line, a usage (2) or start-up (1) status, no log dir."""
    args = run_command(1, "127.0.0.1:1", "127.0.0.2", tmp_path / "kafka-logs")
    for option, value in zip(options[::2], options[1::2], strict=True):
        if option in args:
            args[args.index(option) + 1] = value
        else:
            args += [option, value]
    code, stdout, stderr, _ = run_once(args)
    assert (code, stdout) == (status, "")
    assert stderr.splitlines() == [error]
    assert not (tmp_path / "kafka-logs").exists()
