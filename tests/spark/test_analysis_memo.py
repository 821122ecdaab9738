"""A trace analysed once in a session (Spark) or a process (pandas) is not analysed again
by the next job that needs it the same way: ``kemu trace diff`` after ``analyze`` of the
same files copies their analyses and only builds the topic sequences. Its document is
the one a diff with nothing analysed before gives; a file written again in between, or
another deletion bound, is analysed again."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark.analyze import analyze, forget_analyses
from spark.diff import diff
from spark.pandas_analysis import analyze_pandas, diff_pandas, forget_pandas_analyses
from spark.progress import Progress
from tests.support.analysis import rounded

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(300)]


def _pair(campaign: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two traces of different runs, copied (their files are this test's alone)."""
    baseline = tmp_path / "baseline.jsonl"
    candidate = tmp_path / "candidate.jsonl"
    shutil.copy(campaign / "controller-killed-mid-deletion" / "seed-1" / "trace.jsonl", baseline)
    shutil.copy(campaign / "create-delete-all-up" / "seed-1" / "trace.jsonl", candidate)
    return baseline, candidate


def test_spark_diff_after_analyze_reuses_the_analyses(
    spark: SparkSession, campaign: Path, tmp_path: Path
) -> None:
    baseline, candidate = _pair(campaign, tmp_path)
    forget_analyses(spark)
    alone = diff(spark, [baseline], [candidate])

    forget_analyses(spark)
    analysed = analyze(spark, [baseline, candidate])
    lines = io.StringIO()
    steps = Progress("diff", out=lines)
    after = diff(spark, [baseline], [candidate], progress=steps)
    assert "2 of 2 trace(s) analysed before in this session" in lines.getvalue()
    assert list(steps.seconds) == ["normalised sequences"]  # no analysis step ran
    assert "normalised sequences done" in lines.getvalue()
    assert after == alone
    (pair,) = after["pairs"]
    assert pair["divergences"]
    # What analyze answered is the caller's: changing it changes no later result.
    for result in analysed["runs"].values():
        result["violations"].append({"rule": "scribbled"})
        result["latency"].clear()
    assert diff(spark, [baseline], [candidate]) == alone


def test_spark_analyses_again_a_rewritten_file_or_another_bound(
    spark: SparkSession, campaign: Path, tmp_path: Path
) -> None:
    baseline, candidate = _pair(campaign, tmp_path)
    forget_analyses(spark)
    first = analyze(spark, [baseline])
    # The same path now holds another run's trace.
    shutil.copy(candidate, baseline)
    lines = io.StringIO()
    again = analyze(spark, [baseline], progress=Progress("analyze", out=lines))
    assert "analysed before" not in lines.getvalue()
    (run,) = again["runs"]
    assert again["runs"][run]["events"] != first["runs"][run]["events"]
    assert (
        again["runs"][run]["events"]
        == analyze(spark, [candidate])["runs"][str(candidate)]["events"]
    )
    lines = io.StringIO()
    analyze(spark, [baseline], deletion_bound=1.0, progress=Progress("analyze", out=lines))
    assert "analysed before" not in lines.getvalue()


def test_pandas_diff_after_analyze_reuses_the_analyses(campaign: Path, tmp_path: Path) -> None:
    baseline, candidate = _pair(campaign, tmp_path)
    forget_pandas_analyses()
    alone = diff_pandas([baseline], [candidate])
    forget_pandas_analyses()
    analyze_pandas([baseline, candidate])
    lines = io.StringIO()
    after = diff_pandas([baseline], [candidate], progress=Progress("diff", out=lines))
    assert lines.getvalue().count("topic rows of") == 4  # each line twice: start, end
    assert "analysing" not in lines.getvalue()
    assert rounded(after) == rounded(alone)
