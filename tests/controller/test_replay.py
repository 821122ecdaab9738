"""Replaying a recorded trace through the current controller code: a deterministic chaos
run replays to a match, and a controller whose behaviour changed diverges at the first
event where it acts differently, with the recorded and replayed outputs side by side."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.controller import election
from actors.controller.events import (
    ControlledShutdown,
    ControllerEvent,
    ElectionTrigger,
    LeaderAndIsrResponseReceived,
    ReplicaLeaderElection,
    TopicDeletionStopReplicaResponseReceived,
)
from actors.controller.recording import (
    CONTROLLER_INPUTS,
    INIT,
    INPUT,
    STORE,
    decode_event,
    encode_event,
)
from actors.controller.replay import RunReplay, replay_events, replay_trace
from actors.controller.topic_deletion import TopicDeletionManager
from cluster.chaos import RunOptions, load_scenario, run_scenario
from protocol.control import (
    LeaderAndIsrResponse,
    PartitionError,
    TopicPartition,
)
from protocol.controller import ElectionType
from protocol.errors import ErrorCode
from protocol.ids import BrokerEpoch, BrokerId, TopicName
from protocol.trace import TraceEvent
from tests.support.controller_cluster import run_cluster, start
from tests.support.fake_brokers import ControllerCluster
from tests.support.planted import deletion_without_delete_phase

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = "delete-with-broker-down"
"""A broker dies (offline leader elections), a topic is deleted while it is down and the
deletion completes once it is back: elections, deletion phases and failover."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trace of a deterministic chaos run (chaos runs record the controllers' inputs)."""
    out = tmp_path_factory.mktemp("replay")
    scenario = load_scenario(ROOT / "scenarios" / f"{SCENARIO}.yaml")
    result = run_scenario(scenario, RunOptions(run_dir=out / SCENARIO / "seed-1", seed=1))
    assert result.error is None
    return out / SCENARIO / "seed-1" / "trace.jsonl"


def trace_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, lines: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def divergence_of(result: RunReplay) -> tuple[str, int, str]:
    first = result.first_divergence
    assert first is not None, result
    inc, d = first
    return inc.node, d.event_seq, d.event


def test_a_recorded_chaos_run_replays_to_a_match(recorded: Path) -> None:
    """Every controller incarnation of the run, fed its recorded events, does exactly
    what it did: the same store calls, clock readings, requests and transitions."""
    result = replay_trace(recorded)
    assert result.error is None
    assert result.match, result.first_divergence
    assert result.run == SCENARIO
    assert result.seed == 1
    # Three brokers started, one restarted: four incarnations; the active controller's
    # carries the run (creation, failure, deletion, recovery).
    assert [i.node for i in result.incarnations] == ["broker-0", "broker-1", "broker-2", "broker-1"]
    assert all(i.match and i.divergence is None for i in result.incarnations)
    busiest = max(result.incarnations, key=lambda i: i.events)
    assert busiest.events >= 15
    assert busiest.outputs >= 100
    kinds = {
        (line["kind"], line["type"])
        for line in trace_lines(recorded)[1:]
        if line["node"] == busiest.node
    }
    assert {("event", "controller_store"), ("event", "controller_request")} <= kinds
    assert ("transition", "partition") in kinds


def _differing_ops(want: dict[str, Any], got: dict[str, Any]) -> tuple[Any, Any]:
    """The ops of the store write that differs: a lone multi's, or those of the first
    differing multi of a pipelined ``multi_each`` (the controller writes the states of a
    batch of partitions at once)."""
    if "ops" in want:
        return want["ops"], got["ops"]
    return next((w, g) for w, g in zip(want["batches"], got["batches"], strict=True) if w != g)


def test_a_controller_electing_another_leader_diverges_at_the_broker_failure(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed leader election (the last live in-sync replica instead of the first)
    shows up at the BrokerChange event that lost a leader: the recorded state write names
    one leader and the replayed one another."""
    original = election.offline_partition_leader

    def last_in_sync(
        assignment: Sequence[BrokerId], isr: Sequence[BrokerId], live: object, unclean: bool
    ) -> BrokerId | None:
        candidates = [r for r in assignment if r in live and r in isr]  # type: ignore[operator]
        return candidates[-1] if candidates else original(assignment, isr, live, unclean)  # type: ignore[arg-type]

    monkeypatch.setattr(election, "offline_partition_leader", last_in_sync)
    result = replay_trace(recorded)
    assert not result.match
    node, event_seq, event = divergence_of(result)
    assert (node, event) == ("broker-0", "BrokerChange")
    first = result.first_divergence
    assert first is not None
    d = first[1]
    by_seq = {line["seq"]: line for line in trace_lines(recorded)[1:]}
    assert by_seq[event_seq]["type"] == INPUT
    assert d.output_seq is not None
    assert by_seq[d.output_seq]["type"] == STORE
    want_ops, got_ops = _differing_ops(d.expected["args"], d.got["args"])
    want = json.loads(want_ops[-1]["data"])
    got = json.loads(got_ops[-1]["data"])
    assert want["leader"] != got["leader"]
    assert want["isr"] == got["isr"]
    # Incarnations before the diverging one still match; none is replayed past it.
    assert result.incarnations[0].events == d.step + 1


def test_a_controller_skipping_the_stop_replica_delete_phase_diverges(
    recorded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deletion that stops replicas but never starts deleting them (no
    ReplicaDeletionStarted, so no StopReplica delete=true) diverges at TopicDeletion."""

    monkeypatch.setattr(
        TopicDeletionManager, "on_partition_deletion", deletion_without_delete_phase
    )
    result = replay_trace(recorded)
    assert not result.match
    node, _, event = divergence_of(result)
    assert (node, event) == ("broker-0", "TopicDeletion")
    first = result.first_divergence
    assert first is not None
    d = first[1]
    assert d.expected["transition"] == "replica"
    assert d.expected["to_state"] == "ReplicaDeletionStarted"
    assert d.got is None or d.got.get("to_state") != "ReplicaDeletionStarted"


def test_a_store_read_the_recording_does_not_have_diverges_there(
    recorded: Path, tmp_path: Path
) -> None:
    """A recording whose read names another path (as if the controller had read
    something else) diverges at that read: expected the recorded call, got the real one."""
    lines = trace_lines(recorded)
    target = next(
        line
        for line in lines[1:]
        if line["type"] == STORE
        and line["fields"]["op"] == "children"  # type: ignore[index]
        and line["fields"]["path"] == "/brokers/topics"  # type: ignore[index]
        and line["node"] == "broker-0"
    )
    target["fields"]["path"] = "/brokers/elsewhere"  # type: ignore[index]
    result = replay_trace(write_lines(tmp_path / "trace.jsonl", lines))
    first = result.first_divergence
    assert first is not None
    inc, d = first
    assert inc.node == "broker-0"
    assert d.output_seq == target["seq"]
    assert d.expected["path"] == "/brokers/elsewhere"
    assert d.got == {"store": "children", "path": "/brokers/topics"}


def test_an_event_cut_short_by_the_end_of_the_recording_matches_as_far_as_recorded(
    recorded: Path, tmp_path: Path
) -> None:
    """A trace that ends inside an event (a crash, the end of a run) compares that event's
    recorded prefix and reports the incarnation as cut, not diverged."""
    lines = trace_lines(recorded)
    inputs = [i for i, line in enumerate(lines) if line.get("type") == INPUT]
    # An event with several outputs: cut after its second store call.
    for begin in reversed(inputs):
        stores = [
            i
            for i in range(begin + 1, len(lines))
            if lines[i]["type"] == STORE and lines[i]["node"] == lines[begin]["node"]
        ][:3]
        if len(stores) == 3 and all(
            lines[i]["type"] != "controller_event_end" for i in range(begin, stores[2])
        ):
            break
    cut = lines[: stores[1] + 1]
    result = replay_trace(write_lines(tmp_path / "trace.jsonl", cut))
    assert result.match, result.first_divergence
    assert any(i.cut for i in result.incarnations)


def test_a_trace_without_a_recording_is_an_error_not_a_match(
    recorded: Path, tmp_path: Path
) -> None:
    """Nothing to replay (recorded without ``controller_inputs``) is reported as such."""
    lines = [line for line in trace_lines(recorded) if line.get("type") != INIT]
    result = replay_trace(write_lines(tmp_path / "trace.jsonl", lines))
    assert not result.match
    assert result.error is not None
    assert "no controller recording" in result.error
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert "bad.jsonl: not a kemu trace" in (replay_trace(bad).error or "")


def events_of_every_type() -> Iterator[ControllerEvent]:
    tp = TopicPartition(TopicName("t"), 3)
    yield LeaderAndIsrResponseReceived(
        broker_id=BrokerId(2),
        response=LeaderAndIsrResponse(
            error_code=ErrorCode.NONE,
            partition_errors=(
                PartitionError(
                    topic=tp.topic, partition=3, error_code=ErrorCode.KAFKA_STORAGE_ERROR
                ),
            ),
        ),
    )
    yield TopicDeletionStopReplicaResponseReceived(
        broker_id=BrokerId(1),
        error_code=ErrorCode.NONE,
        partition_errors=((tp, ErrorCode.KAFKA_STORAGE_ERROR),),
    )
    yield ReplicaLeaderElection(
        partitions=(tp,),
        election_type=ElectionType.UNCLEAN,
        trigger=ElectionTrigger.ADMIN_CLIENT,
        on_result=lambda results: None,
    )
    yield ReplicaLeaderElection()
    yield ControlledShutdown(
        broker_id=BrokerId(1), broker_epoch=BrokerEpoch(7), reply=lambda response: None
    )


def test_every_event_round_trips_through_its_recorded_form() -> None:
    """Events are recorded losslessly through JSON; callbacks come back as the replay's
    own (``true``/``null`` in the record)."""
    replies: list[tuple[str, str]] = []

    def callback(event: str, field: str) -> object:
        replies.append((event, field))
        return lambda *args: None

    for event in events_of_every_type():
        encoded = msgspec.json.decode(msgspec.json.encode(encode_event(event)))
        back = decode_event(encoded, callback)  # type: ignore[arg-type]
        assert type(back) is type(event)
        for field in event.__struct_fields__:
            mine, theirs = getattr(event, field), getattr(back, field)
            if callable(mine):
                assert callable(theirs)
            else:
                assert mine == theirs, field
    assert replies == [("ReplicaLeaderElection", "on_result"), ("ControlledShutdown", "reply")]
    with pytest.raises(ValueError, match="unknown controller event"):
        decode_event({"type": "NoSuchEvent"}, callback)  # type: ignore[arg-type]


def test_controllers_record_only_when_asked_and_a_controlled_shutdown_replays() -> None:
    """With the tracer's default details nothing is recorded (no cost); with
    ``controller_inputs`` a run with a controlled shutdown (an event with a reply
    callback) replays to a match."""

    async def plain(cluster: ControllerCluster) -> None:
        await start(cluster, 2)
        await cluster.create_topic("orders", {0: [0, 1]})
        await cluster.settle()
        recorded = {e.type for e in cluster.sink if e.type and e.type.startswith("controller_")}
        assert recorded.isdisjoint({INIT, INPUT, STORE, "controller_request"})

    run_cluster(plain)

    async def recording(cluster: ControllerCluster) -> None:
        cluster.tracer.details = frozenset({CONTROLLER_INPUTS})
        await start(cluster, 3)
        await cluster.create_topic("orders", {0: [1, 2], 1: [2, 0]})
        await cluster.settle()
        await cluster.stop_broker(1)
        await cluster.settle()
        shutdowns = [
            e
            for e in cluster.sink.of("event", INPUT)
            if e.fields["event"]["type"] == "ControlledShutdown"
        ]
        assert shutdowns
        assert shutdowns[0].fields["event"]["reply"] is True
        events.extend(cluster.sink)

    events: list[TraceEvent] = []
    run_cluster(recording, controlled_shutdown=True)
    results = replay_events(events)
    assert len(results) == 3
    assert all(r.match for r in results), [r.divergence for r in results]
