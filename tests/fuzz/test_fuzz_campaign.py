"""The fuzzer against real servers (``kemu up`` children): a short campaign per target
finds no crash and keeps the server's memory bounded; a server that dies or stops
answering is reported as a crash, with its inputs saved, and replaying them finds the
input after which it failed. ``scripts/fuzz.sh`` runs the long campaigns."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster.fuzz import TARGETS, Outcome, Target, replay, run_target
from cluster.fuzz.servers import Endpoints, KemuServer
from cluster.fuzz.targets import PROBE_CORRELATION
from cluster.kafka.apis import encode_api_versions_request

pytestmark = [pytest.mark.slow, pytest.mark.processes]  # kemu up in a child process

INPUTS = 150
RSS_BOUND = 64 * 1024 * 1024  # bytes a short campaign may add to a server's RSS


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_short_campaign_finds_no_crash_and_memory_stays_bounded(
    name: str, tmp_path: Path
) -> None:
    """``INPUTS`` inputs on one target: every one is written and its exchange ends (the
    probe answered or the connection closed), the server passes every liveness probe,
    and its RSS grows by less than ``RSS_BOUND``."""
    report = run_target(
        TARGETS[name], tmp_path, inputs=INPUTS, seed=1, batch=50, crash_dir=tmp_path / "crashes"
    )
    assert report.failure is None, f"{report.failure}: {report.reproducer}"
    assert report.inputs == INPUTS
    assert sum(report.outcomes.values()) == INPUTS
    assert report.outcomes[Outcome.ANSWERED.value] > 0  # some inputs were taken whole
    assert report.outcomes[Outcome.CLOSED.value] > 0  # and some refused
    assert report.rss_start > 0
    assert report.rss_end > 0
    assert report.rss_end - report.rss_start < RSS_BOUND
    assert not (tmp_path / "crashes").exists()


def _on_call(target: Target, call: int, act: Callable[[Endpoints], None]) -> Target:
    """``target`` whose ``call``-th exchange (counting from 1) is followed by ``act``."""
    calls = 0

    def exchange(endpoints: Endpoints, case: object) -> Outcome:
        nonlocal calls
        calls += 1
        outcome = target.exchange(endpoints, case)
        if calls == call:
            act(endpoints)
        return outcome

    return dataclasses.replace(target, exchange=exchange)


def _kill(endpoints: Endpoints) -> None:
    """SIGKILL the server (a child of this process) and wait until it has exited, leaving
    it for the fuzzer to reap (``WNOWAIT``)."""
    os.kill(endpoints.broker_pid, signal.SIGKILL)
    os.waitid(os.P_PID, endpoints.broker_pid, os.WEXITED | os.WNOWAIT)


@pytest.mark.timeout(300)
def test_a_server_that_dies_is_a_crash_with_a_reproducer_that_replays(tmp_path: Path) -> None:
    """The Kafka server killed after the fifth input: the campaign stops there and
    reports the crash; the five inputs are saved with the server's output, and replaying
    them on a fresh server finds the fifth as the one after which it died."""
    crashes = tmp_path / "crashes"
    killer = _on_call(TARGETS["kafka"], 5, _kill)
    report = run_target(killer, tmp_path, inputs=INPUTS, seed=2, batch=50, crash_dir=crashes)
    assert report.inputs == 5
    assert report.failure is not None
    assert "exited with status -9" in report.failure
    assert report.reproducer is not None
    assert report.reproducer.parent == crashes
    saved = json.loads((report.reproducer / "crash.json").read_text())
    assert saved["target"] == "kafka"
    assert len(saved["cases"]) == 5
    assert (report.reproducer / "server-output.txt").exists()
    replayed = replay(_on_call(TARGETS["kafka"], 5, _kill), report.reproducer, tmp_path)
    assert replayed.failed_at == 4
    assert replayed.inputs == 5
    assert replayed.problem is not None
    assert "exited" in replayed.problem


@pytest.mark.timeout(300)
def test_a_server_that_stops_answering_fails_the_probe(tmp_path: Path) -> None:
    """The Kafka server frozen (SIGSTOP) after the third input: its process still runs,
    but Metadata on a fresh connection gets no answer, which is a crash; the fourth
    input, whose exchange timed out, is saved alone."""
    frozen: list[int] = []

    def freeze(endpoints: Endpoints) -> None:
        os.kill(endpoints.broker_pid, signal.SIGSTOP)
        frozen.append(endpoints.broker_pid)

    try:
        report = run_target(
            _on_call(TARGETS["kafka"], 3, freeze),
            tmp_path,
            inputs=INPUTS,
            seed=3,
            batch=50,
            crash_dir=tmp_path / "crashes",
        )
    finally:
        for pid in frozen:  # run_target has killed it, unless it failed before that
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    assert frozen
    assert report.failure is not None
    assert report.failure.startswith("Metadata on a fresh connection failed")
    assert report.inputs == 4  # the fourth timed out, then the probe failed
    assert report.outcomes[Outcome.TIMED_OUT.value] == 1
    [slow] = report.slow  # the input whose exchange timed out, saved alone
    assert slow.parent == tmp_path / "crashes"
    saved = json.loads((slow / "crash.json").read_text())
    assert (saved["problem"], len(saved["cases"])) == ("timed_out", 1)


@pytest.mark.timeout(120)
def test_an_input_using_the_probes_correlation_id_is_not_taken_for_the_probe(
    tmp_path: Path,
) -> None:
    """A valid request carrying the correlation id of the probe that follows it gets its
    own answer first; the exchange passes over it and ends at the probe's Metadata."""
    server = KemuServer(tmp_path, "kafka", processes=False)
    endpoints = server.start()
    try:
        request = encode_api_versions_request(
            api_version=3, correlation_id=PROBE_CORRELATION, client_id="f"
        )
        assert TARGETS["kafka"].exchange(endpoints, request) is Outcome.ANSWERED
    finally:
        server.stop()


@pytest.mark.timeout(300)
def test_keep_going_restarts_the_server_after_a_crash(tmp_path: Path) -> None:
    """With ``keep_going`` the server killed after the fifth input is replaced: the run
    does all its inputs, counts one crash with its reproducer, and the last server
    served the inputs after it."""
    report = run_target(
        _on_call(TARGETS["kafka"], 5, _kill),
        tmp_path,
        inputs=20,
        seed=4,
        batch=50,
        crash_dir=tmp_path / "crashes",
        keep_going=True,
    )
    assert report.inputs == 20
    assert report.crashes == 1
    assert len(report.reproducers) == 1
    assert "exited with status -9" in report.failures[0]
    assert report.last_server_inputs == 15
    assert report.rss_end > 0
