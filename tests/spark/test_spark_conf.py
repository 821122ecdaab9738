"""`--conf KEY=VALUE` of `kemu trace analyze / diff / replay` reaches the Spark session
they start; a malformed or non-Spark setting, or a trace given twice, is one error line and
a non-zero exit status before Spark starts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

import spark.commands
import spark.replay
from cluster.cli.main import main
from spark.session import spark_session

pytestmark = [pytest.mark.spark, pytest.mark.slow]  # a Spark session: one JVM for the run

RUN = Path("create-delete-all-up") / "seed-1"
CONF = ["--conf", "spark.sql.shuffle.partitions=1", "--conf", "spark.kemu.test=yes"]


@pytest.fixture
def configs(monkeypatch: pytest.MonkeyPatch) -> list[Mapping[str, str] | None]:
    """The ``config`` each command hands ``spark_session`` (the real one runs: here it
    joins the tests' shared session)."""
    seen: list[Mapping[str, str] | None] = []

    @contextmanager
    def recording(*args: Any, **kwargs: Any) -> Iterator[SparkSession]:
        seen.append(kwargs.get("config"))
        with spark_session(*args, **kwargs) as session:
            yield session

    monkeypatch.setattr(spark.commands, "spark_session", recording)
    monkeypatch.setattr(spark.replay, "spark_session", recording)
    return seen


# Three Spark jobs: 145 s under a load of 25. The shared session's start and the campaign
# (155 s then, when this test is the first to ask for them) are not counted.
@pytest.mark.timeout(300, func_only=True)
def test_each_command_passes_its_settings_on(
    spark: SparkSession,
    campaign: Path,
    tmp_path: Path,
    configs: list[Mapping[str, str] | None],
) -> None:
    del spark
    run, again = str(campaign / RUN), str(tmp_path / RUN)
    shutil.copytree(run, again)
    out = str(tmp_path / "out")
    assert main(["trace", "analyze", run, "--out", out, "--quiet", *CONF]) == 0
    assert main(["trace", "diff", run, again, "--out", out, "--quiet", *CONF]) == 0
    assert main(["trace", "replay", run, *CONF]) == 0
    expected = {"spark.sql.shuffle.partitions": "1", "spark.kemu.test": "yes"}
    assert configs == [expected] * 3


@pytest.mark.parametrize(
    ("setting", "error"),
    [
        ("spark.driver.memory", "Error: --conf must be KEY=VALUE, got 'spark.driver.memory'"),
        ("=4g", "Error: --conf must be KEY=VALUE, got '=4g'"),
        (
            "driver.memory=4g",
            "Error: --conf driver.memory: not a Spark setting (they start with 'spark.')",
        ),
    ],
)
@pytest.mark.parametrize("command", ["analyze", "diff", "replay"])
def test_a_bad_setting_is_one_line_before_spark_starts(
    command: str,
    setting: str,
    error: str,
    campaign: Path,
    capsys: pytest.CaptureFixture[str],
    configs: list[Mapping[str, str] | None],
) -> None:
    run = str(campaign / RUN)
    traces = [run, run] if command == "diff" else [run]
    assert main(["trace", command, *traces, "--conf", setting]) == 2
    assert capsys.readouterr().err == error + "\n"
    assert configs == []  # no session was asked for


@pytest.mark.parametrize("command", ["analyze", "diff", "replay"])
def test_a_trace_given_twice_is_refused_before_spark_starts(
    command: str,
    campaign: Path,
    capsys: pytest.CaptureFixture[str],
    configs: list[Mapping[str, str] | None],
) -> None:
    run = campaign / RUN
    if command == "diff":  # the baseline campaign holds the candidate run
        traces = [str(campaign), str(run)]
        error = f"the same trace given twice: {(run / 'trace.jsonl').resolve()}"
    else:
        traces = [str(run), str(run)]
        error = f"the same run given twice: {RUN}"
    assert main(["trace", command, *traces]) == 1
    assert capsys.readouterr().err == f"Error: {error}\n"
    assert configs == []
