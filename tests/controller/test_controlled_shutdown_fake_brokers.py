"""Controlled shutdown (``KafkaController.doControlledShutdown``): the controller's side
asked directly (ControllerIntegrationTest.testControlledShutdown, ...WithStaleBrokerEpoch),
and the broker's side (``actors.broker.controlled_shutdown``) run by a graceful stop, with
its retries on the virtual clock. Fake brokers, real controllers; broker 0 is the
controller."""

from __future__ import annotations

from protocol.base import Message
from protocol.control import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    StopReplicaRequest,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId
from tests.support.controller_cluster import ids, run_cluster, start, state_of, tp
from tests.support.fake_brokers import ControllerCluster


async def shut_down(
    cluster: ControllerCluster, broker_id: int, *, epoch: int | None = None, via: int = 0
) -> ControlledShutdownResponse:
    """Ask broker ``via``'s controller, as a stopping broker does (which, shutting down,
    fetches nothing any more: Kafka's ``makeFollowers`` adds no fetcher then)."""
    handle = cluster.brokers[broker_id]
    handle.broker.shutting_down = True
    request = ControlledShutdownRequest(
        broker_id=BrokerId(broker_id),
        broker_epoch=BrokerEpoch(handle.broker.broker_epoch if epoch is None else epoch),
    )
    client = await cluster.client()
    reply: Message = await client.ask(cluster.brokers[via].controller.ref, request, timeout=30)
    assert isinstance(reply, ControlledShutdownResponse)
    await cluster.settle()
    return reply


def test_controlled_shutdown_moves_leaders_and_shrinks_isrs() -> None:
    """testControlledShutdown: of replicas [0, 1, 2], shutting down 2 then 1 shrinks the ISR
    to [0, 1] then [0], leader 0 kept, nothing remaining; shutting down 0 too reports the
    one partition it still leads, and the leader stays 0 (nobody else can take it)."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("test", {0: [0, 1, 2]})
        await cluster.settle()
        reply = await shut_down(cluster, 2)
        assert (reply.error_code, reply.remaining_partitions) == (ErrorCode.NONE, ())
        for b in (0, 1):
            state = cluster.brokers[b].broker.metadata[tp("test")]
            assert (state.leader, state.isr) == (0, ids(0, 1))
        assert await state_of(cluster, "test") == (0, 1, ids(0, 1), 1)
        # The follower heard StopReplica(delete=false) and was not sent leadership.
        stopped = cluster.brokers[2].broker.stopped
        assert (tp("test"), False) in stopped
        assert (tp("test"), True) not in stopped

        reply = await shut_down(cluster, 1)
        assert (reply.error_code, reply.remaining_partitions) == (ErrorCode.NONE, ())
        assert await state_of(cluster, "test") == (0, 2, ids(0), 1)

        reply = await shut_down(cluster, 0)
        assert (reply.error_code, reply.remaining_partitions) == (ErrorCode.NONE, (tp("test"),))
        for h in cluster.brokers.values():
            assert h.broker.metadata[tp("test")].leader == 0
        ctx = cluster.brokers[0].controller.context
        assert ctx.shutting_down_broker_ids == {0, 1, 2}
        assert ctx.live_broker_ids == frozenset()

    run_cluster(body)


def test_a_leader_moves_to_the_first_live_replica_in_the_isr() -> None:
    """The broker leads: ControlledShutdown election (first assigned replica that is live,
    in the ISR and not shutting down; the ISR loses the shutting-down broker), LeaderAndIsr
    to every live-or-shutting-down replica, including the one going away."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2, 0], 1: [1]})
        await cluster.settle()
        before = len(cluster.brokers[1].broker.leader_and_isr())
        reply = await shut_down(cluster, 1)
        # The RF 1 partition is left alone and is not reported.
        assert (reply.error_code, reply.remaining_partitions) == (ErrorCode.NONE, ())
        assert await state_of(cluster, "t", 0) == (2, 1, ids(2, 0), 1)
        assert await state_of(cluster, "t", 1) == (1, 0, ids(1), 1)
        told = [
            s
            for r in cluster.brokers[1].broker.leader_and_isr()[before:]
            for s in r.partition_states
            if s.topic_partition == tp("t", 0)
        ]
        assert [(s.leader, s.leader_epoch) for s in told] == [(2, 1)]

    run_cluster(body)


def test_controlled_shutdown_errors() -> None:
    """testControllerRejectControlledShutdownRequestWithStaleBrokerEpoch: an older broker
    epoch answers STALE_BROKER_EPOCH; an unknown broker BROKER_NOT_AVAILABLE; a broker that
    is not the controller STALE_CONTROLLER_EPOCH. None of them changes anything."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        epoch = cluster.brokers[1].broker.broker_epoch
        assert (await shut_down(cluster, 1, epoch=epoch - 1)).error_code is (
            ErrorCode.STALE_BROKER_EPOCH
        )
        assert (await shut_down(cluster, 1, via=1)).error_code is ErrorCode.STALE_CONTROLLER_EPOCH
        client = await cluster.client()
        unknown = ControlledShutdownRequest(broker_id=BrokerId(9), broker_epoch=BrokerEpoch(1))
        reply = await client.ask(cluster.brokers[0].controller.ref, unknown)
        assert isinstance(reply, ControlledShutdownResponse)
        assert reply.error_code is ErrorCode.BROKER_NOT_AVAILABLE
        await cluster.settle()
        assert cluster.brokers[0].controller.context.shutting_down_broker_ids == set()
        assert await state_of(cluster, "t") == (1, 0, ids(1, 0), 1)
        # An epoch of -1 (a broker that does not send one) is never refused as stale.
        assert (await shut_down(cluster, 1, epoch=-1)).error_code is ErrorCode.NONE
        assert await state_of(cluster, "t") == (0, 1, ids(0), 1)

    run_cluster(body)


def test_a_graceful_stop_moves_leadership_before_the_broker_leaves() -> None:
    """The broker side: stopping a broker that leads runs a controlled shutdown first (one
    attempt, NONE, nothing remaining), so its partition has a new leader while its znode is
    still there; only then does the broker go, and the controller's broker-failure handling
    finds nothing left to elect."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2]})
        await cluster.settle()
        await cluster.stop_broker(1)
        await cluster.settle()
        order = [
            e.type
            for e in cluster.sink.of("event")
            if e.type in ("controlled_shutdown", "controlled_shutdown_succeeded")
            or (e.type == "broker_change" and e.fields["dead"] == [1])
        ]
        assert order == ["controlled_shutdown", "controlled_shutdown_succeeded", "broker_change"]
        (attempt,) = cluster.sink.of("event", "controlled_shutdown_attempt")
        assert attempt.fields == {
            "broker": 1,
            "attempt": 1,
            "controller": 0,
            "error": "NONE",
            "remaining": [],
        }
        assert await state_of(cluster, "t") == (2, 1, ids(2), 1)
        transitions = [
            e.fields["leader_epoch"]
            for e in cluster.sink.of("transition", "partition")
            if e.fields["topic"] == "t" and e.fields["to_state"] == "OnlinePartition"
        ]
        assert transitions == [0, 1]  # the move only: the broker failure elected nothing
        ctx = cluster.brokers[0].controller.context
        assert ctx.shutting_down_broker_ids == set()  # gone for good: no longer tracked

    run_cluster(body, controlled_shutdown=True)


def test_a_shutdown_that_cannot_move_leadership_retries_then_gives_up() -> None:
    """The other replica is down: every attempt reports the partition still led, the broker
    retries after the backoff (5 s of virtual time, three attempts), then stops anyway; the
    partition then has no leader."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 3)
        await cluster.create_topic("t", {0: [1, 2]})
        await cluster.settle()
        await cluster.stop_broker(2)
        await cluster.settle()
        started = cluster.clock.now()
        await cluster.stop_broker(1)
        elapsed = cluster.clock.now() - started
        await cluster.settle()
        attempts = cluster.sink.of("event", "controlled_shutdown_attempt")
        mine = [e.fields for e in attempts if e.fields["broker"] == 1]
        assert [(a["attempt"], a["error"], a["remaining"]) for a in mine] == [
            (n, "NONE", ["t-0"]) for n in (1, 2, 3)
        ]
        assert 15.0 <= elapsed < 16.0  # three backoffs, the last one too (as Kafka)
        assert cluster.sink.of("event", "controlled_shutdown_failed")
        leader, _, isr, _ = await state_of(cluster, "t")
        assert (leader, isr) == (-1, ids(1))

    run_cluster(body, controlled_shutdown=True)


def test_stopping_the_controller_itself_hands_its_leaderships_over() -> None:
    """The stopping broker is the active controller: it asks itself (its controller still
    runs during the controlled shutdown), moves its leaderships, then stops; the next
    controller starts from leaders already moved."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("t", {0: [0, 1]})
        await cluster.settle()
        await cluster.stop_broker(0)
        new = await cluster.active_controller()
        await cluster.settle()
        assert new.broker_id == 1
        leader, epoch, isr, controller_epoch = await state_of(cluster, "t")
        assert (leader, epoch, isr) == (1, 1, ids(1))
        assert controller_epoch == 1  # moved by the old controller, before it left
        (attempt,) = cluster.sink.of("event", "controlled_shutdown_attempt")
        assert (attempt.fields["controller"], attempt.fields["error"]) == (0, "NONE")
        requests = cluster.brokers[1].broker.requests
        assert any(isinstance(r, LeaderAndIsrRequest) for r in requests)
        assert not any(isinstance(r, StopReplicaRequest) for r in requests)

    run_cluster(body, controlled_shutdown=True)
