"""Logs: every line timestamped (ISO 8601, UTC); each broker's ``server.log``,
``controller.log`` and ``state-change.log`` in its log dir, split by logger as Kafka's
log4j.properties splits them; ``--log-format json``; ``--log-level DEBUG`` adds the
messages between actors; a bad level or format is argparse's refusal. Every case runs the
real command in a child process."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.kemu_commands import kemu, running_up
from tests.support.waiting import wait_until

FILES = ("server.log", "controller.log", "state-change.log")
TIMEOUT = 30.0
ISO_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
CONSOLE_LINE = re.compile(
    rf"^(?P<ts>{ISO_UTC.pattern}) \[(?P<level>debug|info|warning|error|critical)\s*\]"
    r" (?P<event>\S+) \[(?P<logger>[\w.]+)\] (?P<fields>.*)$"
)


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, (pattern, text)
    return match.group(1)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _console(path: Path) -> list[dict[str, str]]:
    """Each line of a console-format log file, parsed; a line of another shape fails."""
    parsed = []
    for line in _lines(path):
        match = CONSOLE_LINE.match(line)
        assert match is not None, f"{path}: {line!r}"
        parsed.append(match.groupdict())
    return parsed


def _json(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _lines(path)]


def _online(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    return [
        e
        for e in entries
        if e["event"] == "partition_state_changed" and "to_state=OnlinePartition" in e["fields"]
    ]


@pytest.mark.slow
@pytest.mark.processes
def test_each_broker_writes_kafkas_three_files_with_timestamped_lines(tmp_path: Path) -> None:
    """Three brokers, a topic of three partitions: the controller's state-change.log has
    each partition's leader election, its controller.log the controller's lines (the other
    brokers' are empty), server.log no controller line; every line has its UTC time, level,
    logger and broker_id; at the default level no message between actors is logged, and
    stderr shows no INFO line."""
    with running_up(tmp_path) as up:
        controller = int(_found(r"controller: broker (\d+)", up.output))
        created = kemu(
            "topics", "--create", "--topic", "t", "--partitions", "3",
            "--replication-factor", "2", "--bootstrap-server", up.bootstrap,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        logs = tmp_path / "logs"
        elections = wait_until(
            lambda: _online(_console(logs / f"broker-{controller}" / "state-change.log")),
            lambda found: len(found) == 3,
            TIMEOUT,
        )
        assert up.stop() == 0
    assert {_found(r"partition=(\S+)", e["fields"]) for e in elections} == {"t-0", "t-1", "t-2"}
    assert all(re.search(r"\bleader=\d", e["fields"]) for e in elections)
    for broker in range(3):
        directory = logs / f"broker-{broker}"
        assert all((directory / name).is_file() for name in FILES), sorted(directory.iterdir())
        entries = {name: _console(directory / name) for name in FILES}
        for name, lines in entries.items():
            for entry in lines:
                assert f"broker_id={broker}" in entry["fields"].split(), (name, entry)
                assert not entry["event"].startswith("message_"), (name, entry)
        assert {e["logger"] for e in entries["state-change.log"]} <= {
            "kemu.controller.state_change",
            "kemu.state_change",
        }
        assert any(e["event"] == "finished_leader_and_isr" for e in entries["state-change.log"])
        assert all(
            e["logger"].startswith("kemu.controller")
            and e["logger"] != "kemu.controller.state_change"
            for e in entries["controller.log"]
        )
        assert not any(
            e["logger"].startswith("kemu.controller") or e["logger"] == "kemu.state_change"
            for e in entries["server.log"]
        )
        assert [e["event"] for e in entries["server.log"]][:2] == ["starting", "registered"]
        if broker == controller:
            assert "controller_elected" in {e["event"] for e in entries["controller.log"]}
        else:
            assert entries["controller.log"] == []
            assert _online(entries["state-change.log"]) == []
    assert "[info" not in up.output  # stderr stays at WARNING


@pytest.mark.slow
@pytest.mark.processes
def test_json_at_debug_in_broker_processes_logs_the_messages_between_actors(
    tmp_path: Path,
) -> None:
    """``kemu up --processes --log-format json --log-level DEBUG``: the broker process is
    given both, and every line of its files and of stderr is a JSON object with its
    timestamp, level, event, logger and (in the files) broker_id; server.log has the
    messages the broker sent and received, with their ends and type."""
    with running_up(
        tmp_path, "--brokers", "1", "--processes", "--log-format", "json", "--log-level", "DEBUG"
    ) as up:
        created = kemu(
            "topics", "--create", "--topic", "t", "--partitions", "1",
            "--replication-factor", "1", "--bootstrap-server", up.bootstrap,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        directory = tmp_path / "logs" / "broker-0"
        wait_until(
            lambda: _json(directory / "state-change.log"),
            lambda found: any(e.get("to_state") == "OnlinePartition" for e in found),
            TIMEOUT,
        )
        assert up.stop() == 0
    for name in FILES:
        lines = _json(directory / name)
        assert lines, name
        for entry in lines:
            assert ISO_UTC.fullmatch(entry["timestamp"]), entry
            assert entry["level"] in ("debug", "info", "warning", "error"), entry
            assert entry["broker_id"] == 0, entry
            assert isinstance(entry["event"], str), entry
            assert entry["logger"].startswith("kemu."), entry
    server = _json(directory / "server.log")
    sent = [e for e in server if e["event"] == "message_sent"]
    received = [e for e in server if e["event"] == "message_received"]
    assert any(e["message"] == "LeaderAndIsrRequest" for e in received), received[:5]
    assert all(e["src"].startswith("broker-0") for e in sent)
    assert all(e["dst"].startswith("broker-0") for e in received)
    debug_in_state_change = [
        e for e in _json(directory / "state-change.log") if e["level"] == "debug"
    ]
    assert any(e["event"] == "replica_state_changed" for e in debug_in_state_change)
    stderr = [line for line in up.output.splitlines() if line.startswith("{")]
    assert stderr
    assert all(ISO_UTC.fullmatch(json.loads(line)["timestamp"]) for line in stderr)


@pytest.mark.processes
@pytest.mark.parametrize(
    ("argv", "prog", "message"),
    [
        (
            ["up", "--log-level", "verbose"],
            "kemu up",
            "argument --log-level: invalid choice: 'VERBOSE'",
        ),
        (["--log-level", "loud", "up"], "kemu", "argument --log-level: invalid choice: 'LOUD'"),
        (["up", "--log-format", "xml"], "kemu up", "argument --log-format: invalid choice: 'xml'"),
        (["_broker", "--log-level", "x"], "kemu _broker", "argument --log-level: invalid choice"),
        (
            ["chaos", "run", "s.yaml", "--log-level", "trace"],
            "kemu chaos run",
            "argument --log-level: invalid choice: 'TRACE'",
        ),
    ],
)
def test_a_bad_level_or_format_is_one_argparse_error_and_exit_2(
    argv: list[str], prog: str, message: str
) -> None:
    """argparse's usage, then one error line naming the option, the value and the choices."""
    result = kemu(*argv)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"{prog}: error: {message}"), errors[0]
    assert "Traceback" not in result.stderr
    if "level" in message:
        assert "(choose from 'DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')" in errors[0]


@pytest.mark.processes
def test_debug_logs_leave_a_deterministic_run_byte_identical(tmp_path: Path) -> None:
    """``kemu chaos run --check-determinism --log-level DEBUG``: the brokers' files fill with
    timestamped lines (wall-clock time), and the two traces are still byte for byte the
    same."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(
        "name: tiny\ncluster: {brokers: 2}\nsteps:\n"
        "  - create_topic: {topic: t, partitions: 2, replication_factor: 2, outcome: ok}\n"
        "  - expect: {topic_ready: t, within: 5}\n"
    )
    out = tmp_path / "out"
    result = kemu(
        "chaos", "run", str(scenario), "--check-determinism", "--log-level", "DEBUG",
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert "1 run(s): 1 passed, 0 failed" in result.stdout
    server = _console(out / "tiny" / "seed-0" / "logs" / "broker-0" / "server.log")
    assert any(e["event"] == "message_received" for e in server)
    trace = (out / "tiny" / "seed-0" / "trace.jsonl").read_text()
    assert not ISO_UTC.search(trace)  # no wall-clock time in the trace
