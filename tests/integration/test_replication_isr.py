"""Replication through real brokers (in-process cluster, embedded store, virtual clock): a
follower's fetcher keeps its copy, a follower cut off from its leader leaves the ISR after
replica.lag.time.max.ms by the leader's AlterIsr, and rejoins once it has caught up; with
unclean leader election the out-of-sync replica takes over and the old leader's last
record is lost, as in Kafka."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from actors.broker.broker import broker_ref
from actors.broker.isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS
from actors.runtime.actor import Node
from actors.runtime.clock import VirtualClock
from actors.runtime.tracer import MemorySink
from actors.zk import kafka_zk
from cluster.launch.cluster import Cluster
from protocol.control import TopicPartition
from protocol.errors import ErrorCode
from protocol.ids import TopicName
from protocol.kafka_data import (
    CONSUMER_REPLICA_ID,
    DEBUG_REPLICA_ID,
    FetchPartition,
    FetchRequestData,
    FetchResponseData,
    FetchTopic,
    ProducePartitionData,
    ProduceRequestData,
    ProduceResponseData,
    ProduceTopicData,
)
from tests.support.record_batches import client_batch, decode_batches
from tests.support.virtual_cluster import run_with_client

TP = TopicPartition(TopicName("t"), 0)
LAG_S = DEFAULT_REPLICA_LAG_TIME_MAX_MS / 1000


class Rig:
    def __init__(self, cluster: Cluster, client: Node, clock: VirtualClock, sink: MemorySink):
        self.cluster, self.client, self.clock, self.sink = cluster, client, clock, sink

    async def until(self, check: Callable[[], Awaitable[bool]], timeout: float) -> None:
        """Poll ``check`` every 100 ms of virtual time for at most ``timeout`` seconds."""
        with anyio.fail_after(timeout):
            while not await check():
                await self.clock.sleep(0.1)

    async def produce(self, *values: bytes, to: int = 0) -> None:
        request = ProduceRequestData(
            acks=1,
            timeout_ms=5_000,
            topic_data=(
                ProduceTopicData(
                    name=TP.topic,
                    partition_data=(
                        ProducePartitionData(index=0, records=client_batch(list(values))),
                    ),
                ),
            ),
        )
        reply = await self.client.ask(broker_ref(to), request, timeout=10)
        assert isinstance(reply, ProduceResponseData)
        assert reply.responses[0].partition_responses[0].error_code is ErrorCode.NONE

    async def produce_once_led(
        self, *values: bytes, to: int = 0, copied_to: tuple[int, ...] = ()
    ) -> None:
        """Produce as soon as broker ``to`` leads the partition, then wait until the
        brokers ``copied_to`` hold exactly what was produced so far."""

        async def produced() -> bool:
            try:
                await self.produce(*values, to=to)
            except AssertionError:
                return False
            return True

        await self.until(produced, timeout=30)

        async def copied() -> bool:
            return all([await self.values_on(b) == list(values) for b in copied_to])

        await self.until(copied, timeout=30)

    async def values_on(self, broker: int) -> list[bytes | None]:
        """A broker's copy of the partition, read as a debugging replica (to the log end)."""
        return await self._fetched(broker, DEBUG_REPLICA_ID)

    async def consumed_from(self, broker: int) -> list[bytes | None]:
        """What a consumer reads of the partition from ``broker`` (below its high
        watermark); nothing if it does not lead it."""
        return await self._fetched(broker, CONSUMER_REPLICA_ID)

    async def _fetched(self, broker: int, replica_id: int) -> list[bytes | None]:
        request = FetchRequestData(
            replica_id=replica_id,
            max_wait_ms=0,
            min_bytes=0,
            topics=(
                FetchTopic(
                    topic=TP.topic,
                    partitions=(
                        FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20),
                    ),
                ),
            ),
        )
        reply = await self.client.ask(broker_ref(broker), request, timeout=10)
        assert isinstance(reply, FetchResponseData)
        data = reply.responses[0].partitions[0]
        return [v for b in decode_batches(data.records) for v in b.values]

    async def state(self) -> tuple[int, int, tuple[int, ...]]:
        """(leader, leader epoch, ISR) of the state znode."""
        assert self.cluster.store is not None
        session = await self.cluster.store.open_session(name="probe")
        try:
            state = await kafka_zk.get_partition_state(session, TP)
        finally:
            await session.close()
        assert state is not None
        return state.state.leader, state.state.leader_epoch, tuple(state.state.isr)

    async def isr(self) -> tuple[int, ...]:
        return (await self.state())[2]


def run(
    tmp_path: Path,
    body: Callable[[Rig], Awaitable[None]],
    *,
    replicas: tuple[int, ...] = (0, 1, 2),
    config: dict[str, str] | None = None,
    broker_config: dict[str, str] | None = None,
) -> None:
    async def main(cluster: Cluster, client: Node, clock: VirtualClock, sink: MemorySink) -> None:
        assert cluster.store is not None
        admin = await cluster.store.open_session(name="admin")
        await kafka_zk.write_topic(admin, TP.topic, {0: list(replicas)}, config or {})
        await body(Rig(cluster, client, clock, sink))

    run_with_client(tmp_path, main, config=broker_config)


def test_a_cut_off_follower_leaves_the_isr_after_the_lag_and_rejoins_caught_up(
    tmp_path: Path,
) -> None:
    """Followers copy the leader's records; broker 2, cut off from brokers 0 and 1, stops
    getting them and the leader proposes it out of the ISR after replica.lag.time.max.ms
    (not before); once the network heals it fetches what it missed and is back in the ISR,
    every copy the same."""

    async def body(rig: Rig) -> None:
        assert await rig.cluster.controller_id() != 2

        await rig.produce_once_led(b"a", b"b", copied_to=(1, 2))
        assert await rig.isr() == (0, 1, 2)

        network = rig.cluster.network
        assert network is not None
        network.partition(["broker-2"], ["broker-0", "broker-1", "client"])
        cut = rig.clock.now()
        await rig.produce(b"c")

        async def shrunk() -> bool:
            return await rig.isr() == (0, 1)

        await rig.until(shrunk, timeout=3 * LAG_S)
        assert LAG_S < rig.clock.now() - cut <= 1.5 * LAG_S + 5
        assert await rig.values_on(1) == [b"a", b"b", b"c"]

        network.heal()

        async def rejoined() -> bool:
            return await rig.isr() == (0, 1, 2)

        await rig.until(rejoined, timeout=60)
        assert await rig.values_on(2) == [b"a", b"b", b"c"]
        altered = [e.fields["to_isr"] for e in rig.sink.of("event", "isr_altered")]
        assert altered[-2:] == [[0, 1], [0, 1, 2]]

    run(tmp_path, body)


def fetches_between(rig: Rig, follower: int, leader: int, since: int) -> int:
    """Fetch requests ``follower``'s fetchers sent ``leader`` after trace event ``since``."""
    return sum(
        1
        for e in rig.sink.of("send", "FetchRequestData")[since:]
        if e.fields["src"].startswith(f"broker-{follower}/")
        and e.fields["dst"].startswith(f"broker-{leader}/")
    )


@pytest.mark.parametrize(("wait_ms", "lag_ms"), [(None, None), (250, 4_000)])
def test_an_idle_follower_long_polls_and_a_silent_one_leaves_after_the_configured_lag(
    tmp_path: Path, wait_ms: int | None, lag_ms: int | None
) -> None:
    """With nothing produced, each follower's fetch waits in the leader's purgatory for
    replica.fetch.wait.max.ms (500 ms by default, or the broker config): about two
    fetches a second per follower-leader pair by default, four at 250 ms, not a spin.
    A follower cut off leaves the ISR after replica.lag.time.max.ms (30 s by default, or
    the broker config) and before 1.5 times it."""
    config = {}
    if wait_ms is not None and lag_ms is not None:
        config = {"replica.fetch.wait.max.ms": str(wait_ms), "replica.lag.time.max.ms": str(lag_ms)}
    wait_s = (wait_ms or 500) / 1000
    lag_s = (lag_ms or DEFAULT_REPLICA_LAG_TIME_MAX_MS) / 1000

    async def body(rig: Rig) -> None:
        await rig.produce_once_led(b"a", copied_to=(1, 2))
        window = 20.0
        since = len(rig.sink.of("send", "FetchRequestData"))
        await rig.clock.sleep(window)
        for follower in (1, 2):
            fetches = fetches_between(rig, follower, 0, 0)
            idle = fetches_between(rig, follower, 0, since)
            assert window / wait_s - 2 <= idle <= window / wait_s + 2, (fetches, idle)

        network = rig.cluster.network
        assert network is not None
        network.partition(["broker-2"], ["broker-0", "broker-1", "client"])
        cut = rig.clock.now()
        await rig.produce(b"b")  # behind the log end: out of sync once the lag passes

        async def shrunk() -> bool:
            return await rig.isr() == (0, 1)

        await rig.until(shrunk, timeout=3 * lag_s)
        # Lag counts from its last catch-up, at most one long poll before the cut.
        assert lag_s - wait_s < rig.clock.now() - cut <= 1.5 * lag_s + 1

    run(tmp_path, body, broker_config=config)


def test_unclean_election_elects_the_out_of_sync_replica_and_loses_the_tail(
    tmp_path: Path,
) -> None:
    """Topic on [0, 1] with unclean.leader.election.enable: broker 1, cut off from the
    leader, misses record c and leaves the ISR; the leader dies; the controller elects
    broker 1 although it is out of sync (ISR [1], a newer epoch), it takes record d at offset
    2; the old leader comes back as a follower, truncates c and copies d: c is lost."""

    async def body(rig: Rig) -> None:
        await rig.produce_once_led(b"a", b"b", copied_to=(1,))
        network = rig.cluster.network
        assert network is not None
        network.partition(["broker-1"], ["broker-0"])
        await rig.produce(b"c")

        async def shrunk() -> bool:
            return await rig.isr() == (0,)

        await rig.until(shrunk, timeout=3 * LAG_S)
        _, epoch, _ = await rig.state()
        await rig.cluster.crash_broker(0)
        network.heal()

        async def elected() -> bool:
            return (await rig.state())[0] == 1

        await rig.until(elected, timeout=60)
        leader, new_epoch, isr = await rig.state()
        assert (leader, isr) == (1, (1,))
        assert new_epoch > epoch
        assert await rig.values_on(1) == [b"a", b"b"]

        await rig.produce_once_led(b"d", to=1)
        await rig.cluster.start_broker(0)

        async def truncated() -> bool:
            try:
                return await rig.values_on(0) == [b"a", b"b", b"d"]
            except Exception:  # the restarted broker may not serve yet
                return False

        await rig.until(truncated, timeout=60)
        assert await rig.values_on(1) == [b"a", b"b", b"d"]
        cuts = [e for e in rig.sink.of("event", "replica_truncated") if e.node == "broker-0"]
        assert [(c.fields["offset"], c.fields["log_end_offset"]) for c in cuts] == [(2, 3)]

    run(
        tmp_path,
        body,
        replicas=(0, 1),
        config={"unclean.leader.election.enable": "true"},
    )


def test_a_leader_elected_alone_raises_its_high_watermark_at_once(tmp_path: Path) -> None:
    """Broker 1 copies a and b but is cut off before the leader's next answer tells it the
    high watermark; the leader dies and broker 1, alone in the ISR, is elected. Its high
    watermark rises to its log end with the LeaderAndIsr (Partition.makeLeader ends with
    maybeIncrementLeaderHW), so a consumer reads a and b before anything is appended."""

    async def body(rig: Rig) -> None:
        await rig.produce_once_led(b"a", b"b", copied_to=(1,))
        network = rig.cluster.network
        assert network is not None
        network.partition(["broker-1"], ["broker-0"])
        await rig.cluster.crash_broker(0)
        network.heal()

        async def elected() -> bool:
            return (await rig.state())[0] == 1

        await rig.until(elected, timeout=60)
        moved = [
            e.fields for e in rig.sink.of("event", "high_watermark_moved") if e.node == "broker-1"
        ]
        assert moved[-1]["to"] == 2

        async def readable() -> bool:
            return await rig.consumed_from(1) == [b"a", b"b"]

        await rig.until(readable, timeout=5)

    run(tmp_path, body, replicas=(0, 1))
