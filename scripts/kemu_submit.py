"""spark-submit's entry for kemu's Spark commands: the arguments are kemu's own, e.g.

    spark-submit --master spark://HOST:7077 scripts/kemu_submit.py trace analyze TRACE...

spark-submit runs this file as the driver; kemu must be installed (with its ``spark``
extra) where the driver and the executors run (docs/spark.md).
"""

from __future__ import annotations

import sys

from cluster.cli.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
