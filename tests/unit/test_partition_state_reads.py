"""``kafka_zk.get_partition_states``: the partition-state znodes read as one pipelined
batch (Kafka's ``getTopicPartitionStatesRaw``), on the embedded store. Znodes holding the
same bytes are decoded once; each partition still gets its own zkVersion, a missing znode
is left out and a malformed one is refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from actors.zk import kafka_zk
from actors.zk.store import StoreSession
from cluster.store.embedded import EmbeddedStore
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import ZkDataError
from protocol.ids import BrokerId, ControllerEpoch, LeaderEpoch, TopicName

pytestmark = pytest.mark.asyncio

T = TopicName("t")


def state(leader: int, isr: tuple[int, ...], epoch: int = 0) -> zkdata.LeaderIsrAndControllerEpoch:
    return zkdata.LeaderIsrAndControllerEpoch(
        leader=BrokerId(leader),
        leader_epoch=LeaderEpoch(epoch),
        isr=tuple(BrokerId(b) for b in isr),
        controller_epoch=ControllerEpoch(1),
    )


@pytest_asyncio.fixture
async def session() -> AsyncIterator[StoreSession]:
    embedded = EmbeddedStore()
    try:
        yield await embedded.open_session(name="controller")
    finally:
        await embedded.aclose()


async def put(session: StoreSession, partition: int, data: bytes, writes: int = 1) -> None:
    path = zkdata.partition_state_path(T, partition)
    await session.create(path, data, make_parents=True)
    for _ in range(writes - 1):  # each write one more zkVersion
        await session.set(path, data)


async def test_equal_znodes_give_equal_states_with_their_own_versions(
    session: StoreSession,
) -> None:
    same = state(1, (1, 2, 3)).encode()
    await put(session, 0, same)
    await put(session, 1, same, writes=3)
    await put(session, 2, state(2, (2, 3), epoch=4).encode(), writes=2)
    await put(session, 3, same, writes=2)
    tps = [TopicPartition(T, p) for p in range(5)]  # partition 4 has no znode

    states = await kafka_zk.get_partition_states(session, tps)

    assert list(states) == tps[:4]
    assert [s.zk_version for s in states.values()] == [0, 2, 1, 1]
    assert states[tps[0]].state == states[tps[1]].state == states[tps[3]].state
    assert states[tps[0]].state == state(1, (1, 2, 3))
    assert states[tps[2]].state == state(2, (2, 3), epoch=4)


async def test_a_malformed_znode_is_refused_after_a_well_formed_equal_one(
    session: StoreSession,
) -> None:
    await put(session, 0, state(1, (1, 2)).encode())
    await put(session, 1, state(1, (1, 2)).encode())
    await put(session, 2, b'{"version":1,"leader":"x"}')
    tps = [TopicPartition(T, p) for p in range(3)]
    with pytest.raises(ZkDataError, match="must be a 32-bit integer"):
        await kafka_zk.get_partition_states(session, tps)
