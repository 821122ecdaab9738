"""The Spark tests share one session (one JVM start for the whole test run: local[1],
one shuffle partition, scratch space under pytest's temp directory) and one small chaos
campaign of real deterministic runs to analyse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark.session import spark_session
from tests.support.campaign import run_campaign


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    with spark_session(
        "local[1]",
        app="kemu-tests",
        local_dir=tmp_path_factory.mktemp("spark-local"),
        config={
            "spark.sql.shuffle.partitions": "1",
            "spark.default.parallelism": "1",
            # Test traces are tiny: interpreting expressions beats compiling them (a cold
            # first analysis takes ~40% less time), and adaptive planning buys nothing.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.adaptive.enabled": "false",
        },
    ) as session:
        yield session


@pytest.fixture(scope="session")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign directory of real chaos runs (read-only: copy before editing)."""
    return run_campaign(tmp_path_factory.mktemp("campaign"))
