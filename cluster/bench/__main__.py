"""``python -m cluster.bench``: the benchmark rows of ``scripts/bench.sh``."""

from __future__ import annotations

from cluster.bench.process import exit_with
from cluster.bench.suite import main

exit_with(main)
