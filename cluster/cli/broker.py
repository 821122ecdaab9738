"""``kemu broker stop|kill|start|pause|resume ID`` and ``kemu broker status``: break and
mend a running ``kemu up`` cluster, one broker at a time, to watch the controller react.

The command finds the cluster through its cluster file (``--cluster-file``, default
``.kemu/cluster.json``) and asks its launcher, at the file's ``control`` address, to carry
the command out (``cluster.launch.control``):

* ``stop ID``: a graceful stop, through the broker's own shutdown path (controlled
  shutdown, then its store session closed: its registration goes at once).
* ``kill ID``: a crash, with no graceful step (with ``kemu up --processes``, a SIGKILL of
  the broker's process): its registration stays until its store session expires
  (``zookeeper.session.timeout.ms``), then the controller sees it gone.
* ``start ID``: start it again with the same id, ports, log dir and config, once its old
  registration has gone; it registers with a new broker epoch.
* ``pause ID``: freeze it whole, as a long GC pause (with ``--processes``, a SIGSTOP of
  its process): it answers nothing and sends nothing, and once its session timeout has
  passed its session expires and the controller sees it gone.
* ``resume ID``: let a paused broker run on (SIGCONT): its held work runs, late; if its
  session expired meanwhile it registers again (a zombie controller resigns).
* ``status``: every broker's state, pid, endpoint and broker epoch, and the controller;
  then each running broker's ``ReplicaManager`` gauges and meter counts under Kafka's
  names (UnderReplicatedPartitions, UnderMinIsrPartitionCount, OfflineReplicaCount, ...).

It prints what was done and the cluster afterwards; bad input (an unknown broker, one
already stopped or running, no running cluster) is one line on stderr, exit 1, and changes
nothing.

``kemu broker run --id N --zookeeper ... --listeners ... --log-dir DIR`` is the other
kind: no launcher, one broker process in the foreground that joins whatever cluster its
ZooKeeper holds, as ``kafka-server-start.sh`` (``broker_run``; docs/scale-out.md).
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

import anyio

from cluster.launch.connect import DEFAULT_CLUSTER_FILE, connect_launcher, load_cluster_file
from protocol.errors import KemuError, unwrap_kemu_error
from protocol.ids import BrokerId
from protocol.launcher import (
    BrokerAction,
    BrokerCommand,
    BrokerCommandDone,
    BrokerCommandRefused,
    BrokerState,
    ClusterMetrics,
    ClusterMetricsRequest,
    LauncherStatus,
    LauncherStatusRequest,
)

__all__ = [
    "ACTIONS",
    "broker_main",
    "broker_run",
    "format_metrics",
    "format_status",
    "run_broker_command",
]

ACTIONS: Final = ("stop", "kill", "start", "pause", "resume", "status")
COMMAND_TIMEOUT: Final = 300.0  # a start may first wait out the old session, then the cluster
STATUS_TIMEOUT: Final = 30.0


class BrokerCommandError(KemuError):
    """A ``kemu broker`` command that was not carried out, printed as one line."""


def format_status(status: LauncherStatus) -> str:
    """One line per broker (state, pid, Kafka endpoint, broker epoch), then the controller."""
    lines = [f"{'BROKER':<8}{'STATE':<9}{'PID':<9}{'ENDPOINT':<22}EPOCH"]
    for b in status.brokers:
        pid = str(b.pid) if b.state in (BrokerState.RUNNING, BrokerState.PAUSED) else "-"
        epoch = str(b.broker_epoch) if b.broker_epoch >= 0 else "-"
        endpoint = f"{b.host}:{b.port}"
        lines.append(f"{b.broker_id:<8}{b.state.value:<9}{pid:<9}{endpoint:<22}{epoch}")
    controller = f"broker {status.controller_id}" if status.controller_id >= 0 else "none"
    lines.append(f"controller: {controller}")
    return "\n".join(lines)


def format_metrics(metrics: ClusterMetrics) -> str:
    """Each running broker's ``ReplicaManager`` gauges and meter counts, under Kafka's
    names (a meter's count as ``<Name>.count``), one line per broker."""
    lines = ["replica manager (kafka.server:type=ReplicaManager):"]
    for view in metrics.brokers:
        replica = view.replica_manager
        if replica is None:
            lines.append(f"  broker {view.broker_id}: no answer")
            continue
        shown = [f"{name}={value}" for name, value in replica.gauges]
        shown += [f"{name}.count={count}" for name, count in replica.meters]
        lines.append(f"  broker {view.broker_id}: " + " ".join(shown))
    return "\n".join(lines)


async def run_broker_command(
    action: str, broker_id: int | None, *, address: str, secret: bytes, out: TextIO
) -> None:
    """Send one command (or a status request) to the launcher at ``address`` and print
    its answer; ``KemuError`` when it was not carried out."""
    with unwrap_kemu_error():  # connect_launcher's task group wraps what fails
        async with connect_launcher(address, secret=secret) as ask:
            if action == "status":
                reply = await ask(LauncherStatusRequest(), timeout=STATUS_TIMEOUT)
                if not isinstance(reply, LauncherStatus):
                    raise BrokerCommandError(f"unexpected answer from the launcher: {reply!r}")
                metrics = await ask(ClusterMetricsRequest(), timeout=STATUS_TIMEOUT)
                if not isinstance(metrics, ClusterMetrics):
                    raise BrokerCommandError(f"unexpected answer from the launcher: {metrics!r}")
                out.write(format_status(reply) + "\n" + format_metrics(metrics) + "\n")
                return
            assert broker_id is not None
            command = BrokerCommand(action=BrokerAction(action), broker_id=BrokerId(broker_id))
            reply = await ask(command, timeout=COMMAND_TIMEOUT)
            match reply:
                case BrokerCommandDone(note=note, status=status):
                    out.write(f"{note[:1].upper()}{note[1:]}.\n{format_status(status)}\n")
                case BrokerCommandRefused(reason=reason):
                    raise BrokerCommandError(reason)
                case _:
                    raise BrokerCommandError(f"unexpected answer from the launcher: {reply!r}")


def broker_main(
    action: str,
    broker_id: int | None,
    *,
    cluster_file: str | None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``kemu broker``: returns the exit status; errors are one line on ``err``."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        path = Path(cluster_file) if cluster_file else DEFAULT_CLUSTER_FILE
        if not path.exists():
            raise BrokerCommandError(
                f"no cluster file at {path}: start a cluster with `kemu up`, or give --cluster-file"
            )
        info = load_cluster_file(path)
        if not info.control:
            raise BrokerCommandError(
                f"the cluster in {path} has no control endpoint"
                " (its `kemu up` is older than `kemu broker`)"
            )
        secret = info.secret_bytes
        anyio.run(
            lambda: run_broker_command(
                action, broker_id, address=info.control, secret=secret, out=out
            )
        )
    except KemuError as exc:
        err.write(f"Error: {exc}\n")
        return 1
    return 0


def broker_run(
    *,
    broker_id: int,
    zookeeper: str,
    listeners: str,
    advertised_listeners: str | None,
    log_dir: str,
    config: Mapping[str, str],
) -> int:
    """``kemu broker run``: one broker in this process, joining the cluster ``zookeeper``
    holds, until SIGTERM (controlled shutdown, then its session closed: exit 0) or SIGINT.

    The Kafka listener binds where ``listeners`` says; the broker's internal port (kemu's
    inter-broker transport) binds on the same host, on a free port, and is registered in
    ``/brokers/ids/<id>`` (``cluster.launch.directory``), where the other brokers find it.
    Every broker of the cluster proves the same secret on those ports: ``SECRET_ENV``
    (hex) in the environment of each. Bad input raises ``UsageError`` or ``KemuError``."""
    from actors.admin import BrokerConfig, ConfigError
    from cluster.cli.args import UsageError
    from cluster.cli.listeners import check_routable, loopback, parse_advertised, parse_listener
    from cluster.launch.broker_process import SECRET_ENV, BrokerProcessSpec, run_broker_process
    from cluster.launch.connect import EMBEDDED_SCHEME

    if zookeeper.startswith(EMBEDDED_SCHEME):
        raise UsageError(
            f"--zookeeper {zookeeper}: `kemu broker run` joins a ZooKeeper ensemble"
            " (HOST:PORT[,HOST:PORT...][/chroot]); an embedded store's brokers are `kemu up`'s"
        )
    try:
        broker_config = BrokerConfig.from_overrides(dict(config))
    except ConfigError as exc:
        raise UsageError(str(exc).split(". Known names")[0]) from None
    if broker_id < 0:
        raise UsageError(
            f"--id {broker_id}: kemu generates no broker ids (broker.id.generation.enable):"
            f" give one from 0 to reserved.broker.max.id ({broker_config.reserved_broker_max_id})"
        )
    if broker_id > broker_config.reserved_broker_max_id:
        # KafkaConfig.validateValues, for a broker.id given in the config.
        raise UsageError(
            f"--id {broker_id}: broker.id must be equal or greater than -1 and not greater"
            f" than reserved.broker.max.id ({broker_config.reserved_broker_max_id})"
        )
    listener = parse_listener("--listeners", listeners)
    advertised = None if advertised_listeners is None else parse_advertised(advertised_listeners)
    if advertised is None:
        check_routable("--listeners", listeners, listener.host)
    if not loopback(listener.host):
        print(
            f"kemu: warning: --listeners {listeners}: the Kafka listener is not on loopback,"
            " and anyone who can reach it can use it (PLAINTEXT, no authentication)",
            file=sys.stderr,
            flush=True,
        )
    secret = _run_secret(os.environ.pop(SECRET_ENV, None), SECRET_ENV)
    advertised_host = advertised.host if advertised is not None else None
    if advertised_host is None and listener.host == "":  # KafkaServer.createBrokerInfo
        advertised_host = socket.getfqdn()
    spec = BrokerProcessSpec(
        broker_id=broker_id,
        store=zookeeper,
        network_port=0,
        peers={},
        port=listener.port,
        log_dir=Path(log_dir),
        host=listener.host,
        listener_host=listener.host,
        advertised_host=advertised_host,
        advertised_port=advertised.port if advertised is not None else 0,
        config=dict(config),
        seed=secrets.randbits(63),  # a real broker: its cluster id is fresh, as Kafka's
        secret=secret,
        discover=True,
    )
    return anyio.run(lambda: run_broker_process(spec), backend_options={"use_uvloop": True})


def _run_secret(value: str | None, variable: str) -> bytes:
    """The cluster's secret from ``variable`` (hex, at least 16 bytes); ``KemuError``."""
    try:
        secret = bytes.fromhex(value or "")
    except ValueError:
        secret = b""
    if len(secret) < 16:
        raise KemuError(
            f"no cluster secret in {variable}: every broker of a `kemu broker run` cluster"
            " proves the same one to the others; give each the same 16 bytes or more, in"
            f" hex, e.g. export {variable}=$(openssl rand -hex 32)"
        )
    return secret
