"""A follower's replica fetcher (``actors.broker.replica_fetcher``) against a leader with
real partition logs, on the virtual clock over the in-process Network: catching up,
truncating as a former leader, riding out a network partition, the data an unclean
election loses, and a leader whose log start passed the follower."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from actors.log.partition_log import Log
from actors.runtime.clock import VirtualClock, run_virtual
from protocol.ids import BrokerId
from protocol.replication import (
    AddFetcherPartitions,
    FetcherPartitionsRemoved,
    InitialFetchState,
    RemoveFetcherPartitions,
    ReplicaState,
)
from tests.support.open_logs import OPENED, close_opened_logs  # noqa: F401 - autouse
from tests.support.record_batches import client_batch, decode_batches
from tests.support.replication import TP, ReplicationRig, open_log, replication_rig


def write(log: Log, epoch: int, *values: bytes) -> None:
    """Append one batch per value as the leader of ``epoch`` (starting the epoch first)."""
    log.maybe_assign_epoch_start_offset(epoch, log.log_end_offset)
    for value in values:
        log.append_as_leader(client_batch([value]), epoch)


def content(log: Log) -> list[tuple[int, int, bytes | None]]:
    """(offset, leader epoch, value) of every record from the log start."""
    data = log.read(log.log_start_offset, 1 << 30).records
    return [
        (offset, d.batch.partition_leader_epoch, value)
        for d in decode_batches(data)
        for offset, value in zip(d.offsets, d.values, strict=True)
    ]


def run(
    tmp_path: Path,
    prepare: Callable[[Log, Log], int],
    body: Callable[[ReplicationRig, Log, Log], Awaitable[None]],
    *,
    fetch_offset: int = 0,
) -> None:
    """Leader log and follower log made by ``prepare`` (which returns the leader epoch),
    then the follower's fetcher given the partition at ``fetch_offset``, then ``body``."""
    clock = VirtualClock()

    async def main() -> None:
        leader_log = OPENED.keep(open_log(tmp_path / "leader" / "t-0", clock))
        follower_log = OPENED.keep(open_log(tmp_path / "follower" / "t-0", clock))
        epoch = prepare(leader_log, follower_log)
        async with replication_rig({TP: leader_log}, {TP: epoch}, {TP: follower_log}, clock) as rig:
            rig.fetcher.tell(
                rig.fetcher.ref,
                AddFetcherPartitions(
                    partitions=(
                        InitialFetchState(
                            partition=TP,
                            leader=BrokerId(0),
                            leader_epoch=epoch,
                            fetch_offset=fetch_offset,
                        ),
                    )
                ),
            )
            await body(rig, leader_log, follower_log)

    run_virtual(main)


def test_an_empty_follower_catches_up_byte_for_byte(tmp_path: Path) -> None:
    """A new follower truncates nothing (its epoch cache is empty: it cuts at its high
    watermark, 0), fetches everything with its own id, and ends with the leader's bytes,
    its high watermark following the leader's."""

    def prepare(leader: Log, follower: Log) -> int:
        write(leader, 0, b"a", b"b")
        write(leader, 1, b"c")
        return 1

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(lambda: follower.log_end_offset == 3)
        await rig.until(lambda: rig.follower.high_watermarks.get(TP) == 3)
        assert content(follower) == content(leader)
        assert follower.read(0, 1 << 30).records == leader.read(0, 1 << 30).records
        assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
        status = await rig.status()
        (state,) = status.partitions
        assert (state.state, state.fetch_offset) == (ReplicaState.FETCHING, 3)
        assert rig.sink.of("event", "replica_truncated") == []
        # New data on the leader follows.
        write(leader, 1, b"d")
        await rig.until(lambda: follower.log_end_offset == 4)
        assert content(follower) == content(leader)

    run(tmp_path, prepare, body)


def test_a_former_leader_truncates_what_it_wrote_alone_then_follows(tmp_path: Path) -> None:
    """KIP-101: the old leader wrote offsets 2-3 in epoch 1 that nobody fetched; the new
    leader (epoch 2) wrote other records from offset 2. Asked for epoch 1, the new leader
    answers (0, 2): the old leader cuts at 2 and then holds exactly the new leader's log."""

    def prepare(leader: Log, follower: Log) -> int:
        write(leader, 0, b"a", b"b")
        write(follower, 0, b"a", b"b")
        write(follower, 1, b"lost-1", b"lost-2")
        write(leader, 2, b"new-1", b"new-2", b"new-3")
        return 2

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(
            lambda: follower.log_end_offset == 5 and content(follower)[2][2] == b"new-1"
        )
        assert content(follower) == content(leader)
        (cut,) = rig.sink.of("event", "replica_truncated")
        assert (cut.fields["offset"], cut.fields["log_end_offset"]) == (2, 4)
        assert follower.leader_epoch_cache.entries == ((0, 0), (2, 2))

    run(tmp_path, prepare, body, fetch_offset=2)


def test_unclean_election_loses_the_old_leaders_tail_exactly(tmp_path: Path) -> None:
    """An out-of-sync replica (offsets 0-1 only) is elected uncleanly in epoch 1 and writes
    offsets 2-3; the old leader, which had offsets 0-4 in epoch 0, truncates to 2 (the end
    of epoch 0 on the new leader) and takes the new records: offsets 2-4 of epoch 0 are
    gone for good, as in Kafka, and both logs are the same."""

    def prepare(leader: Log, follower: Log) -> int:
        write(follower, 0, b"a", b"b", b"c", b"d", b"e")
        write(leader, 0, b"a", b"b")
        write(leader, 1, b"x", b"y")
        return 1

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(lambda: content(follower) == content(leader))
        assert [v for _, _, v in content(follower)] == [b"a", b"b", b"x", b"y"]
        (cut,) = rig.sink.of("event", "replica_truncated")
        assert (cut.fields["offset"], cut.fields["log_end_offset"]) == (2, 5)

    run(tmp_path, prepare, body, fetch_offset=0)


def test_a_partitioned_follower_stops_and_catches_up_after_the_heal(tmp_path: Path) -> None:
    """Cut off from the leader, the fetcher's requests go unanswered (it waits
    replica.socket.timeout.ms, then backs off) and nothing is appended; once the network
    heals it fetches what the leader wrote meanwhile."""

    def prepare(leader: Log, follower: Log) -> int:
        write(leader, 0, b"a")
        return 0

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(lambda: follower.log_end_offset == 1)
        rig.network.partition(["broker-0"], ["broker-1"])
        fetches = rig.leader.fetches
        write(leader, 0, b"b", b"c")
        cut_at = rig.clock.now()
        await rig.clock.sleep(90)
        assert follower.log_end_offset == 1
        assert rig.leader.fetches == fetches
        rig.network.heal()
        await rig.until(lambda: follower.log_end_offset == 3)
        assert content(follower) == content(leader)
        assert rig.clock.now() - cut_at >= 90

    run(tmp_path, prepare, body)


def test_a_follower_below_the_leaders_log_start_starts_over_there(tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE with the leader's log start above the follower's log end: the
    follower asks LATEST, then EARLIEST, empties its log to start at the leader's log
    start, and fetches from there (fetchOffsetAndTruncate)."""

    def prepare(leader: Log, follower: Log) -> int:
        write(leader, 0, b"a", b"b", b"c", b"d")
        leader.maybe_increment_log_start_offset(2, 4)
        return 0

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(lambda: follower.log_end_offset == 4)
        assert follower.log_start_offset == 2
        assert content(follower) == content(leader)
        assert [o for o, _, _ in content(follower)] == [2, 3]

    run(tmp_path, prepare, body)


def test_a_fetcher_waiting_on_its_leader_drops_a_partition_at_once(tmp_path: Path) -> None:
    """The fetcher's mailbox stays free while its Fetch is out: cut off from the leader
    (the Fetch waits replica.socket.timeout.ms, 30 s), an asked removal is answered at
    once, the partition gone from its states; the late answer changes nothing."""

    def prepare(leader: Log, follower: Log) -> int:
        write(leader, 0, b"a")
        return 0

    async def body(rig: ReplicationRig, leader: Log, follower: Log) -> None:
        await rig.until(lambda: follower.log_end_offset == 1)
        rig.network.partition(["broker-0"], ["broker-1"])
        fetches = rig.leader.fetches
        await rig.clock.sleep(1)  # the next long poll is out, and will go unanswered
        asked_at = rig.clock.now()
        reply = await rig.nodes["broker-1"].ask(
            rig.fetcher.ref, RemoveFetcherPartitions(partitions=(TP,)), timeout=5
        )
        assert isinstance(reply, FetcherPartitionsRemoved)
        assert rig.clock.now() - asked_at < 1
        rig.network.heal()
        assert (await rig.status()).partitions == ()
        write(leader, 0, b"b")
        await rig.clock.sleep(60)
        assert follower.log_end_offset == 1
        assert rig.leader.fetches == fetches
        assert not [e for e in rig.sink.events if e.type == "replica_fetch_failed"]

    run(tmp_path, prepare, body)
