"""The metrics a chaos condition can wait on (``metric``, ``MetricAt``): their names, and
reading one from the actors that keep it, as the launcher's Prometheus endpoint reads them
(docs/metrics.md) but through the run's own client node, so on the virtual clock too.

A broker's ``ReplicaManager`` metrics are asked of its broker actor
(``BrokerMetricsRequest``), the controller's of its controller actor
(``ControllerQueueRequest``); a meter or a timer reads as its count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from actors.broker.isr import IsrUpdate
from actors.broker.names import CONTROLLER_ACTOR, broker_node_id, broker_ref
from actors.broker.replica_manager import REPLICA_MANAGER_GAUGES
from actors.controller.controller import (
    CONTROLLER_GAUGES,
    CONTROLLER_TIMERS,
    UNCLEAN_LEADER_ELECTIONS,
)
from protocol.base import ActorRef
from protocol.broker import BrokerMetrics, BrokerMetricsRequest
from protocol.controller import ControllerQueue, ControllerQueueRequest
from protocol.errors import AskTimeoutError, RemoteError

if TYPE_CHECKING:  # the loader reads the names without the harness
    from cluster.chaos.harness import Harness

__all__ = ["BROKER_METRICS", "CONTROLLER_METRICS", "METRIC_NAMES", "read_metric"]

BROKER_METRICS: Final = frozenset(REPLICA_MANAGER_GAUGES) | {u.value for u in IsrUpdate}
"""The ``ReplicaManager``'s gauges and meters."""
CONTROLLER_METRICS: Final = frozenset(
    (*CONTROLLER_GAUGES, *CONTROLLER_TIMERS, UNCLEAN_LEADER_ELECTIONS)
)
"""The controller's gauges (``KafkaController``, ``ControllerEventManager``), timers and
meter (``ControllerStats``)."""
METRIC_NAMES: Final = BROKER_METRICS | CONTROLLER_METRICS

ASK_TIMEOUT: Final = 5.0


async def read_metric(h: Harness, name: str, broker: int | None) -> int | None:
    """Metric ``name`` of broker ``broker``, or its sum over the running brokers (None);
    None when a broker read is down or did not answer."""
    brokers = h.running() if broker is None else [broker]
    if broker is not None and not h.is_running(broker):
        return None
    total = 0
    for b in brokers:
        value = await _read(h, name, b)
        if value is None:
            return None
        total += value
    return total


async def _read(h: Harness, name: str, broker: int) -> int | None:
    if name in BROKER_METRICS:
        reply = await _ask(h, broker_ref(broker), BrokerMetricsRequest())
        if not isinstance(reply, BrokerMetrics):
            return None
        return dict((*reply.gauges, *reply.meters)).get(name)
    reply = await _ask(
        h, ActorRef(broker_node_id(broker), CONTROLLER_ACTOR), ControllerQueueRequest()
    )
    if not isinstance(reply, ControllerQueue):
        return None
    values = dict((*reply.gauges, *reply.meters))
    values.update((timer, events) for timer, events, _ in reply.timers)
    return values.get(name)


async def _ask(
    h: Harness, to: ActorRef, msg: BrokerMetricsRequest | ControllerQueueRequest
) -> object:
    try:
        return await h.client.ask(to, msg, timeout=ASK_TIMEOUT)
    except (AskTimeoutError, RemoteError):
        return None
