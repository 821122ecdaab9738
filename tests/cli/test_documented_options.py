"""The options of the ``kemu`` commands, against the docs and the code: every ``kemu
COMMAND ... --option`` README.md and docs/*.md show is one that command parses (its
argparse sub-parser, or the jopt-style option table of a Kafka tool), and every option of a
Kafka tool's table is read by the code, but for those Kafka 2.7 itself accepts and
ignores."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

from cluster.cli.jopt import Option
from cluster.cli.main import build_parser
from tests.support.kemu_commands import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

KAFKA_TOOLS: dict[str, tuple[str, str]] = {
    "topics": ("topics", "_SPECS"),
    "reassign-partitions": ("reassign", "_SPECS"),
    "leader-election": ("leader_election", "_SPECS"),
    "console-producer": ("console_producer", "SPECS"),
    "console-consumer": ("console_consumer", "SPECS"),
    "get-offsets": ("get_offsets", "SPECS"),
    "dump-log": ("dump_log", "SPECS"),
    "broker-api-versions": ("broker_api_versions", "SPECS"),
    "consumer-groups": ("consumer_groups", "SPECS"),
    "configs": ("configs", "SPECS"),
    "log-dirs": ("log_dirs", "SPECS"),
}
"""The commands that hand their arguments to a jopt-style parser: module, option table."""

IGNORED_AS_KAFKA_IGNORES = {
    ("topics", "force"),  # TopicCommand declares it and never reads it: there is no prompt
    ("get-offsets", "max-wait-ms"),  # GetOffsetShell: "DEPRECATED AND IGNORED"
    ("console-producer", "sync"),  # kemu's console producer always sends synchronously
}
"""Options of a Kafka tool that kemu accepts and does not read, with the reason."""

COMMAND_LINE = re.compile(r"\bkemu ([a-z][\w-]*)(?: ([a-z][\w-]*))?([^`\n]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w.-]*)")


def tool_specs(command: str) -> tuple[Option, ...]:
    module, table = KAFKA_TOOLS[command]
    specs: tuple[Option, ...] = getattr(importlib.import_module(f"cluster.cli.{module}"), table)
    return specs


def parsed_options() -> dict[tuple[str, ...], set[str]]:
    """Command path (``("broker", "run")``) -> the options it accepts, its parents'
    included (``--log-level`` is the top parser's)."""
    options: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...], above: set[str]) -> None:
        own = set(above)
        for action in parser._actions:
            own |= set(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name), own)
        options[path] = own

    walk(build_parser(), (), set())
    for command in KAFKA_TOOLS:
        options[(command,)] = {f"--{spec.name}" for spec in tool_specs(command)}
    return options


def documented_options(page: Path) -> list[tuple[int, tuple[str, ...], str]]:
    """(line, command path, option) for each option written after ``kemu COMMAND`` on
    the same line of a page (code blocks and code spans alike)."""
    options = parsed_options()
    text = page.read_text()
    found: list[tuple[int, tuple[str, ...], str]] = []
    for match in COMMAND_LINE.finditer(text):
        first, second, rest = match.groups()
        path = (first, second) if (first, second) in options else (first,)
        if path not in options:
            continue  # not a command ("kemu emulates", "kemu's")
        line = text.count("\n", 0, match.start()) + 1
        found += [(line, path, option.rstrip(".")) for option in OPTION.findall(rest)]
    return found


def test_every_option_the_docs_show_is_parsed() -> None:
    """Each ``kemu COMMAND ... --option`` of README.md and docs/*.md is an option of that
    command (more than a hundred of them are shown)."""
    options = parsed_options()
    shown = [(page, *one) for page in PAGES for one in documented_options(page)]
    assert len(shown) > 100
    unknown = [
        f"{page.name}:{line}: kemu {' '.join(path)} {option}"
        for page, line, path, option in shown
        if option not in options[path]
    ]
    assert unknown == []


def test_the_walk_sees_an_unknown_option(tmp_path: Path) -> None:
    """An option a command does not have is reported, under its sub-command too."""
    page = tmp_path / "page.md"
    page.write_text(
        "`kemu up --brokers 3 --no-such-thing` and\n$ kemu broker run --id 1 --port 9\n"
    )
    options = parsed_options()
    assert [
        (line, path, option)
        for line, path, option in documented_options(page)
        if option not in options[path]
    ] == [(1, ("up",), "--no-such-thing"), (2, ("broker", "run"), "--port")]


def test_every_option_of_a_kafka_tool_is_read() -> None:
    """Each option of a Kafka tool's table is asked of the parsed command line (by its
    quoted name, outside the table) somewhere in ``cluster/cli``: an option parsed and
    then ignored would be accepted and do nothing."""
    code = "\n".join(path.read_text() for path in (REPO / "cluster" / "cli").glob("*.py"))
    unread = []
    for command in KAFKA_TOOLS:
        for spec in tool_specs(command):
            uses = len(re.findall(rf"[\"']{re.escape(spec.name)}[\"']", code))
            if uses < 2 and (command, spec.name) not in IGNORED_AS_KAFKA_IGNORES:
                unread.append(f"kemu {command} --{spec.name}")
    assert unread == []
    for command, name in IGNORED_AS_KAFKA_IGNORES:
        assert name in {spec.name for spec in tool_specs(command)}
