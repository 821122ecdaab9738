"""Messages between the ``kemu broker`` command and a running ``kemu up`` (its launcher).

``kemu up`` serves a small control endpoint on loopback TCP (its address is in the cluster
file). ``kemu broker stop|kill|start ID`` sends one ``BrokerCommand`` and gets either
``BrokerCommandDone`` (what was done, and the cluster as it is now) or
``BrokerCommandRefused`` (bad input: nothing was changed). ``kemu broker status`` sends
``LauncherStatusRequest`` and gets a ``LauncherStatus``. ``kemu top`` sends
``ClusterViewRequest`` each refresh and gets a ``ClusterView``: what it shows that the
metadata store does not hold. ``ClusterMetricsRequest`` gets every running broker's metrics
under Kafka's names (``ClusterMetrics``), as ``kemu broker status`` shows them and the
launcher's Prometheus endpoint serves them.
"""

from __future__ import annotations

from enum import Enum

import msgspec

from protocol.base import Message
from protocol.broker import BrokerMetrics
from protocol.controller import ControllerQueue
from protocol.ids import BrokerEpoch, BrokerId

__all__ = [
    "BrokerAction",
    "BrokerCommand",
    "BrokerCommandDone",
    "BrokerCommandRefused",
    "BrokerMetricsView",
    "BrokerState",
    "ClusterMetrics",
    "ClusterMetricsRequest",
    "ClusterView",
    "ClusterViewRequest",
    "LaunchedBroker",
    "LauncherStatus",
    "LauncherStatusRequest",
]


class BrokerAction(Enum):
    """What ``kemu broker`` can do to one broker of a running cluster."""

    STOP = "stop"  # graceful: the broker's own shutdown path (controlled shutdown, session close)
    KILL = "kill"  # crash: no graceful step; its store session is left to expire
    START = "start"  # start it again: same id, log dirs and config; a new broker epoch
    PAUSE = "pause"  # freeze it whole (SIGSTOP of its process); its session expires meanwhile
    RESUME = "resume"  # let a paused broker run on (SIGCONT)


class BrokerState(Enum):
    """Whether a broker of a launched cluster runs, and if not, how it went down."""

    RUNNING = "running"
    STOPPED = "stopped"  # by ``kemu broker stop``
    KILLED = "killed"  # by ``kemu broker kill``
    PAUSED = "paused"  # by ``kemu broker pause``, until ``kemu broker resume``: still running
    EXITED = "exited"  # went down on its own (its process exited, or its node crashed)


class LaunchedBroker(msgspec.Struct, frozen=True, kw_only=True):
    """One broker as its launcher sees it. ``pid`` is the process it runs (or ran) in;
    ``broker_epoch`` its registration's epoch as the broker reports it, -1 when it is down
    or did not answer."""

    broker_id: BrokerId
    state: BrokerState
    pid: int
    host: str
    port: int
    broker_epoch: BrokerEpoch


class LauncherStatusRequest(Message, frozen=True, kw_only=True):
    """Ask the launcher for the state of every broker and who is controller."""


class LauncherStatus(Message, frozen=True, kw_only=True):
    """Every broker of the cluster, by id; ``controller_id`` as the running brokers know
    it (-1 when none is known)."""

    brokers: tuple[LaunchedBroker, ...]
    controller_id: BrokerId
    cluster_id: str
    processes: bool  # one OS process per broker (``kemu up --processes``)


class BrokerCommand(Message, frozen=True, kw_only=True):
    """Stop, kill or start broker ``broker_id``."""

    action: BrokerAction
    broker_id: BrokerId


class BrokerCommandDone(Message, frozen=True, kw_only=True):
    """The command was carried out: ``note`` says what happened, in one line for the user;
    ``status`` is the cluster afterwards."""

    action: BrokerAction
    broker_id: BrokerId
    note: str
    status: LauncherStatus


class BrokerCommandRefused(Message, frozen=True, kw_only=True):
    """The command was not carried out (an unknown broker, one already in the asked state,
    a cluster that is stopping, or a start that failed): ``reason`` in one line."""

    action: BrokerAction
    broker_id: BrokerId
    reason: str


class ClusterViewRequest(Message, frozen=True, kw_only=True):
    """Ask the launcher for a ``ClusterView``; it asks no broker but the controller."""


class ClusterView(Message, frozen=True, kw_only=True):
    """What ``kemu top`` shows that the metadata store does not hold: each broker's state
    as the launcher knows it (by id), the active controller's event queue (None when no
    running broker answered as the active controller), and the brokers'
    ``min.insync.replicas`` (a topic's own config overrides it)."""

    states: tuple[tuple[BrokerId, BrokerState], ...]
    controller_queue: ControllerQueue | None
    min_insync_replicas: int


class ClusterMetricsRequest(Message, frozen=True, kw_only=True):
    """Ask the launcher for every running broker's metrics (``ClusterMetrics``)."""


class BrokerMetricsView(msgspec.Struct, frozen=True, kw_only=True):
    """One running broker's metrics: its ``ReplicaManager``'s and its controller's (each
    None when that actor did not answer in time)."""

    broker_id: BrokerId
    replica_manager: BrokerMetrics | None
    controller: ControllerQueue | None


class ClusterMetrics(Message, frozen=True, kw_only=True):
    """The metrics of the running brokers, by id."""

    brokers: tuple[BrokerMetricsView, ...]
