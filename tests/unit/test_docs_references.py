"""README.md and docs/*.md name only what exists: every repository path they cite
(``cluster/kafka/listener.py``, ``scripts/fuzz.sh``) is there, every dotted name of a kemu
module (``cluster.gc_settings.configure_gc``) imports and has the attribute named, every
test they name is one of tests/, every file of docs/architecture.md's tree is in the
directory it is listed under, and docs/kafka-wire.md's table of APIs is exactly what a
broker advertises."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from cluster.kafka.apis import advertised_api_versions
from cluster.launch.cluster import SUPPORTED_APIS
from tests.support.kemu_commands import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PACKAGES = ("actors", "cluster", "protocol", "spark")
TOP_DIRS = (*PACKAGES, "tests", "scripts", "scenarios", "docs")

PATH = re.compile(rf"(?<![\w/.-])((?:{'|'.join(TOP_DIRS)})/[\w./-]*)")
"""A path from the repository root; a placeholder (``cluster/cli/<command>.py``) ends
the match at its ``<``, leaving the directory, which must exist too."""
DOTTED = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES)})(?:\.\w+)+)")

EXAMPLE_PATHS = {"scenarios/x.yaml"}
"""Paths a page shows as a user's own file in an example command, not the repository's."""


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def cited_paths(page: Path) -> list[tuple[int, str]]:
    text = page.read_text()
    return [
        (line_of(text, m.start()), m.group(1).rstrip("."))
        for m in PATH.finditer(text)
        if m.group(1).rstrip(".") not in EXAMPLE_PATHS
    ]


def resolves(dotted: str) -> bool | None:
    """Whether a dotted name resolves: its longest prefix that is a module on disk is
    imported and the rest are its attributes. None when its second part is no module or
    package of ours (``cluster.stop``: the docs' variable ``cluster``, a KemuCluster)."""
    parts = dotted.split(".")
    if not any((REPO / parts[0] / parts[1]).with_suffix(s).exists() for s in (".py", "")):
        return None
    depth = len(parts)
    while not (
        (REPO.joinpath(*parts[:depth]).with_suffix(".py")).is_file()
        or (REPO.joinpath(*parts[:depth]) / "__init__.py").is_file()
    ):
        depth -= 1
    value: object = importlib.import_module(".".join(parts[:depth]))
    for name in parts[depth:]:
        if not hasattr(value, name):
            return False
        value = getattr(value, name)
    return True


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_cited_path_exists(page: Path) -> None:
    """Each repository path a page cites is a file or directory of the repository."""
    missing = [f"{page.name}:{n}: {p}" for n, p in cited_paths(page) if not (REPO / p).exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_dotted_kemu_name_resolves(page: Path) -> None:
    """Each ``package.module[.attribute]`` a page cites imports, attribute included."""
    text = page.read_text()
    broken = [
        f"{page.name}:{line_of(text, m.start())}: {m.group(1)}"
        for m in DOTTED.finditer(text)
        if resolves(m.group(1).rstrip(".")) is False
    ]
    assert broken == []


TEST_NAME = re.compile(r"(?<![\w/.])(test_\w+)(?!\w*\.py)")
CODE_BLOCK = re.compile(r"^```python.*?^```$", re.MULTILINE | re.DOTALL)


def cited_tests(page: Path) -> list[tuple[int, str]]:
    """The test names a page cites outside its Python examples (whose own tests are
    theirs); one ending in ``_`` stands for every test it begins."""
    text = CODE_BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())
    return [(line_of(text, m.start()), m.group(1)) for m in TEST_NAME.finditer(text)]


def test_every_cited_test_exists() -> None:
    """Each test a page names (``test_restart_within_the_timeout_resumes_the_session``,
    or a family, ``test_offline_of_every_replica_*``) is a test function of tests/, or a
    module of tests/ without its ``.py``."""
    code = "\n".join(path.read_text() for path in (REPO / "tests").rglob("*.py"))
    defined = set(re.findall(r"def (test_\w+)", code))
    modules = {path.stem for path in (REPO / "tests").rglob("test_*.py")}
    cited = [(page, *one) for page in PAGES for one in cited_tests(page)]
    assert len(cited) > 40
    missing = [
        f"{page.name}:{line}: {name}"
        for page, line, name in cited
        if name not in defined | modules
        and not (name.endswith("_") and any(d.startswith(name) for d in defined))
    ]
    assert missing == []


def test_the_checks_see_a_broken_reference() -> None:
    """A path, a module and an attribute that do not exist are reported, and a variable
    that shares a package's name (``cluster.stop()``) is not."""
    assert resolves("cluster.gc_settings.configure_gc") is True
    assert resolves("cluster.gc_settings.no_such_function") is False
    assert resolves("cluster.launch.no_such_module") is False
    assert resolves("cluster.stop") is None
    assert [m.group(1) for m in PATH.finditer("see `cluster/cli/<command>.py`.")] == [
        "cluster/cli/"
    ]


def architecture_tree() -> list[tuple[str, str, int]]:
    """(directory, file name, line) for each file docs/architecture.md's tree lists,
    the directory being the top-level or second-level entry the line belongs to."""
    text = (REPO / "docs" / "architecture.md").read_text()
    start = text.index("## The tree")
    block_start = text.index("```\n", start) + 4
    block = text[block_start : text.index("```", block_start)]
    first_line = line_of(text, block_start)
    entries: list[tuple[str, str, int]] = []
    top = sub = ""
    for offset, line in enumerate(block.splitlines()):
        if found := re.match(r"([\w.]+)/\s", line):
            top = sub = found.group(1)
        elif found := re.match(r"  ([\w.]+)(/?)\s", line):  # a directory, or a file of top's
            sub = f"{top}/{found.group(1)}" if found.group(2) else top
        for name in re.findall(r"(?<![\w/.-])([\w/]+\.(?:py|js|css|sh))\b", line):
            if not name.startswith(TOP_DIRS):  # paths from the root are the other test's
                entries.append((sub, name.rpartition("/")[2], first_line + offset))
    return entries


def test_every_file_of_the_architecture_tree_exists() -> None:
    """Each module or file the tree lists lies in the directory it is listed under (or
    below it: ``partition_/replica_state_machine.py`` is read as its second name)."""
    entries = architecture_tree()
    assert len(entries) > 100
    missing = [
        f"architecture.md:{line}: {directory}/ {name}"
        for directory, name, line in entries
        if not any((REPO / directory).rglob(name))
    ]
    assert missing == []


def test_the_wire_pages_api_table_is_what_a_broker_advertises() -> None:
    """docs/kafka-wire.md, "What a broker advertises": one row per API a broker
    advertises, with its key and version range, and none more."""
    text = (REPO / "docs" / "kafka-wire.md").read_text()
    section = text[text.index("## What a broker advertises") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| \w+ \| (\d+) \| (\d+)(?:-(\d+))? \|", section, re.MULTILINE)
    table = {int(key): (int(low), int(high or low)) for key, low, high in rows}
    assert len(rows) == len(table)
    assert table == advertised_api_versions(SUPPORTED_APIS)
