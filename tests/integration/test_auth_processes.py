"""Only the owner of a ``kemu up --processes`` can drive it: another local process without
the cluster's secret is refused (and traced) on the control endpoint, the store server
and a broker's internal port, and nothing it sent is carried out; the owner's commands
still work; the cluster file is private and holds the secret; the secret is on no
command line."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from cluster.launch.connect import ClusterFile, ClusterFileError, open_store, parse_host_port
from cluster.network.auth import CHALLENGE_BYTES, new_secret
from protocol.base import ActorRef
from protocol.broker import BrokerStatusRequest
from protocol.codec import frame
from protocol.envelope import Envelope, EnvelopeKind
from protocol.ids import BrokerId
from protocol.launcher import BrokerAction, BrokerCommand
from protocol.store import StoreCreate, StoreExpireSession, StoreOpenSession
from tests.support.kemu_commands import REPO, KemuUp, alive, kemu, parse_status

pytestmark = [pytest.mark.processes, pytest.mark.slow]  # kemu up and commands in processes


@pytest.fixture
def up(tmp_path: Path) -> Iterator[KemuUp]:
    """``kemu up --processes`` on the embedded store, tracing into ``trace.jsonl``."""
    launched = KemuUp(tmp_path, "--processes", "--trace", str(tmp_path / "trace.jsonl"))
    try:
        launched.start()
        yield launched
    finally:
        launched.kill()


def _ask(src: str, dst: ActorRef, payload: object, corr: int) -> bytes:
    """A well-formed frame of an ask with a self-declared source."""
    return frame(
        Envelope(
            src=ActorRef(src, "forger"),
            dst=dst,
            corr=corr,
            kind=EnvelopeKind.ASK,
            payload=payload,  # type: ignore[arg-type]
        )
    )


def _forge(address: tuple[str, int], frames: bytes) -> bytes:
    """Connect without the secret, read the challenge, write ``frames`` in its place;
    everything the endpoint writes back until it closes the connection."""
    with socket.create_connection(address, timeout=10) as sock:
        received = b""
        while len(received) < CHALLENGE_BYTES:
            chunk = sock.recv(4096)
            assert chunk, "closed before its challenge"
            received += chunk
        sock.sendall(frames)
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    return received


def _trace(tmp: Path) -> list[dict[str, object]]:
    lines = (tmp / "trace.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def _refusals(tmp: Path, node: str) -> list[dict[str, object]]:
    return [
        e
        for e in _trace(tmp)
        if e.get("kind") == "error" and e.get("type") == "auth_refused" and e.get("node") == node
    ]


def _network_port(pid: int) -> int:
    """A broker process's internal port, from its command line (``--network-port``)."""
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return int(args[args.index(b"--network-port") + 1])


def test_the_cluster_file_is_private_and_the_secret_on_no_command_line(up: KemuUp) -> None:
    """The cluster file has mode 0600 and a 32-byte secret; no broker process's command
    line (which every user can read) carries it."""
    mode = stat.S_IMODE(up.cluster_file.stat().st_mode)
    assert mode == 0o600, oct(mode)
    info = ClusterFile.read(up.cluster_file)
    assert len(info.secret_bytes) == 32
    for broker in info.brokers:
        assert info.secret.encode() not in Path(f"/proc/{broker.pid}/cmdline").read_bytes()
    assert info.secret.encode() not in Path(f"/proc/{info.pid}/cmdline").read_bytes()


def test_a_kill_without_the_secret_leaves_the_broker_running(up: KemuUp, tmp_path: Path) -> None:
    """``kemu broker kill`` with a cluster file of another secret is refused in one line;
    a raw connection writing a forged kill is closed; the broker's process still runs,
    the refusals are traced, and the owner's ``kemu broker status`` still works."""
    info = ClusterFile.read(up.cluster_file)
    victim = info.brokers[1]
    forged = tmp_path / "forged.json"
    dataclasses.replace(info, secret=new_secret().hex()).write(forged)
    refused = kemu("broker", "kill", "1", "--cluster-file", str(forged))
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert len(refused.stderr.splitlines()) == 1
    assert "refused us" in refused.stderr
    kill = BrokerCommand(action=BrokerAction.KILL, broker_id=BrokerId(1))
    echoed = _forge(
        parse_host_port(info.control),
        _ask("kemu-broker-1", ActorRef("launcher", "control"), kill, 1),
    )
    assert len(echoed) == CHALLENGE_BYTES  # the challenge, then nothing: no reply
    assert alive(victim.pid)
    status = kemu("broker", "status", "--cluster-file", str(up.cluster_file))
    assert status.returncode == 0, status.stderr
    rows, _ = parse_status(status.stdout)
    assert {b: r.state for b, r in rows.items()} == {0: "running", 1: "running", 2: "running"}
    assert up.stop() == 0
    assert len(_refusals(tmp_path, "launcher")) == 2


def test_a_raw_store_connection_cannot_create_or_expire(up: KemuUp, tmp_path: Path) -> None:
    """Frames written to the store server without the handshake (open a session, create a
    znode, expire every low session id) are not acted on: the connection is closed, the
    znode is absent and every broker stays registered; a store client with a wrong secret
    is refused at once; the owner's ``kemu zk`` and a bare ``kemu topics --zookeeper
    embedded://...`` still work."""
    store = up.store
    address = parse_host_port(store.removeprefix("embedded://"))
    target = ActorRef("store", "store")
    frames = _ask(
        "evil",
        target,
        StoreOpenSession(timeout=5.0, name="evil", owner_node="evil", owner_actor="x"),
        1,
    )
    for sid in range(0, 32):
        frames += _ask("evil", target, StoreCreate(session_id=sid, path="/forged"), 2 + sid)
        frames += _ask("evil", target, StoreExpireSession(session_id=sid), 100 + sid)
    assert len(_forge(address, frames)) == CHALLENGE_BYTES

    async def wrong_secret() -> None:
        async with open_store(store, secret=new_secret()):
            pytest.fail("a store client with a wrong secret got in")

    with pytest.raises(ClusterFileError, match="refused us"):
        anyio.run(wrong_secret)
    listing = kemu("zk", "ls", "/", "--cluster-file", str(up.cluster_file))
    assert listing.returncode == 0, listing.stderr
    assert "forged" not in listing.stdout.split()
    ids = kemu("zk", "ls", "/brokers/ids", "--cluster-file", str(up.cluster_file))
    assert ids.stdout.split() == ["0", "1", "2"]
    bare = kemu("topics", "--zookeeper", store, "--list")  # found through the run directory
    assert bare.returncode == 0, bare.stderr
    assert up.stop() == 0
    assert len(_refusals(tmp_path, "store")) == 2


def test_a_forged_inter_broker_message_is_not_delivered(up: KemuUp) -> None:
    """A status request written to a broker's internal port without the handshake gets
    no answer: the connection is closed after the challenge; the broker runs on and logs
    the refusal."""
    info = ClusterFile.read(up.cluster_file)
    broker = info.brokers[2]
    port = _network_port(broker.pid)
    request = _ask("broker-0", ActorRef("broker-2", "broker"), BrokerStatusRequest(), 1)
    assert len(_forge(("127.0.0.1", port), request)) == CHALLENGE_BYTES
    assert alive(broker.pid)
    assert up.stop() == 0
    assert "auth_refused" in up.output
    assert "node=broker-2" in up.output


def test_a_bare_embedded_address_without_its_cluster_file_fails_in_one_line(
    up: KemuUp, tmp_path: Path
) -> None:
    """Without a cluster file naming that store (none in the working directory, none in
    the run directory), ``--zookeeper embedded://...`` says where the secret comes from."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "topics", "--zookeeper", up.store, "--list"],
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(elsewhere)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert "asks for its cluster's secret" in line
    assert "--cluster-file" in line
