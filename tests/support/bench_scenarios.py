"""Two small scenario files for the benchmark rows' tests (one passes, one fails), and
where they are written."""

from __future__ import annotations

from pathlib import Path

PASSING = """\
name: bench-passing
cluster: {brokers: 3}
steps:
  - create_topic: {topic: alpha, partitions: 2, replication_factor: 3, outcome: ok}
  - expect: {topic_ready: alpha, within: 10}
  - sleep: 120
"""

FAILING = """\
name: bench-failing
cluster: {brokers: 3}
steps:
  - expect: {topic_ready: never-created, within: 2}
"""


def write_scenario(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
