"""What tests/controller/test_state_machines.py and test_controller_integration.py leave
out of Kafka's creation-side controller tests: two transitions of
PartitionStateMachineTest and ReplicaStateMachineTest (on the same rig: embedded store,
virtual clock, a recording request sender), and ControllerIntegrationTest's feature
znode set-up at election (IBP 2.7-IV2, so versioning is enabled)."""

from __future__ import annotations

from actors.controller.election import OfflineElection
from actors.controller.model import PartitionAndReplica
from protocol import zkdata
from protocol.control import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest
from protocol.ids import BrokerId
from tests.support.controller_cluster import run_cluster
from tests.support.fake_brokers import ControllerCluster
from tests.support.state_machine_rig import T0, P, R, Rig, rig_test

R0 = PartitionAndReplica(T0, BrokerId(0))


@rig_test()
async def test_replica_new_to_offline_stops_the_replica_and_updates_metadata(rig: Rig) -> None:
    """testNewReplicaToOfflineReplicaTransition: a New replica of a partition without a
    leader goes Offline with StopReplica(delete=false) to its broker and an UpdateMetadata
    to every live broker; no LeaderAndIsr and no store write."""
    await rig.create_topic((0, 1))
    await rig.rsm.handle_state_changes([R0], R.NEW)
    await rig.rsm.handle_state_changes([R0], R.OFFLINE)
    assert rig.ctx.replica_state(R0) is R.OFFLINE
    ((stopped, stop),) = rig.requests(StopReplicaRequest)
    assert stopped == 0
    assert [(p.topic_partition, p.delete_partition) for p in stop.partitions] == [(T0, False)]
    assert sorted(b for b, _ in rig.requests(UpdateMetadataRequest)) == [0, 1, 2]
    assert rig.requests(LeaderAndIsrRequest) == []
    assert await rig.zk_state() is None
    assert ("replica", "NewReplica", "OfflineReplica") in rig.transitions()


@rig_test()
async def test_offline_to_online_stays_offline_when_the_state_read_fails(rig: Rig) -> None:
    """testOfflinePartitionToOnlinePartitionTransitionZkUtilsExceptionFromStateLookup: a
    store error reading the state znode fails the election; the partition stays Offline,
    nothing is sent and the failure is in the state-change log."""
    await rig.create_topic((0, 1))
    await rig.seed_leadership(T0, 1, (1, 0))
    rig.ctx.put_partition_state(T0, P.OFFLINE)
    await rig.session.close()  # every later call fails with a store error
    await rig.psm.handle_state_changes([T0], P.ONLINE, OfflineElection())
    assert rig.ctx.partition_state(T0) is P.OFFLINE
    assert rig.sender.sent == []
    (failure,) = rig.errors("state_change_failed")
    assert (failure["from_state"], failure["to_state"]) == ("OfflinePartition", "OnlinePartition")
    assert "closed" in failure["detail"].lower()


# ------------------------------------------------------------------ the feature znode


def _with_feature_node(existing: zkdata.FeatureNode | None) -> zkdata.FeatureNode:
    """Elect a controller (IBP 2.7-IV2) over a store whose /feature is ``existing``; what
    /feature holds once it is ready."""
    found: list[zkdata.FeatureNode] = []

    async def body(cluster: ControllerCluster) -> None:
        admin = await cluster.admin()
        if existing is not None:
            await admin.create(zkdata.FEATURE_PATH, existing.encode())
        await cluster.start_broker(0)
        await cluster.active_controller()
        data, _ = await admin.get(zkdata.FEATURE_PATH)
        found.append(zkdata.FeatureNode.decode(data))

    run_cluster(body)
    return found[0]


def test_the_controller_creates_the_feature_znode_enabled() -> None:
    """testControllerFeatureZNodeSetupWhenFeatureVersioningIsEnabledWithNonExistingFeatureZNode:
    no /feature: the controller creates it, enabled, with no finalized features."""
    assert _with_feature_node(None) == zkdata.FeatureNode(status=zkdata.FeatureStatus.ENABLED)


def test_the_controller_enables_a_disabled_feature_znode_keeping_its_features() -> None:
    """...WithDisabledExistingFeatureZNode: a disabled /feature is switched to enabled."""
    features = {"f": zkdata.FinalizedVersionRange(min_version_level=1, max_version_level=2)}
    disabled = zkdata.FeatureNode(status=zkdata.FeatureStatus.DISABLED, features=features)
    assert _with_feature_node(disabled) == zkdata.FeatureNode(
        status=zkdata.FeatureStatus.ENABLED, features=features
    )


def test_the_controller_leaves_an_enabled_feature_znode_alone() -> None:
    """...WithEnabledExistingFeatureZNode: an enabled /feature stays as it was."""
    features = {"f": zkdata.FinalizedVersionRange(min_version_level=1, max_version_level=3)}
    enabled = zkdata.FeatureNode(status=zkdata.FeatureStatus.ENABLED, features=features)
    assert _with_feature_node(enabled) == enabled
