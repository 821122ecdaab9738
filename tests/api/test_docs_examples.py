"""Every example of docs/python-api.md, and README's Python one, runs as written:
```` ```python ```` blocks as scripts, ```` ```python pytest ```` blocks as a test module of
a pytest run of their own (with kemu's plugin), and each must pass."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from tests.support.kemu_commands import REPO

DOC = REPO / "docs" / "python-api.md"
README = REPO / "README.md"
BLOCK = re.compile(r"^```(python(?: pytest)?)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(kind: str, page: Path = DOC) -> list[str]:
    return [code for info, code in BLOCK.findall(page.read_text()) if info == kind]


def kemu_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("kemu-cluster")}


def test_the_page_has_examples_of_both_kinds() -> None:
    """The page shows scripts (sync and async) and a pytest module."""
    assert len(blocks("python")) >= 3
    assert len(blocks("python pytest")) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_a_script_example_runs(index: int) -> None:
    """The script runs to its end (its own asserts hold) and leaves no cluster running."""
    before = kemu_threads()
    code = compile(blocks("python")[index], f"{DOC.name}[python {index}]", "exec")
    exec(code, {"__name__": "__main__"})  # noqa: S102 - our own documentation's example
    assert kemu_threads() == before


@pytest.mark.timeout(120)
def test_the_readme_example_runs() -> None:
    """README's "From Python and pytest" example runs to its end."""
    (example,) = blocks("python", README)
    exec(compile(example, README.name, "exec"), {"__name__": "__main__"})  # noqa: S102


@pytest.mark.timeout(120)
def test_the_pytest_example_passes(pytester: pytest.Pytester) -> None:
    """The pytest module of the page passes whole with kemu's plugin."""
    (example,) = blocks("python pytest")
    pytester.makepyfile(test_example=example)
    result = pytester.runpytest_inprocess(
        "-p", "no:kemu", "-p", "cluster.testing.pytest_plugin", "-p", "no:randomly",
        "-o", "asyncio_default_fixture_loop_scope=function",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
