"""``kemu broker stop|kill|start|status`` against a cluster running in this process, through
its launcher's real control endpoint (loopback TCP): a killed broker is seen gone once its
session expires, a stopped one at once, a started one registers again with a higher
broker epoch; the cluster file follows; bad input is one line and changes nothing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from actors.runtime.tracer import MemorySink, Tracer
from cluster.cli.broker import BrokerCommandError, broker_main, run_broker_command
from cluster.cli.main import build_parser
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.connect import ClusterFile
from cluster.launch.control import ClusterLauncher, refusal
from cluster.network.auth import new_secret
from protocol import zkdata
from protocol.ids import BrokerId
from protocol.launcher import BrokerAction, BrokerCommand, BrokerState
from tests.support.hosting import hosted_fixture
from tests.support.kemu_commands import Row, parse_status
from tests.support.launching import launched_cluster
from tests.support.waiting import eventually

# As ``kemu up`` runs a cluster in one process: on a loop that can pause a broker.
on_a_freezable_loop = pytest.mark.asyncio(loop_factories=["freezable"])


@dataclass
class Launched:
    """A 3-broker cluster in this process with its launcher's control endpoint and
    cluster file, as ``kemu up`` runs them."""

    cluster: Cluster
    launcher: ClusterLauncher
    address: str
    cluster_file: Path
    sink: MemorySink

    async def broker(self, action: str, broker_id: int | None = None) -> str:
        out = io.StringIO()
        await run_broker_command(
            action, broker_id, address=self.address, secret=self.cluster.secret, out=out
        )
        return out.getvalue()

    async def registered(self) -> dict[int, int]:
        """``/brokers/ids`` as the store has it: broker id -> its znode's czxid."""
        assert self.cluster.store is not None
        session = await self.cluster.store.open_session(timeout=10.0, name="probe")
        try:
            found = {}
            for child in await session.children(zkdata.BROKER_IDS_PATH):
                stat = await session.exists(f"{zkdata.BROKER_IDS_PATH}/{child}")
                if stat is not None:
                    found[int(child)] = stat.czxid
            return found
        finally:
            await session.close()
            session.events.close()

    def file(self) -> ClusterFile:
        return ClusterFile.read(self.cluster_file)


async def _launched(tmp_path: Path, session_timeout_ms: int) -> AsyncIterator[Launched]:
    tracer = Tracer()
    sink = MemorySink()
    tracer.add_sink(sink)
    spec = ClusterSpec(
        brokers=3,
        base_port=0,
        log_dir=tmp_path / "logs",
        config={"zookeeper.session.timeout.ms": str(session_timeout_ms)},
    )
    cluster_file = tmp_path / "cluster.json"
    async with launched_cluster(spec, tracer, cluster_file) as (cluster, launcher, publisher):
        yield Launched(cluster, launcher, publisher.control, cluster_file, sink)


@hosted_fixture()
async def launched(tmp_path: Path) -> AsyncIterator[Launched]:
    """Session timeout 2 s: a killed broker is seen gone quickly."""
    async for running in _launched(tmp_path, 2000):
        yield running


@hosted_fixture()
async def long_sessions(tmp_path: Path) -> AsyncIterator[Launched]:
    """Session timeout 30 s: a broker seen gone at once was not left to expire."""
    async for running in _launched(tmp_path, 30_000):
        yield running


@pytest.mark.slow  # waits out a 2 s store session
@on_a_freezable_loop
async def test_kill_the_controller_then_start_it_again(launched: Launched) -> None:
    """Killing the controller's broker leaves its registration until its session expires;
    then another broker becomes controller. Starting it again registers it with a higher
    broker epoch, every running broker sees it, and the cluster file follows each step."""
    first, controller = parse_status(await launched.broker("status"))
    assert sorted(first) == [0, 1, 2]
    assert all(row.state == "running" for row in first.values())
    assert controller in first
    before = await launched.registered()
    assert {b: str(e) for b, e in before.items()} == {b: r.epoch for b, r in first.items()}

    out = await launched.broker("kill", controller)
    assert out.splitlines()[0] == (
        f"Broker {controller} killed (crashed, no graceful step): its session expires after"
        " 2s, then the controller sees it gone."
    )
    rows, _ = parse_status(out)
    assert rows[controller].state == "killed"
    assert rows[controller].epoch == "-"
    crashed = launched.sink.of("event", "node_crashed")
    assert [e.node for e in crashed] == [f"broker-{controller}"]
    entries = {b.id: b for b in launched.file().brokers}
    assert not entries[controller].running
    assert all(entries[b].running for b in entries if b != controller)
    assert f":{entries[controller].port}" not in launched.file().bootstrap_servers

    others = sorted(set(first) - {controller})
    await eventually(launched.registered, until=lambda r: sorted(r) == others, timeout=20)

    async def new_controller() -> int:
        return parse_status(await launched.broker("status"))[1]

    moved_to = await eventually(new_controller, until=lambda c: c in others, timeout=20)
    assert launched.file().controller == moved_to  # a status rewrites the file too

    out = await launched.broker("start", controller)
    epoch = int(
        out.splitlines()[0].removeprefix(f"Broker {controller} started (broker epoch ")[:-2]
    )
    assert epoch > before[controller]
    assert (await launched.registered())[controller] == epoch
    rows, _ = parse_status(out)
    assert rows[controller] == Row(
        "running", str(os.getpid()), first[controller].endpoint, str(epoch)
    )
    for broker_id in first:  # the start returned once every broker knew of it
        status = await launched.cluster.status(broker_id)
        assert status is not None
        assert sorted(status.live_brokers) == [0, 1, 2]
    assert all(b.running for b in launched.file().brokers)
    assert not launched.sink.of("event", "broker_command_refused")


@on_a_freezable_loop
async def test_stop_is_graceful_and_the_controller_moves_at_once(long_sessions: Launched) -> None:
    """A stopped broker runs its graceful steps and closes its session: with 30 s sessions,
    its registration is gone as the command returns and, if it was the controller, another
    broker already leads. Started again, it registers with a higher broker epoch."""
    launched = long_sessions
    _, controller = parse_status(await launched.broker("status"))
    before = await launched.registered()

    with anyio.fail_after(10):  # far less than the session timeout
        out = await launched.broker("stop", controller)
    assert out.splitlines()[0] == f"Broker {controller} stopped (graceful shutdown)."
    rows, new_controller = parse_status(out)
    assert rows[controller].state == "stopped"
    assert new_controller not in (controller, -1)
    assert controller not in await launched.registered()
    assert [e.node for e in launched.sink.of("event", "node_stopped")] == [f"broker-{controller}"]
    assert not launched.sink.of("event", "node_crashed")
    assert not next(b for b in launched.file().brokers if b.id == controller).running

    out = await launched.broker("start", controller)
    rows, _ = parse_status(out)
    assert rows[controller].state == "running"
    assert int(rows[controller].epoch) > before[controller]
    assert (await launched.registered())[controller] == int(rows[controller].epoch)


@on_a_freezable_loop
async def test_bad_commands_are_refused_and_change_nothing(launched: Launched) -> None:
    """An unknown broker, starting a running one, stopping or killing one that is down:
    one line each, and neither the brokers, their registrations nor the file change."""
    await launched.broker("stop", 1)
    registered = await launched.registered()
    states = dict(launched.launcher.broker_states())
    file_bytes = launched.cluster_file.read_bytes()
    expected = {
        ("kill", 7): "no broker 7 in this cluster (its brokers are 0, 1, 2)",
        ("stop", -1): "no broker -1 in this cluster (its brokers are 0, 1, 2)",
        ("start", 0): "broker 0 is already running",
        ("stop", 1): "broker 1 is not running (stopped)",
        ("kill", 1): "broker 1 is not running (stopped)",
    }
    for (action, broker_id), reason in expected.items():
        with pytest.raises(BrokerCommandError) as refused:
            await launched.broker(action, broker_id)
        assert str(refused.value) == reason
    assert await launched.registered() == registered
    assert launched.launcher.broker_states() == states
    assert launched.cluster_file.read_bytes() == file_bytes
    assert [e.fields["reason"] for e in launched.sink.of("event", "broker_command_refused")] == [
        *expected.values()
    ]


@on_a_freezable_loop
async def test_a_start_that_fails_is_one_line_and_leaves_the_broker_down(
    launched: Launched, tmp_path: Path
) -> None:
    """A broker whose log dir cannot be opened does not start: the command says why in one
    line, the broker stays stopped and unregistered; once the dir is usable, it starts."""
    await launched.broker("stop", 2)
    log_dir = tmp_path / "logs" / "broker-2"
    moved = log_dir.rename(tmp_path / "broker-2.moved")
    log_dir.write_text("not a directory")
    file_bytes = launched.cluster_file.read_bytes()
    with pytest.raises(BrokerCommandError) as failed:
        await launched.broker("start", 2)
    assert str(failed.value).startswith(
        "broker 2 did not start: none of the specified log dirs can be created or opened:"
        f" {log_dir}"
    )
    assert launched.launcher.broker_states()[2] is BrokerState.STOPPED
    assert sorted(await launched.registered()) == [0, 1]
    assert launched.cluster_file.read_bytes() == file_bytes

    log_dir.unlink()
    moved.rename(log_dir)
    rows, _ = parse_status(await launched.broker("start", 2))
    assert rows[2].state == "running"
    assert sorted(await launched.registered()) == [0, 1, 2]


def test_refusal_rules() -> None:
    """Stop and kill need a running broker, start a down one; any command needs a known
    broker and a cluster that is not stopping."""
    states = {0: BrokerState.RUNNING, 1: BrokerState.KILLED, 2: BrokerState.EXITED}

    def why(action: BrokerAction, broker: int, *, stopping: bool = False) -> str | None:
        command = BrokerCommand(action=action, broker_id=BrokerId(broker))
        return refusal(command, states, stopping=stopping)

    assert why(BrokerAction.STOP, 0) is None
    assert why(BrokerAction.KILL, 0) is None
    assert why(BrokerAction.START, 1) is None
    assert why(BrokerAction.START, 2) is None
    assert why(BrokerAction.KILL, 2) == "broker 2 is not running (exited)"
    assert why(BrokerAction.START, 0) == "broker 0 is already running"
    assert why(BrokerAction.START, 3) == "no broker 3 in this cluster (its brokers are 0, 1, 2)"
    assert why(BrokerAction.STOP, 0, stopping=True) == "the cluster is stopping"
    assert why(BrokerAction.PAUSE, 0) is None
    assert why(BrokerAction.RESUME, 0) == "broker 0 is not paused (running)"
    assert why(BrokerAction.PAUSE, 1) == "broker 1 is not running (killed)"
    states[0] = BrokerState.PAUSED
    assert why(BrokerAction.RESUME, 0) is None
    assert why(BrokerAction.KILL, 0) is None
    assert why(BrokerAction.PAUSE, 0) == "broker 0 is already paused"
    assert why(BrokerAction.STOP, 0) == "broker 0 is paused: resume it before stopping it"
    assert why(BrokerAction.START, 0) == "broker 0 is already running (paused)"


@pytest.mark.slow  # waits out a 2 s store session
@on_a_freezable_loop
async def test_pause_the_controller_past_its_session_then_resume_it(launched: Launched) -> None:
    """A paused controller answers nothing: its session expires (2 s here), another broker
    becomes controller, the cluster file stops offering it. Resumed, it learns its session
    is gone, resigns, registers again with a higher broker epoch, and the brokers agree."""
    first, controller = parse_status(await launched.broker("status"))
    before = await launched.registered()
    out = await launched.broker("pause", controller)
    assert out.splitlines()[0] == (
        f"Broker {controller} paused (frozen whole: it answers nothing and sends nothing);"
        " its session expires after 2s unless it is resumed first."
    )
    rows, _ = parse_status(out)
    assert rows[controller].state == "paused"
    assert rows[controller].pid == str(os.getpid())
    entries = {b.id: b for b in launched.file().brokers}
    assert not entries[controller].running  # clients are not sent to a frozen broker
    with pytest.raises(BrokerCommandError, match="is paused: resume it before stopping it"):
        await launched.broker("stop", controller)

    others = sorted(set(first) - {controller})
    await eventually(launched.registered, until=lambda r: sorted(r) == others, timeout=20)

    async def new_controller() -> int:
        return parse_status(await launched.broker("status"))[1]

    await eventually(new_controller, until=lambda c: c in others, timeout=20)

    out = await launched.broker("resume", controller)
    assert out.splitlines()[0] == f"Broker {controller} resumed."
    rows, _ = parse_status(out)
    assert all(row.state == "running" for row in rows.values())
    again = await eventually(launched.registered, until=lambda r: controller in r, timeout=20)
    assert again[controller] > before[controller]
    resigned = launched.sink.of("event", "controller_resigned")
    assert [e.node for e in resigned] == [f"broker-{controller}"]


def _finished_child() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _write(path: Path, *, pid: int, control: str) -> None:
    ClusterFile(
        store="",
        brokers=(),
        controller=-1,
        cluster_id="",
        pid=pid,
        control=control,
        secret=new_secret().hex(),
    ).write(path)


def test_without_a_running_cluster_each_command_fails_with_one_line(tmp_path: Path) -> None:
    """No cluster file, a stale one (its launcher is gone), one without a control
    endpoint, one whose endpoint does not answer: one line on stderr, exit 1."""
    missing = tmp_path / "missing.json"
    stale = tmp_path / "stale.json"
    _write(stale, pid=_finished_child(), control="127.0.0.1:1")
    old = tmp_path / "old.json"
    _write(old, pid=os.getpid(), control="")
    closed = tmp_path / "closed.json"
    _write(closed, pid=os.getpid(), control="127.0.0.1:1")
    cases = {
        missing: f"no cluster file at {missing}: start a cluster with `kemu up`, or give"
        " --cluster-file",
        stale: f"the cluster in {stale} is not running (process ",
        old: f"the cluster in {old} has no control endpoint",
        closed: "the launcher's control endpoint 127.0.0.1:1 does not answer: ",
    }
    for path, message in cases.items():
        for action, broker_id in (("kill", 0), ("status", None)):
            out, err = io.StringIO(), io.StringIO()
            rc = broker_main(action, broker_id, cluster_file=str(path), out=out, err=err)
            assert rc == 1
            assert out.getvalue() == ""
            assert err.getvalue().startswith(f"Error: {message}")
            assert err.getvalue().count("\n") == 1


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kemu broker`` takes an action, a broker id for stop/kill/start and
    ``--cluster-file``; a missing or non-numeric id is a usage error (exit 2)."""
    # The parser and the command's function, not main(): main() configures the process's
    # logging once, onto whatever stderr is then (here, capsys's).
    parser = build_parser()
    missing = tmp_path / "nope.json"
    for argv in (["status"], ["kill", "2"]):
        args = parser.parse_args(["broker", *argv, "--cluster-file", str(missing)])
        assert args.func(args) == 1
    err = capsys.readouterr().err
    assert err.count(f"Error: no cluster file at {missing}") == 2
    for argv in (["broker", "kill"], ["broker", "start", "one"], ["broker", "restart", "1"]):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(argv)
        assert exited.value.code == 2
    capsys.readouterr()
