"""The controller end to end (ControllerIntegrationTest): election, topic creation, broker
changes and failover, with fake brokers and the embedded store on the virtual clock."""

from __future__ import annotations

from actors.controller.events import Reelect
from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from protocol import zkdata
from protocol.control import (
    Endpoint,
    LeaderAndIsrRequest,
    SecurityProtocol,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, ControllerEpoch, TopicName
from protocol.store import CreateOp, DeleteOp, SetDataOp
from tests.support.controller_cluster import ids, run_cluster, start, state_of, tp
from tests.support.fake_brokers import ControllerCluster, registration


async def controller_epoch(session: StoreSession) -> tuple[int, int]:
    data, stat = await session.get(zkdata.CONTROLLER_EPOCH_PATH)
    return zkdata.decode_controller_epoch(data), stat.version


# ------------------------------------------------------------------ election


def test_the_first_controller_of_a_cluster_gets_epoch_1() -> None:
    """A single broker elects itself: epoch 1, epoch zkVersion 1, status says active."""

    async def body(cluster: ControllerCluster) -> None:
        await cluster.start_broker(0)
        active = await cluster.active_controller()
        assert active.broker_id == 0
        assert await controller_epoch(await cluster.admin()) == (1, 1)
        status = await cluster.status(0)
        assert (status.active, status.controller_id, status.epoch) == (True, 0, 1)
        (elected,) = cluster.sink.of("event", "controller_elected")
        assert elected.fields == {"epoch": 1, "epoch_zk_version": 1}

    run_cluster(body)


def test_only_one_of_three_brokers_becomes_controller_and_others_know_it() -> None:
    """With three brokers one is active; the others report it as the controller."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        for i in range(3):
            status = await cluster.status(i)
            assert status.controller_id == active.broker_id
            assert status.active == (i == active.broker_id)
        assert len(cluster.sink.of("event", "controller_elected")) == 1

    run_cluster(body)


def test_the_epoch_persists_when_all_brokers_are_down_and_grows_on_restart() -> None:
    """The sole broker stops: /controller vanishes, the epoch stays 1; on restart it becomes 2."""

    async def body(cluster: ControllerCluster) -> None:
        await cluster.start_broker(0)
        await cluster.active_controller()
        await cluster.stop_broker(0)
        admin = await cluster.admin()
        assert await admin.exists(zkdata.CONTROLLER_PATH) is None
        assert await controller_epoch(admin) == (1, 1)
        await cluster.start_broker(0)
        await cluster.active_controller()
        assert await controller_epoch(admin) == (2, 2)

    run_cluster(body)


# ------------------------------------------------------------------ topic creation


def test_topic_creation_elects_leaders_and_tells_every_broker() -> None:
    """A new topic gets state znodes (leader = first replica, epoch 0, ISR = replicas),
    LeaderAndIsr(isNew) to its replicas and UpdateMetadata to every broker."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("orders", {0: [1, 2], 1: [2, 0]})
        await cluster.settle()
        assert await state_of(cluster, "orders", 0) == (1, 0, ids(1, 2), 1)
        assert await state_of(cluster, "orders", 1) == (2, 0, ids(2, 0), 1)
        for h in cluster.brokers.values():
            hosted = {p for p, s in h.broker.partitions.items() if s.is_new}
            expected = {
                tp("orders", p) for p, r in {0: [1, 2], 1: [2, 0]}.items() if h.broker_id in r
            }
            assert hosted == expected
            assert h.broker.metadata[tp("orders", 0)].leader == 1
            assert h.broker.metadata[tp("orders", 1)].leader == 2
        transitions = [
            (e.fields["to_state"], e.fields["topic"], e.fields["partition"], e.fields["replica"])
            for e in cluster.sink.of("transition")
            if e.fields["topic"] == "orders"
        ]
        assert ("OnlinePartition", "orders", 0, None) in transitions
        assert ("OnlineReplica", "orders", 1, 0) in transitions

    run_cluster(body)


def test_topic_creation_with_an_offline_first_replica_elects_the_live_one() -> None:
    """Assignment [dead, live]: the live replica leads at epoch 0 with ISR [live]."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        active = await cluster.active_controller()
        await cluster.create_topic("t", {0: [5, active.broker_id]})
        await cluster.settle()
        assert await state_of(cluster, "t") == (active.broker_id, 0, ids(active.broker_id), 1)

    run_cluster(body)


def test_a_partition_without_live_replicas_stays_new_until_a_replica_registers() -> None:
    """All replicas down: no state znode; when one registers, the partition comes online."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("later", {0: [2]})
        await cluster.settle()
        assert await cluster.partition_state("later", 0) is None
        active = await cluster.active_controller()
        assert active.controller.context.partition_state(tp("later")).label == "NewPartition"
        await cluster.start_broker(2)
        await cluster.settle()
        assert await state_of(cluster, "later") == (2, 0, ids(2), 1)
        assert cluster.brokers[2].broker.partitions[tp("later")].leader == 2

    run_cluster(body)


def test_partition_modifications_add_partitions() -> None:
    """Writing an expanded assignment creates the new partitions with leaders, epoch 0."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("grow", {0: [0, 1]})
        await cluster.settle()
        await kafka_zk.set_topic_assignment(
            await cluster.admin(), TopicName("grow"), {0: [0, 1], 1: [1, 2], 2: [5, 2]}
        )
        await cluster.settle()
        assert await state_of(cluster, "grow", 0) == (0, 0, ids(0, 1), 1)
        assert await state_of(cluster, "grow", 1) == (1, 0, ids(1, 2), 1)
        assert await state_of(cluster, "grow", 2) == (2, 0, ids(2), 1)  # first replica dead
        for h in cluster.brokers.values():
            assert {p.partition for p in h.broker.metadata if p.topic == "grow"} == {0, 1, 2}

    run_cluster(body)


# ------------------------------------------------------------------ broker changes


def test_broker_failure_reelects_leaders_and_shrinks_isrs() -> None:
    """A dead leader's partitions get a new leader (epoch+1); its follower partitions lose it
    from the ISR; an RF1 partition keeps ISR [dead] with leader -1."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        victim = next(b for b in (0, 1, 2) if b != active.broker_id)
        other = next(b for b in (0, 1, 2) if b not in (victim, active.broker_id))
        await cluster.create_topic(
            "t", {0: [victim, other, active.broker_id], 1: [other, victim], 2: [victim]}
        )
        await cluster.settle()
        await cluster.crash_broker(victim)
        await cluster.settle()
        assert await state_of(cluster, "t", 0) == (other, 1, ids(other, active.broker_id), 1)
        assert await state_of(cluster, "t", 1) == (other, 1, ids(other), 1)
        assert await state_of(cluster, "t", 2) == (-1, 1, ids(victim), 1)
        for b in (other, active.broker_id):
            cache = cluster.brokers[b].broker.metadata
            assert cache[tp("t", 0)].leader == other
            assert cache[tp("t", 0)].offline_replicas == ids(victim)
            assert cache[tp("t", 1)].isr == ids(other)
            assert victim not in cluster.brokers[b].broker.live_brokers
        assert active.controller.context.offline_partition_count == 1

    run_cluster(body)


def test_an_rf1_partition_on_a_dead_broker_stays_leaderless_even_with_unclean_election() -> None:
    """Entire ISR offline with unclean election enabled: leader -1, epoch 1, ISR kept."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        active = await cluster.active_controller()
        victim = 1 - active.broker_id
        await cluster.create_topic("solo", {0: [victim]})
        await cluster.settle()
        await cluster.crash_broker(victim)
        await cluster.settle()
        assert await state_of(cluster, "solo") == (-1, 1, ids(victim), 1)

    run_cluster(body, unclean_leader_election_enable=True)


def test_a_follower_restart_clears_its_offline_replicas_without_moving_leaders() -> None:
    """A follower dies (caches show it offline, leader kept) and returns (offline cleared)."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        follower = next(b for b in (0, 1, 2) if b != active.broker_id)
        await cluster.create_topic("t", {0: [active.broker_id, follower]})
        await cluster.settle()
        await cluster.crash_broker(follower)
        await cluster.settle()
        leader, epoch, isr, _ = await state_of(cluster, "t")
        assert (leader, epoch, isr) == (active.broker_id, 1, ids(active.broker_id))
        assert active.broker.metadata[tp("t")].offline_replicas == ids(follower)
        await cluster.start_broker(follower)
        await cluster.settle()
        assert active.broker.metadata[tp("t")].offline_replicas == ()
        restarted = cluster.brokers[follower].broker
        assert restarted.partitions[tp("t")].leader == active.broker_id
        assert restarted.metadata[tp("t")].leader == active.broker_id

    run_cluster(body)


def test_a_bounced_broker_is_treated_as_failed_and_restarted() -> None:
    """A broker re-registered before the controller noticed (higher czxid) loses and regains
    its replicas: its leaderships move, and it hears LeaderAndIsr with its new epoch."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        bounced = next(b for b in (0, 1, 2) if b != active.broker_id)
        await cluster.create_topic("t", {0: [bounced, active.broker_id]})
        await cluster.settle()
        admin = await cluster.admin()
        path = zkdata.broker_path(BrokerId(bounced))
        await admin.multi(
            [
                DeleteOp(path=path),
                CreateOp(path=path, data=registration(bounced, 1).encode(), ephemeral=True),
            ]
        )
        stat = await admin.exists(path)
        assert stat is not None
        await cluster.settle()
        (change,) = [e for e in cluster.sink.of("event", "broker_change") if e.fields["bounced"]]
        assert change.fields["bounced"] == [bounced]
        # Leadership moved at epoch 1; the restarted broker then rejoined the ISR by its
        # leader's AlterIsr, which keeps the leader epoch (actors.controller.alter_isr).
        assert await state_of(cluster, "t") == (
            active.broker_id,
            1,
            ids(active.broker_id, bounced),
            1,
        )
        last = cluster.brokers[bounced].broker.leader_and_isr()[-1]
        assert last.broker_epoch == stat.czxid

    run_cluster(body)


def test_a_storage_error_in_a_leader_and_isr_response_takes_the_replica_offline() -> None:
    """KAFKA_STORAGE_ERROR for a partition marks that replica offline: leadership moves."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        sick = next(b for b in (0, 1, 2) if b != active.broker_id)
        cluster.brokers[sick].broker.fail_storage.add(tp("disk"))
        await cluster.create_topic("disk", {0: [sick, active.broker_id]})
        await cluster.settle()
        assert await state_of(cluster, "disk") == (active.broker_id, 1, ids(active.broker_id), 1)
        assert active.controller.context.replicas_on_offline_dirs[BrokerId(sick)] == {tp("disk")}

    run_cluster(body)


def test_new_broker_endpoints_are_announced_to_every_broker() -> None:
    """BrokerModifications: changed endpoints in /brokers/ids/<id> go out in UpdateMetadata."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        moved = zkdata.BrokerRegistration(
            endpoints=(
                Endpoint(
                    host="10.0.0.9",
                    port=9999,
                    listener="PLAINTEXT",
                    security_protocol=SecurityProtocol.PLAINTEXT,
                ),
            ),
            timestamp=0,
        )
        await (await cluster.admin()).set(zkdata.broker_path(BrokerId(2)), moved.encode())
        await cluster.settle()
        for h in cluster.brokers.values():
            last = h.broker.update_metadata()[-1]
            (b2,) = [b for b in last.live_brokers if b.id == 2]
            assert b2.endpoints[0].host == "10.0.0.9"

    run_cluster(body)


# ------------------------------------------------------------------ failover and fencing


def test_deleting_the_controller_znode_elects_a_controller_with_the_next_epoch() -> None:
    """/controller deleted: an election with epoch 2, which resends every partition's state."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        before = {b: len(h.broker.requests) for b, h in cluster.brokers.items()}
        await (await cluster.admin()).delete(zkdata.CONTROLLER_PATH)
        await cluster.active_controller()
        await cluster.settle()
        assert (await controller_epoch(await cluster.admin()))[0] == 2
        for b, h in cluster.brokers.items():
            new = h.broker.requests[before[b] :]
            assert isinstance(new[0], UpdateMetadataRequest)
            assert new[0].partition_states == ()  # brokers first learn the live brokers
            lair = [r for r in new if isinstance(r, LeaderAndIsrRequest)]
            assert lair
            assert lair[0].controller_epoch == 2
            assert h.broker.controller_epoch == 2

    run_cluster(body)


def test_the_controllers_session_expiry_moves_the_controller() -> None:
    """The controller's session expires: another broker takes over with epoch+1; the old one
    resigns, re-registers with a new broker epoch and comes back as a follower."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await cluster.create_topic("t", {0: [0, 1, 2]})
        await cluster.settle()
        old = await cluster.active_controller()
        first_epoch = old.controller.broker_epoch
        await cluster.expire_session(old.broker_id)
        new = await cluster.active_controller()
        await cluster.settle()
        assert new.broker_id != old.broker_id
        assert new.controller.context.epoch == 2
        assert old.epochs
        assert old.epochs[-1] > first_epoch
        assert not old.controller.is_active
        assert old.controller.context.epoch == 0  # resigned: the context is reset
        assert cluster.sink.of("event", "controller_resigned")
        assert BrokerId(old.broker_id) in new.controller.context.live_broker_ids
        assert old.broker.controller_epoch == 2
        assert (await cluster.status(old.broker_id)).controller_id == new.broker_id

    run_cluster(body)


def test_controller_failover_after_a_crash_resends_state_and_handles_the_dead_broker() -> None:
    """The controller crashes: the next one (epoch 2) fails over, re-elects the dead broker's
    leaderships, and a topic created afterwards is handled by it."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        old = await cluster.active_controller()
        await cluster.create_topic(
            "t", {0: [old.broker_id, *(b for b in (0, 1, 2) if b != old.broker_id)]}
        )
        await cluster.settle()
        await cluster.crash_broker(old.broker_id)
        new = await cluster.active_controller()
        await cluster.settle()
        leader, epoch, isr, cepoch = await state_of(cluster, "t")
        assert leader != old.broker_id
        assert old.broker_id not in isr
        assert cepoch == 2
        assert epoch == 2  # ISR shrink at replica startup, then the election
        await cluster.create_topic("after", {0: [new.broker_id]})
        await cluster.settle()
        assert await state_of(cluster, "after") == (new.broker_id, 0, ids(new.broker_id), 2)

    run_cluster(body)


def test_a_stale_controllers_fenced_write_fails_and_it_resigns() -> None:
    """Another controller is installed (epoch bumped) while a TopicChange is pending: the old
    controller's fenced write fails, it resigns and writes nothing."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 1)
        admin = await cluster.admin()
        epoch, version = await controller_epoch(admin)
        usurper = zkdata.ControllerRegistration(broker_id=BrokerId(7), timestamp=0)
        await admin.multi(
            [
                CreateOp(
                    path=zkdata.topic_path(TopicName("t")),
                    data=kafka_zk.assignment_payload({0: [0]}),
                ),
                DeleteOp(path=zkdata.CONTROLLER_PATH),
                CreateOp(path=zkdata.CONTROLLER_PATH, data=usurper.encode(), ephemeral=True),
                SetDataOp(
                    path=zkdata.CONTROLLER_EPOCH_PATH,
                    data=zkdata.encode_controller_epoch(ControllerEpoch(epoch + 1)),
                    version=version,
                ),
            ]
        )
        await cluster.wait_for(lambda e: e.type == "controller_resigned")
        await cluster.settle()
        assert cluster.sink.of("event", "controller_moved")
        controller = cluster.brokers[0].controller
        assert not controller.is_active
        assert (await cluster.status(0)).controller_id == 7
        assert await admin.exists(zkdata.topic_partitions_path(TopicName("t"))) is None
        assert await cluster.partition_state("t", 0) is None

    run_cluster(body)


def test_the_broker_rejects_requests_from_a_deposed_controller() -> None:
    """Requests carry the controller epoch; a broker that saw epoch 2 refuses epoch 1."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        await (await cluster.admin()).delete(zkdata.CONTROLLER_PATH)
        await cluster.active_controller()
        await cluster.settle()
        broker = cluster.brokers[0].broker
        assert broker.controller_epoch == 2
        client = await cluster.client()
        stale = UpdateMetadataRequest(
            controller_id=BrokerId(0),
            controller_epoch=ControllerEpoch(1),
            broker_epoch=BrokerEpoch(-1),
            live_brokers=(),
        )
        reply = await client.ask(broker.ref, stale)
        assert isinstance(reply, UpdateMetadataResponse)
        assert reply.error_code is ErrorCode.STALE_CONTROLLER_EPOCH

    run_cluster(body)


def test_queued_events_are_preempted_when_the_controller_shuts_down() -> None:
    """Stopping a broker closes its controller's queue: what was still queued is preempted."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        handle = cluster.brokers[1]
        controller = handle.controller
        cluster.store.set_latency(0.1)  # each Reelect reads the store: it takes a while
        for _ in range(5):
            controller.events.put(Reelect())
        await cluster.stop_broker(1)
        cluster.store.set_latency(0.0)
        assert controller.events.preempted >= 1
        preempted = [
            e
            for e in cluster.sink.of("event", "controller_event_preempted")
            if e.node == "broker-1"
        ]
        assert len(preempted) == controller.events.preempted
        assert controller.events.depth == 0

    run_cluster(body)


def test_caches_show_offline_replicas_after_all_brokers_restart_but_one() -> None:
    """All brokers stop; two come back: an RF1 partition on the missing broker is announced
    with leader -1, its replica and ISR kept, and that replica offline."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        others = [b for b in (0, 1, 2) if b != active.broker_id]
        missing = others[0]
        await cluster.create_topic("rf1", {0: [missing]})
        await cluster.settle()
        for b in [*others, active.broker_id]:
            await cluster.stop_broker(b)
            await cluster.settle()
        for b in (0, 1, 2):
            if b != missing:
                await cluster.start_broker(b)
                await cluster.settle()
        await cluster.active_controller()
        for h in cluster.brokers.values():
            state = h.broker.metadata[tp("rf1")]
            assert (state.leader, state.replicas, state.isr) == (-1, ids(missing), ids(missing))
            assert state.offline_replicas == ids(missing)

    run_cluster(body)


def test_a_controller_given_a_plain_session_dispatches_its_watches_itself() -> None:
    """A broker that only holds a session: the controller starts the watch dispatcher and
    works as usual (elected, creates topics, sees broker changes)."""

    async def body(cluster: ControllerCluster) -> None:
        first = await cluster.start_broker(0, raw_session=True)
        assert first.zk.running
        await cluster.start_broker(1, raw_session=True)
        await cluster.active_controller()
        await cluster.create_topic("t", {0: [1, 0]})
        await cluster.settle()
        assert await state_of(cluster, "t") == (1, 0, ids(1, 0), 1)

    run_cluster(body)


def test_a_follower_whose_session_expires_comes_back_with_a_new_broker_epoch() -> None:
    """A non-controller's session expires: it re-registers (new epoch, reported to the
    broker), and the controller sends it its partitions with that epoch."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        active = await cluster.active_controller()
        follower = next(b for b in (0, 1, 2) if b != active.broker_id)
        await cluster.create_topic("t", {0: [active.broker_id, follower]})
        await cluster.settle()
        handle = cluster.brokers[follower]
        before = handle.controller.broker_epoch
        await cluster.expire_session(follower)
        await cluster.settle()
        assert handle.epochs == [handle.controller.broker_epoch]
        assert handle.controller.broker_epoch > before
        assert handle.zk.sessions_opened == 2
        assert (await cluster.active_controller()).broker_id == active.broker_id
        epochs = active.controller.context.live_broker_epochs
        assert epochs[BrokerId(follower)] == handle.controller.broker_epoch
        last = handle.broker.leader_and_isr()[-1]
        assert last.broker_epoch == handle.controller.broker_epoch
        assert tp("t") in {p.topic_partition for p in last.partition_states}

    run_cluster(body)


def test_an_illegal_batch_state_makes_the_controller_resign_and_another_election_happen() -> None:
    """A request batch left unflushed (an illegal state) makes the controller resign and
    delete /controller; a controller with the next epoch appears (ControllerFailoverTest)."""

    async def body(cluster: ControllerCluster) -> None:
        await start(cluster)
        old = await cluster.active_controller()
        old.controller.request_batch.add_update_metadata([BrokerId(old.broker_id)], ())
        moved = zkdata.BrokerRegistration(endpoints=registration(1, 0).endpoints[:0], timestamp=1)
        await (await cluster.admin()).set(zkdata.broker_path(BrokerId(1)), moved.encode())
        await cluster.wait_for(
            lambda e: e.type == "controller_resigned" and e.node == old.node.node_id
        )
        await cluster.wait_for(lambda e: e.type == "controller_elected" and e.fields["epoch"] == 2)
        new = await cluster.active_controller()
        assert new.controller.context.epoch == 2
        failed = cluster.sink.of("error", "controller_event_failed")
        assert [e.fields["error"] for e in failed] == ["IllegalControllerStateError"]

    run_cluster(body)
