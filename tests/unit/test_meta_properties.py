"""``meta.properties`` at start-up, as ``KafkaServer.startup`` checks it: a log dir of
another cluster or another broker is refused with Kafka's message and left as it was; the
same cluster and broker start; a new cluster draws a fresh id outside deterministic runs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from actors.log.manager import check_meta_properties, meta_properties
from actors.runtime.actor import Node
from actors.runtime.clock import RealClock, VirtualClock
from actors.runtime.tracer import Tracer
from cluster.network import InProcessTransport, Network
from protocol.errors import FatalNodeError


def meta(broker_id: int, cluster_id: str | None) -> bytes:
    return meta_properties(broker_id, cluster_id, wall_ms=0)


def test_the_same_cluster_and_broker_pass() -> None:
    """Every dir naming this broker of this cluster, or none at all: the broker starts."""
    found = {Path("/a"): meta(1, "abc"), Path("/b"): meta(1, "abc")}
    check_meta_properties(found, broker_id=1, cluster_id="abc")
    check_meta_properties({}, broker_id=1, cluster_id="abc")


def test_another_cluster_s_log_dir_is_refused_with_kafka_s_message() -> None:
    """``InconsistentClusterIdException``, word for word as Kafka 2.7 prints it."""
    with pytest.raises(FatalNodeError) as refused:
        check_meta_properties({Path("/a"): meta(0, "old")}, broker_id=0, cluster_id="new")
    assert str(refused.value) == (
        "The Cluster ID new doesn't match stored clusterId Some(old) in meta.properties."
        " The broker is trying to join the wrong cluster. Configured zookeeper.connect may"
        " be wrong."
    )


def test_another_broker_s_log_dir_is_refused() -> None:
    """``InconsistentBrokerIdException``: the dir was broker 2's."""
    with pytest.raises(FatalNodeError, match=r"Configured broker.id 0 doesn't match stored"):
        check_meta_properties({Path("/a"): meta(2, "c")}, broker_id=0, cluster_id="c")


def test_dirs_that_disagree_are_refused() -> None:
    """``InconsistentBrokerMetadataException``: two dirs of two brokers."""
    found = {Path("/a"): meta(0, "c"), Path("/b"): meta(1, "c")}
    with pytest.raises(FatalNodeError, match=r"not consistent across log\.dirs"):
        check_meta_properties(found, broker_id=0, cluster_id="c")


def test_a_meta_properties_without_a_cluster_id_passes() -> None:
    """A dir written before the broker knew its cluster (Kafka's version 0 file may lack
    ``cluster.id``) is adopted."""
    check_meta_properties({Path("/a"): meta(3, None)}, broker_id=3, cluster_id="c")


def test_identities_are_fresh_outside_deterministic_runs() -> None:
    """Two nodes of the same seed draw different identities on the real clock, the same
    ones on the virtual clock (where a seed must replay byte for byte)."""

    network = Network(
        InProcessTransport(), tracer=Tracer(), rng=random.Random(0), clock=RealClock()
    )

    def draw(clock: RealClock | VirtualClock) -> float:
        return Node("broker-0", attach=network.attach, clock=clock, seed=7).ids.random()

    assert draw(RealClock()) != draw(RealClock())
    assert draw(VirtualClock()) == draw(VirtualClock())
    assert isinstance(Node("n", attach=network.attach, seed=7).ids, random.SystemRandom)
