"""``kemu chaos`` run in the test's own process, and two tiny scenario files (one that
passes, one that fails), shared by the chaos command's tests."""

from __future__ import annotations

import io
from pathlib import Path

from cluster.cli.chaos import chaos_main
from cluster.cli.main import build_parser


def kemu(argv: list[str]) -> tuple[int, str]:
    """``kemu ARGS`` in this process: the exit status and what the command printed.
    (``cluster.cli.main.main`` would also configure logging for the whole session, bound to
    this test's captured stderr; the brokers' logs stay out of the output here.)"""
    args = build_parser().parse_args(argv)
    assert args.func.__name__ == "_cmd_chaos"
    out = io.StringIO()
    return chaos_main(args, out=out), out.getvalue()


PASSING = """\
name: tiny
description: a topic comes online
cluster: {brokers: 2}
steps:
  - create_topic: {topic: t, partitions: 2, replication_factor: 2, outcome: ok}
  - expect: {topic_ready: t, within: 5}
"""

FAILING = """\
name: wrong
description: expects a topic nobody creates
cluster: {brokers: 2}
steps:
  - expect: {topic_exists: never, within: 2}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)
