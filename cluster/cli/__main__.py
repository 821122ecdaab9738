"""``python -m cluster.cli``: the ``kemu`` command."""

from __future__ import annotations

import sys

from cluster.cli.main import main

sys.exit(main())
