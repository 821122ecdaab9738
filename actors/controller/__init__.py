"""The controller: one per broker, active on the broker that wins the ``/controller`` election.

Public face of the package; the pieces live in one-concept modules:

* ``controller``: ``KafkaController`` (the actor) and ``ControllerConfig``;
* ``events`` / ``event_manager``: the closed event union and its queue + consumer task;
* ``context``: the in-memory view of the cluster;
* ``states``: the state tables; ``partition_state_machine`` / ``replica_state_machine``;
* ``election``: the leader-election strategies, pure functions of a snapshot;
* ``request_batch`` / ``channel``: building and delivering control requests;
* ``recording`` / ``replay``: recording a controller's inputs and outputs in the trace, and
  replaying them through the current code (``kemu trace replay``).
"""

from __future__ import annotations

from actors.controller.channel import ControllerChannelManager, broker_actor_ref
from actors.controller.context import Broker, ControllerContext
from actors.controller.controller import ControllerConfig, KafkaController
from actors.controller.election import (
    ControlledShutdownElection,
    ElectionResult,
    ElectionStrategy,
    OfflineElection,
    PreferredReplicaElection,
    ReassignElection,
)
from actors.controller.event_manager import ControllerEventManager, QueuedEvent
from actors.controller.events import ControllerEvent, ControllerEventUnion
from actors.controller.model import LeaderAndIsr, Leadership, PartitionAndReplica
from actors.controller.recording import CONTROLLER_INPUTS
from actors.controller.replay import Divergence, RunReplay, replay_events, replay_trace
from actors.controller.request_batch import ControllerBrokerRequestBatch
from actors.controller.states import ControllerState, PartitionState, ReplicaState

__all__ = [
    "CONTROLLER_INPUTS",
    "Broker",
    "ControlledShutdownElection",
    "ControllerBrokerRequestBatch",
    "ControllerChannelManager",
    "ControllerConfig",
    "ControllerContext",
    "ControllerEvent",
    "ControllerEventManager",
    "ControllerEventUnion",
    "ControllerState",
    "Divergence",
    "ElectionResult",
    "ElectionStrategy",
    "KafkaController",
    "LeaderAndIsr",
    "Leadership",
    "OfflineElection",
    "PartitionAndReplica",
    "PartitionState",
    "PreferredReplicaElection",
    "QueuedEvent",
    "ReassignElection",
    "ReplicaState",
    "RunReplay",
    "broker_actor_ref",
    "replay_events",
    "replay_trace",
]
