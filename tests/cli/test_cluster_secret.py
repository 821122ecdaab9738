"""Where a cluster's secret lives and how a command finds it: the cluster file is written
mode 0600 whatever the umask, and a command given ``embedded://HOST:PORT`` takes the secret
from the cluster file naming that store (given, default, or noted in the run directory)
or fails in one line saying where it comes from."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from actors.runtime.clock import VirtualClock
from cluster.launch.broker_process import SECRET_ENV, inherited_secret
from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.connect import (
    DEFAULT_CLUSTER_FILE,
    ClusterFile,
    ClusterFileError,
    register_store,
    run_directory,
    store_secret,
    unregister_store,
)
from cluster.network.auth import new_secret, seeded_secret
from protocol.errors import KemuError

STORE = "embedded://127.0.0.1:41234"


def _file(store: str, secret: bytes) -> ClusterFile:
    return ClusterFile(
        store=store, brokers=(), controller=-1, cluster_id="", pid=os.getpid(), secret=secret.hex()
    )


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private run directory of this test's own, and a working directory without a
    default cluster file."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return run_directory()


def test_the_cluster_file_is_written_0600_even_with_an_open_umask(tmp_path: Path) -> None:
    """With umask 000, a new cluster file and one replacing a world-readable file both end
    with mode 0600, holding the secret, with no temporary file left behind."""
    path = tmp_path / "kemu" / "cluster.json"
    secret = new_secret()
    old = os.umask(0)
    try:
        _file(STORE, secret).write(path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.chmod(0o644)
        _file(STORE, secret).write(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ClusterFile.read(path).secret_bytes == secret
    assert sorted(p.name for p in path.parent.iterdir()) == ["cluster.json"]


def test_a_given_cluster_file_must_name_the_store(run_dir: Path, tmp_path: Path) -> None:
    """``--cluster-file`` of that store gives its secret; of another store, an error naming
    the file and its store; a missing one, an error saying where the secret comes from."""
    secret = new_secret()
    mine = tmp_path / "mine.json"
    _file(STORE, secret).write(mine)
    assert store_secret(STORE, mine) == secret
    assert store_secret(STORE.replace("127.0.0.1", "localhost"), mine) == secret
    other = tmp_path / "other.json"
    _file("embedded://127.0.0.1:1", new_secret()).write(other)
    with pytest.raises(ClusterFileError, match=r"other.json is another cluster's"):
        store_secret(STORE, other)
    with pytest.raises(ClusterFileError, match=r"asks for its cluster's secret.*--cluster-file"):
        store_secret(STORE, tmp_path / "missing.json")


def test_a_bare_address_is_found_through_the_run_directory(run_dir: Path, tmp_path: Path) -> None:
    """Without ``--cluster-file`` and without a default cluster file, the cluster file the
    run directory notes for the address gives the secret; once unregistered, the command
    fails in one line naming the default cluster file."""
    secret = new_secret()
    elsewhere = tmp_path / "elsewhere.json"
    _file(STORE, secret).write(elsewhere)
    with pytest.raises(ClusterFileError, match=f"there is no {DEFAULT_CLUSTER_FILE}"):
        store_secret(STORE)
    register_store(STORE, elsewhere)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert store_secret(STORE) == secret
    unregister_store(STORE, elsewhere)
    with pytest.raises(ClusterFileError, match="asks for its cluster's secret"):
        store_secret(STORE)


def test_registering_a_store_drops_the_notes_of_clusters_that_are_gone(
    run_dir: Path, tmp_path: Path
) -> None:
    """A killed ``kemu up`` leaves its note behind: the next registration removes it (its
    launcher is dead, or its cluster file gone) and keeps the live ones."""
    live = tmp_path / "live.json"
    _file("embedded://127.0.0.1:1", new_secret()).write(live)
    register_store("embedded://127.0.0.1:1", live)
    dead = tmp_path / "dead.json"
    gone = dataclasses.replace(_file("embedded://127.0.0.1:2", new_secret()), pid=_reaped_pid())
    gone.write(dead)
    register_store("embedded://127.0.0.1:2", dead)
    missing = tmp_path / "missing.json"
    _file("embedded://127.0.0.1:3", new_secret()).write(missing)
    register_store("embedded://127.0.0.1:3", missing)
    missing.unlink()
    register_store(STORE, live)
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "embedded_127.0.0.1_1.json",
        "embedded_127.0.0.1_41234.json",
    ]


def _reaped_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_run_directory_others_can_write_is_ignored(run_dir: Path, tmp_path: Path) -> None:
    """A note in a run directory that is not private (group- or world-accessible) is not
    trusted: someone else could have pointed it at a file of theirs."""
    elsewhere = tmp_path / "elsewhere.json"
    _file(STORE, new_secret()).write(elsewhere)
    register_store(STORE, elsewhere)
    run_dir.chmod(0o777)
    try:
        with pytest.raises(ClusterFileError, match="asks for its cluster's secret"):
            store_secret(STORE)
    finally:
        run_dir.chmod(0o700)


def test_the_default_cluster_file_of_the_store_wins(run_dir: Path) -> None:
    """A default cluster file that names the store gives its secret."""
    secret = new_secret()
    _file(STORE, secret).write(DEFAULT_CLUSTER_FILE)
    assert store_secret(STORE) == secret


def test_a_deterministic_cluster_derives_its_secret_from_the_seed() -> None:
    """On a virtual clock the secret is a function of the seed (the same run twice is the
    same run); on the real clock each cluster draws a new one."""
    spec = ClusterSpec(seed=42)
    assert Cluster(spec, clock=VirtualClock()).secret == seeded_secret(42)
    assert seeded_secret(42) != seeded_secret(43)
    assert Cluster(spec).secret != Cluster(spec).secret
    assert len(Cluster(spec).secret) == 32


def test_a_broker_process_takes_the_secret_out_of_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher's secret is read once and removed from the environment (a process the
    broker starts does not inherit it); without one, a clear error."""
    secret = new_secret()
    monkeypatch.setenv(SECRET_ENV, secret.hex())
    assert inherited_secret() == secret
    assert SECRET_ENV not in os.environ
    with pytest.raises(KemuError, match="kemu up --processes"):
        inherited_secret()
