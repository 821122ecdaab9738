"""``python -m cluster.bench``: the benchmark rows of ``scripts/bench.sh``."""

from __future__ import annotations

import sys

from cluster.bench.suite import main

sys.exit(main())
