"""The command-line bodies of ``kemu trace analyze`` and ``kemu trace diff`` (wired in
``cluster.cli.trace``): check the inputs, choose the engine (``spark.engine``), run the
analysis in this process or as a Spark job in a quiet session, write JSON and HTML, print
a summary, and answer the exit status. pyspark is imported only when Spark runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from actors.runtime.code_identity import different_code, recorded_code
from spark.analyze import analyze
from spark.diff import Thresholds, diff, load_thresholds, pair_inputs
from spark.engine import Engine, choose_engine
from spark.progress import Progress, StageDisplay
from spark.report import render_analysis_html, render_diff_html, write_json
from spark.schema import check_inputs, resolve_inputs
from spark.session import spark_session

__all__ = ["analyze_command", "diff_command"]

_SHOWN = 10
"""Violations printed per run (the JSON and HTML outputs have them all)."""


def analyze_command(
    traces: Sequence[str],
    *,
    master: str | None,
    out: Path,
    deletion_bound: float,
    quiet: bool = False,
    conf: Mapping[str, str] | None = None,
    engine: Engine | None = None,
    stages: StageDisplay | None = None,
) -> int:
    """Exit status 1 when any run breaks an invariant, else 0. ``engine``: None lets
    ``spark.engine.choose_engine`` decide; ``stages`` draws Spark's stages meanwhile."""
    progress = Progress("kemu trace analyze", quiet=quiet, stages=stages)
    inputs = resolve_inputs(traces)
    check_inputs(inputs)  # bad input fails before any engine starts
    chosen = choose_engine(engine, master=master, conf=conf, inputs=inputs, progress=progress)
    if chosen == "local":
        from spark.pandas_analysis import analyze_pandas

        document = analyze_pandas(inputs, deletion_bound=deletion_bound, progress=progress)
    else:
        with ExitStack() as stack:
            with progress.stage("starting Spark"):
                spark = stack.enter_context(
                    spark_session(master, app="kemu trace analyze", config=conf)
                )
            stack.enter_context(progress.spark_stages(spark))
            document = analyze(spark, inputs, deletion_bound=deletion_bound, progress=progress)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "analysis.json", document)
    (out / "report.html").write_text(render_analysis_html(document))
    failed = 0
    for run, result in document["runs"].items():
        violations = result["violations"]
        failed += bool(violations)
        print(
            f"{run}: {result['events']} events, {len(result['lifecycles'])} topic lifecycle(s), "
            f"{len(violations)} violation(s)"
        )
        for v in violations[:_SHOWN]:
            where = f" (event {v['seq']}, t={v['ts']:.3f}s)" if v["seq"] is not None else ""
            print(f"  {v['rule']}: {v['message']}{where}")
        if len(violations) > _SHOWN:
            print(f"  ... and {len(violations) - _SHOWN} more (analysis.json has them all)")
    print(f"wrote {out / 'analysis.json'} and {out / 'report.html'}")
    return 1 if failed else 0


def diff_command(
    baseline: str,
    candidate: str,
    *,
    thresholds: Path | None,
    master: str | None,
    out: Path,
    deletion_bound: float,
    quiet: bool = False,
    conf: Mapping[str, str] | None = None,
    engine: Engine | None = None,
    stages: StageDisplay | None = None,
) -> int:
    """Exit status 1 when a threshold is crossed, else 0. ``engine``: None lets
    ``spark.engine.choose_engine`` decide; ``stages`` draws Spark's stages meanwhile."""
    limits = load_thresholds(thresholds)
    sides = resolve_inputs([baseline]), resolve_inputs([candidate])
    pairs, _ = pair_inputs(*sides)  # bad input fails before any engine starts
    check_inputs([*sides[0], *sides[1]])
    progress = Progress("kemu trace diff", quiet=quiet, stages=stages)
    paired = [item for _, b, c in pairs for item in (b, c)]
    chosen = choose_engine(engine, master=master, conf=conf, inputs=paired, progress=progress)
    document = _diff_document(
        chosen, baseline, candidate, limits, master, conf, deletion_bound, progress
    )
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "diff.json", document)
    (out / "diff.html").write_text(render_diff_html(document))
    codes = {
        key: different_code(
            recorded_code(b.path.with_name("summary.json")),
            recorded_code(c.path.with_name("summary.json")),
        )
        for key, b, c in pairs
    }
    for pair in document["pairs"]:
        status = f"{len(pair['crossed'])} threshold(s) crossed" if pair["crossed"] else "ok"
        print(f"{pair['run']}: {status}")
        if codes.get(pair["run"]):
            print(f"  {codes[pair['run']]}")
        for c in pair["crossed"]:
            print(f"  {c['metric']}: {c['baseline']} -> {c['candidate']} (limit {c['limit']})")
        for name in pair["new_errors"]:
            print(f"  new error: {name}")
        for name in pair["vanished_errors"]:
            print(f"  vanished error: {name}")
        for d in pair["divergences"]:
            print(
                f"  {d['topic']}: diverges at its event {d['index']}: "
                f"baseline seq {d['baseline_seq']} {d['baseline']!r}, "
                f"candidate seq {d['candidate_seq']} {d['candidate']!r}"
            )
    for name in document["unmatched"]:
        print(f"unmatched: {name}")
    print(f"wrote {out / 'diff.json'} and {out / 'diff.html'}")
    return 1 if document["crossed"] else 0


def _diff_document(
    engine: Engine,
    baseline: str,
    candidate: str,
    thresholds: Thresholds,
    master: str | None,
    conf: Mapping[str, str] | None,
    deletion_bound: float,
    progress: Progress,
) -> dict[str, Any]:
    if engine == "local":
        from spark.pandas_analysis import diff_pandas

        return diff_pandas(
            [baseline],
            [candidate],
            thresholds=thresholds,
            deletion_bound=deletion_bound,
            progress=progress,
        )
    with ExitStack() as stack:
        with progress.stage("starting Spark"):
            spark = stack.enter_context(spark_session(master, app="kemu trace diff", config=conf))
        stack.enter_context(progress.spark_stages(spark))
        return diff(
            spark,
            [baseline],
            [candidate],
            thresholds=thresholds,
            deletion_bound=deletion_bound,
            progress=progress,
        )
