"""``kemu consumer-groups``' command line as ``ConsumerGroupCommandOptions`` checks it:
every bad input is one line (jopt's or 2.7's message) and exit 1 before anything is
asked of a cluster, and a cluster that does not answer within ``--timeout`` is 2.7's
``Error: Executing consumer group command failed due to ...`` line. No cluster runs here:
the bootstrap server is a port nothing listens on."""

from __future__ import annotations

import io
import socket
import time

import pytest

from cluster.cli.consumer_groups import main as consumer_groups_main
from cluster.cli.jopt import Option, parse
from cluster.cli.offset_reset import datetime_ms, duration_ms


def closed_port() -> int:
    """A local port that refuses connections (bound once, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


SERVER = f"127.0.0.1:{closed_port()}"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = consumer_groups_main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_an_optional_value_is_taken_only_when_the_next_word_is_not_an_option() -> None:
    """jopt's ``withOptionalArg``: ``--state`` alone, before another option or at the end
    has no value (the empty string); ``--state S`` and ``--state=S`` have S."""
    specs = (Option("state", "", "String", optional=True), Option("list", ""))
    assert parse(["--state"], specs).values == {"state": ("",)}
    assert parse(["--state", "--list"], specs).values == {"state": ("",), "list": ("",)}
    assert parse(["--state", "Stable", "--list"], specs).values["state"] == ("Stable",)
    assert parse(["--state=Empty"], specs).values["state"] == ("Empty",)


BAD_INPUT = [
    (("--list", "--members"),
     "Option(s) [members] are unavailable given other options on the command line"),
    (("--delete", "--group", "g", "--state"),
     "Option(s) [state] are unavailable given other options on the command line"),
    (("--describe",), "Option [describe] takes one of these options: [group], [all-groups]"),
    (("--describe", "--group", "g", "--members", "--state"),
     "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
    (("--describe", "--group", "g", "--state", "Stable"),
     "Option [describe] does not take a value for [state]"),
    (("--delete",), "Option [delete] takes one of these options: [group], [all-groups]"),
    (("--delete", "--group", "g", "--topic", "t"),
     "The consumer does not support topic-specific offset deletion from a consumer group."),
    (("--delete-offsets", "--group", "g"),
     "Option [delete-offsets] takes the following options: [group], [topic]"),
    (("--delete-offsets", "--topic", "t"),
     "Option [delete-offsets] takes the following options: [group], [topic]"),
    (("--delete-offsets", "--group", "g", "--topic", "t:0,x"), 'For input string: "x"'),
    (("--reset-offsets", "--all-topics", "--to-earliest", "--dry-run"),
     "Option [reset-offsets] takes one of these options: [group], [all-groups]"),
    (("--reset-offsets", "--group", "g", "--to-earliest", "--dry-run"),
     "One of the reset scopes should be defined: --all-topics, --topic."),
    (("--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "1.5", "--dry-run"),
     "Cannot parse argument '1.5' of option to-offset"),
    (("--describe", "--group", "g", "--all-groups"),
     'Option "[group]" can\'t be used with option "[all-groups]"'),
    # checkInvalidArgs comes before main's one-action rule.
    (("--list", "--describe", "--group", "g"),
     'Option "[group]" can\'t be used with option "[list]"'),
    (("--describe", "--group", "g", "--topic", "t"),
     'Option "[topic]" can\'t be used with option "[describe]"'),
    (("--group", "g"),
     "Command must include exactly one action: --list, --describe, --delete, "
     "--reset-offsets, --delete-offsets"),
    (("--list", "--state", "stable"),
     "Invalid state list 'stable'. Valid states are: PreparingRebalance, "
     "CompletingRebalance, Stable, Dead, Empty"),
    (("--list", "--timeout", "soon"), "Cannot parse argument 'soon' of option timeout"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_1(argv: tuple[str, ...], message: str) -> None:
    """Each mistake is refused with Kafka's message as the first line on stderr, nothing on
    stdout, exit 1, and no call to the (absent) cluster: it is refused at once."""
    started = time.monotonic()
    status, out, err = run("--bootstrap-server", SERVER, *argv)
    assert (status, out, err.splitlines()[0]) == (1, "", message)
    assert time.monotonic() - started < 2


def test_the_bootstrap_server_is_required_and_a_reset_without_execute_warns() -> None:
    """``checkRequiredArgs`` first; a reset with neither --dry-run nor --execute prints
    2.7's warning before its other checks."""
    status, out, err = run("--list")
    assert (status, out, err.splitlines()[0]) == (
        1,
        "",
        'Missing required argument "[bootstrap-server]"',
    )
    status, out, err = run("--bootstrap-server", SERVER, "--reset-offsets", "--group", "g")
    lines = err.splitlines()
    assert (status, out) == (1, "")
    assert lines[0].startswith("WARN: No action will be performed as the --execute option is")
    assert lines[1] == "One of the reset scopes should be defined: --all-topics, --topic."


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (("--list",), "findAllBrokers"),
        (("--list", "--state"), "findAllBrokers"),
        (("--describe", "--group", "g", "--members"), "findCoordinator"),
        (("--delete-offsets", "--group", "g", "--topic", "t:0"), "findCoordinator"),
    ],
)
def test_a_cluster_that_does_not_answer_within_the_timeout(
    argv: tuple[str, ...], call: str
) -> None:
    """``--timeout`` bounds every call: nothing listens, so the call fails once the 300 ms
    have passed, with 2.7's line on stdout (exit 1: kemu's choice, 2.7 exits 0 after a stack
    trace)."""
    started = time.monotonic()
    status, out, err = run("--bootstrap-server", SERVER, "--timeout", "300", *argv)
    assert (status, err) == (1, "")
    assert out == (
        "\nError: Executing consumer group command failed due to "
        "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node "
        f"assignment. Call: {call}\n"
    )
    assert 0.3 <= time.monotonic() - started < 5


def test_help_lists_only_the_served_options() -> None:
    """``--help`` names every option 2.7's tool has that kemu serves, and none it does not."""
    status, out, err = run("--help")
    assert (status, out) == (1, "")
    listed = {line.split()[0] for line in err.splitlines()[2:]}
    assert listed == {
        "--all-groups", "--all-topics", "--bootstrap-server", "--by-duration",
        "--command-config", "--delete", "--delete-offsets", "--describe", "--dry-run",
        "--execute", "--export", "--from-file", "--group", "--help", "--list", "--members",
        "--offsets", "--reset-offsets", "--shift-by", "--state", "--timeout", "--to-current",
        "--to-datetime", "--to-earliest", "--to-latest", "--to-offset", "--topic", "--verbose",
        "--version",
    }  # fmt: skip
    assert "--state [String]" in err


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("2020-01-01T00:00:00.000", 1_577_836_800_000),
        ("2020-01-01T00:00:00.000Z", 1_577_836_800_000),
        ("2020-01-01T01:00:00.250+01:00", 1_577_836_800_250),
        ("2019-12-31T23:00:00.000-0100", 1_577_836_800_000),
        ("2020-01-01T00:00:00.5+00", 1_577_836_800_005),  # SSS is a number of ms
    ],
)
def test_to_datetime_reads_as_utils_get_date_time(text: str, ms: int) -> None:
    assert datetime_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "ms"),
    [("PT1H", 3_600_000), ("P1DT2H3M4.5S", 93_784_500), ("-PT-1.5S", 1_500), ("pt0.001s", 1),
     ("PT-0.5S", -500), ("P2D", 172_800_000)],
)  # fmt: skip
def test_by_duration_reads_as_java_duration_parse(text: str, ms: int) -> None:
    assert duration_ms(text) == ms


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--to-datetime", "2020-01-01",
         "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"),
        ("--to-datetime", "2020-02-30T00:00:00.000",
         'Unparseable date: "2020-02-30T00:00:00.000Z"'),
        ("--by-duration", "PT", "Text cannot be parsed to a Duration"),
        ("--by-duration", "P", "Text cannot be parsed to a Duration"),
        ("--by-duration", "1H", "Text cannot be parsed to a Duration"),
    ],
)  # fmt: skip
def test_a_bad_time_is_one_line_before_any_call(flag: str, value: str, message: str) -> None:
    """Nothing listens at SERVER: the refusal comes before the first call."""
    status, out, err = run(
        "--bootstrap-server", SERVER, "--reset-offsets", "--group", "g", "--all-topics",
        flag, value, "--dry-run",
    )  # fmt: skip
    assert (status, out, err.splitlines()[0]) == (1, "", message)
