"""A campaign for people to look at: ``campaign.html``.

A campaign is one invocation that runs several scenarios or seeds (``kemu chaos run``
with more than one run, ``scripts/chaos.sh``). Its page, written into the output
directory beside the scenarios' run directories, is self-contained like a run's
``report.html`` (its style and its small script, ``campaign.css`` and ``campaign.js``,
package resources of ``cluster.chaos``, are written inline; nothing is fetched):

* the totals: runs, passed, failed (errors included), simulated time, and the wall time
  of the campaign (the one measured number on the page, in ``<span id="wall-time">``);
* one row per scenario, its pass count and one cell per seed coloured by outcome
  (``passed``, ``failed``, ``error``; ``missing`` for a seed with no result), a link to
  the run's ``report.html`` when its directory is still there (``scripts/chaos.sh``
  deletes passed runs' directories unless ``--keep-passed``; such a cell says so on
  hover);
* per scenario, histograms of the runs' lengths (simulated seconds) and event counts,
  inline SVG with ticked axes;
* every run that did not pass with its problems and the command that reproduces it.

The page is drawn here, in Python, from the runs' results (``RunResult``, what each
``summary.json`` holds), so it needs no run directory: a passed run's may be gone. Links
are relative to the output directory; apart from the wall time the page is the same
bytes for the same results.

``python -m cluster.chaos.campaign collect OUT --seeds A..B SCENARIO...`` prints the
results of those runs found under ``OUT`` (their ``summary.json``, as a JSON list), and
``python -m cluster.chaos.campaign page OUT RESULTS.json --wall-seconds S`` writes
``OUT/campaign.html`` from such a list: ``scripts/chaos.sh`` collects before it deletes
the passed runs' directories and writes the page after.
"""

from __future__ import annotations

import argparse
import functools
import html
import math
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Final

import msgspec

from cluster.chaos.report import REPORT_FILE
from cluster.chaos.runner import RunResult

__all__ = ["CAMPAIGN_FILE", "campaign_page", "nice_ticks", "write_campaign"]

CAMPAIGN_FILE: Final = "campaign.html"
SHOWN_PROBLEMS: Final = 10
OUTCOMES: Final = ("passed", "failed", "error")

# the histograms' geometry (SVG user units; the SVG scales down with the page)
WIDTH: Final = 320
HEIGHT: Final = 150
LEFT: Final = 40
RIGHT: Final = 26
TOP: Final = 10
BOTTOM: Final = 38


@functools.cache
def _asset(name: str) -> str:
    return (resources.files("cluster.chaos") / name).read_text()


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


# ---------------------------------------------------------------- numbers and axes


def nice_ticks(low: float, high: float, *, most: int = 6, integer: bool = False) -> list[float]:
    """Round ticks (1, 2 or 5 times a power of ten apart) from at or below ``low`` to at
    or above ``high``, at most ``most`` intervals; whole numbers only when ``integer``."""
    if high < low:
        low, high = high, low
    if high == low:
        pad = 1.0 if integer or low == 0 else abs(low) / 10
        low, high = low - pad, high + pad
        if low < 0 <= high - pad:  # counts and durations are not negative
            low = 0.0
    raw = (high - low) / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(1.0, round(step))
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    count = round((last - first) / step)
    return [_tidy(first + i * step) for i in range(count + 1)]


def _tidy(value: float) -> float:
    """``value`` without the float noise of adding steps (0.30000000000000004 -> 0.3)."""
    return float(f"{value:.10g}")


def _decimals(ticks: Sequence[float]) -> int:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    return max(0, -math.floor(math.log10(step) + 1e-9))


def _number(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


def _histogram(name: str, values: Sequence[float], *, unit: str, label: str, integer: bool) -> str:
    """An SVG histogram of ``values``: bins between round ticks on the x axis, run counts
    on the y axis."""
    ticks = nice_ticks(min(values), max(values), most=5, integer=integer)
    bins = [0] * (len(ticks) - 1)
    for value in values:
        index = next(
            (i for i in range(len(bins)) if value < ticks[i + 1]),
            len(bins) - 1,
        )
        bins[index] += 1
    y_ticks = nice_ticks(0, max(bins), most=4, integer=True)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + (value - ticks[0]) / (ticks[-1] - ticks[0]) * plot_w

    def y(count: float) -> float:
        return TOP + plot_h - count / y_ticks[-1] * plot_h

    decimals = _decimals(ticks)
    parts = [
        f'<svg class="hist" data-chart="{_e(name)}" viewBox="0 0 {WIDTH} {HEIGHT}"'
        f' width="{WIDTH}" height="{HEIGHT}" role="img"'
        f' aria-label="{_e(label)} of {len(values)} run(s)">'
    ]
    for index, count in enumerate(bins):
        if count:
            x0, x1 = x(ticks[index]), x(ticks[index + 1])
            title = (
                f"{count} run(s) with {_number(ticks[index], decimals)} to"
                f" {_number(ticks[index + 1], decimals)} {unit}"
            )
            parts.append(
                f'<rect class="bar" data-count="{count}" x="{x0 + 1:.1f}" y="{y(count):.1f}"'
                f' width="{max(1.0, x1 - x0 - 2):.1f}" height="{y(0) - y(count):.1f}">'
                f"<title>{_e(title)}</title></rect>"
            )
    base = y(0)
    parts.append(
        f'<line class="axis" x1="{LEFT}" y1="{base:.1f}" x2="{WIDTH - RIGHT}" y2="{base:.1f}"/>'
    )
    parts.append(f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base:.1f}"/>')
    for tick in ticks:
        tx = x(tick)
        parts.append(
            f'<line class="tick" x1="{tx:.1f}" y1="{base:.1f}" x2="{tx:.1f}" y2="{base + 4:.1f}"/>'
            f'<text class="label x" x="{tx:.1f}" y="{base + 15:.1f}">'
            f"{_number(tick, decimals)}</text>"
        )
    for tick in y_ticks:
        ty = y(tick)
        parts.append(
            f'<line class="tick" x1="{LEFT - 4}" y1="{ty:.1f}" x2="{LEFT}" y2="{ty:.1f}"/>'
            f'<text class="label y" x="{LEFT - 7}" y="{ty + 4:.1f}">{tick:.0f}</text>'
        )
    parts.append(
        f'<text class="label unit" x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 4}">'
        f"{_e(label)} ({_e(unit)})</text>"
        f'<text class="label unit" transform="rotate(-90)" x="{-(TOP + plot_h / 2):.1f}"'
        f' y="11">runs</text></svg>'
    )
    return "".join(parts)


# ---------------------------------------------------------------- the page


def _report_link(result: RunResult, out_dir: Path) -> str | None:
    """The run's ``report.html`` relative to ``out_dir``, if it is there."""
    if not result.run_dir:
        return None
    report = Path(result.run_dir) / REPORT_FILE
    if not report.is_file():
        return None
    return Path(os.path.relpath(report, out_dir)).as_posix()


def _cell(result: RunResult | None, seed: int, link: str | None) -> str:
    if result is None:
        return (
            f'<span class="cell missing" data-seed="{seed}"'
            f' title="seed {seed}: no result">{seed}</span>'
        )
    status = result.status
    attrs = f'class="cell {status}" data-seed="{seed}" data-status="{status}"'
    if link is not None:
        title = (
            f"seed {seed}: {status}, {result.events:,} events,"
            f" {result.simulated_seconds:.1f} s simulated; open its report"
        )
        return f'<a {attrs} href="{_e(link)}" title="{_e(title)}">{seed}</a>'
    title = f"seed {seed}: {status}; its run directory was not kept, so there is no report"
    return f'<span {attrs} data-kept="0" title="{_e(title)}">{seed}</span>'


def _scenario_section(
    name: str, seeds: Sequence[int], runs: dict[int, RunResult], out_dir: Path
) -> str:
    passed = sum(1 for r in runs.values() if r.status == "passed")
    cells = "".join(
        _cell(runs.get(seed), seed, _report_link(runs[seed], out_dir) if seed in runs else None)
        for seed in seeds
    )
    done = list(runs.values())
    charts = ""
    if done:
        charts = (
            '<div class="charts">'
            + _histogram(
                "simulated",
                [r.simulated_seconds for r in done],
                unit="s",
                label="run length, simulated",
                integer=False,
            )
            + _histogram(
                "events",
                [float(r.events) for r in done],
                unit="events",
                label="trace",
                integer=True,
            )
            + "</div>"
        )
    status = "ok" if passed == len(seeds) else "bad"
    return (
        f'<section class="scenario" data-scenario="{_e(name)}">'
        f'<h2><span class="name">{_e(name)}</span> <span class="count {status}"'
        f' data-passed="{passed}" data-runs="{len(seeds)}">{passed}/{len(seeds)} passed'
        "</span></h2>"
        f'<div class="cells">{cells}</div>{charts}</section>'
    )


def _failure(result: RunResult, out_dir: Path) -> str:
    link = _report_link(result, out_dir)
    report = (
        f' <a href="{_e(link)}">report</a>'
        if link is not None
        else ' <span class="gone">(run directory not kept)</span>'
    )
    problems = [p.line() for p in result.problems]
    lines = [f"error: {result.error}"] if result.error else []
    lines += problems[:SHOWN_PROBLEMS]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(problems) - SHOWN_PROBLEMS} more (invariants.json)")
    items = "".join(f"<li>{_e(line)}</li>" for line in lines)
    return (
        f'<li class="failure {result.status}" data-scenario="{_e(result.scenario)}"'
        f' data-seed="{result.seed}"><b>{_e(result.scenario)} seed {result.seed}:'
        f" {_e(result.status)}</b>{report}<ul>{items}</ul>"
        f'<code class="reproduce">{_e(result.reproduce)}</code></li>'
    )


def campaign_page(results: Sequence[RunResult], out_dir: Path, wall_seconds: float) -> bytes:
    """The page of a campaign whose runs went under ``out_dir``; a scenario and seed run
    twice counts once, the later result."""
    by_scenario: dict[str, dict[int, RunResult]] = {}
    for result in results:
        by_scenario.setdefault(result.scenario, {})[result.seed] = result
    seeds = sorted({r.seed for r in results})
    latest = [run for runs in by_scenario.values() for run in runs.values()]
    total = len(by_scenario) * len(seeds)
    passed = sum(1 for r in latest if r.status == "passed")
    counts = {o: sum(1 for r in latest if r.status == o) for o in OUTCOMES}
    simulated = sum(r.simulated_seconds for r in latest)
    bad = [r for r in latest if r.status != "passed"]
    seed_range = f"{seeds[0]}..{seeds[-1]}" if seeds else "none"
    title = f"{len(by_scenario)} scenario(s), {total} run(s): {passed} passed"
    summary = (
        f'<dl class="summary">'
        f'<div><dt>scenarios</dt><dd id="scenarios">{len(by_scenario)}</dd></div>'
        f'<div><dt>seeds</dt><dd id="seeds">{_e(seed_range)}</dd></div>'
        f'<div><dt>runs</dt><dd id="runs">{total}</dd></div>'
        f'<div><dt>passed</dt><dd id="passed" class="ok">{counts["passed"]}</dd></div>'
        f'<div><dt>failed</dt><dd id="failed" class="{"bad" if bad else "ok"}">'
        f"{counts['failed'] + counts['error']}"
        + (f" ({counts['error']} error(s))" if counts["error"] else "")
        + "</dd></div>"
        f'<div><dt>simulated</dt><dd id="simulated">{_duration(simulated)}</dd></div>'
        f'<div><dt>wall time</dt><dd><span id="wall-time">{_duration(wall_seconds)}</span>'
        "</dd></div>"
        "</dl>"
    )
    if total > len(latest):
        summary += f'<p class="note">{total - len(latest)} run(s) without a result.</p>'
    legend = (
        '<p class="legend"><span class="cell passed">n</span> passed '
        '<span class="cell failed">n</span> failed '
        '<span class="cell error">n</span> error '
        '<span class="cell missing">n</span> no result; a cell is a link to the run\'s'
        " report when its run directory was kept.</p>"
    )
    sections = "".join(
        _scenario_section(name, seeds, runs, out_dir) for name, runs in by_scenario.items()
    )
    failures = (
        '<h2>Runs that did not pass</h2><ol class="failures">'
        + "".join(_failure(r, out_dir) for r in bad)
        + "</ol>"
        if bad
        else '<p class="all-passed">Every run passed.</p>'
    )
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>kemu chaos campaign: {_e(title)}</title>\n<style>\n",
            _asset("campaign.css"),
            "</style>\n</head>\n<body>\n<main>\n",
            f"<h1>kemu chaos campaign: {_e(title)}</h1>\n",
            summary,
            "\n",
            failures,
            "\n<h2>Scenarios</h2>\n",
            legend,
            "\n",
            sections,
            "\n</main>\n<script>\n",
            _asset("campaign.js"),
            "</script>\n</body>\n</html>\n",
        ]
    ).encode()


def _duration(seconds: float) -> str:
    """``42.5 s``, ``12 min 5 s``, ``3 h 4 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def write_campaign(out_dir: Path, results: Sequence[RunResult], wall_seconds: float) -> Path:
    """Write ``out_dir/campaign.html``, atomically (several campaign processes may share
    ``out_dir``); returns its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / CAMPAIGN_FILE
    # a name of its own: campaigns on other hosts (the same pid there) may end at once
    partial = out_dir / f".{CAMPAIGN_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    partial.write_bytes(campaign_page(results, out_dir, wall_seconds))
    os.replace(partial, page)
    return page


# ---------------------------------------------------------------- scripts/chaos.sh


def collect(out_dir: Path, sources: Sequence[str], seeds: Sequence[int]) -> list[RunResult]:
    """The results of the runs of ``sources`` (scenario files) and ``seeds`` under
    ``out_dir``, from their ``summary.json``, in scenario then seed order."""
    wanted = {os.path.normpath(s) for s in sources}
    found: list[RunResult] = []
    for summary in sorted(out_dir.glob("*/seed-*/summary.json")):
        try:
            result = msgspec.json.decode(summary.read_bytes(), type=RunResult)
        except (OSError, msgspec.DecodeError, UnicodeDecodeError):
            continue
        if result.source and os.path.normpath(result.source) in wanted and result.seed in seeds:
            found.append(result)
    order = {os.path.normpath(s): i for i, s in enumerate(sources)}
    return sorted(found, key=lambda r: (order[os.path.normpath(r.source or "")], r.seed))


def main(argv: Sequence[str] | None = None, *, out: Callable[[str], object] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.chaos.campaign")
    sub = parser.add_subparsers(dest="command", required=True)
    gather = sub.add_parser("collect", help="print the runs' results as a JSON list")
    gather.add_argument("out")
    gather.add_argument("--seeds", required=True, help="A..B")
    gather.add_argument("scenarios", nargs="+")
    write = sub.add_parser("page", help="write OUT/campaign.html from such a list")
    write.add_argument("out")
    write.add_argument("results")
    write.add_argument("--wall-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.command == "collect":
        first, _, last = args.seeds.partition("..")
        try:
            seeds = range(int(first), int(last) + 1)
        except ValueError:
            print(f"Error: --seeds must be A..B, not {args.seeds!r}", file=sys.stderr)
            return 2
        found = collect(Path(args.out), args.scenarios, seeds)
        out(msgspec.json.encode(found).decode())
        return 0
    try:
        results = msgspec.json.decode(Path(args.results).read_bytes(), type=list[RunResult])
    except (OSError, msgspec.DecodeError, UnicodeDecodeError) as exc:
        print(f"Error: {args.results}: {exc}", file=sys.stderr)
        return 2
    out(f"campaign page: {write_campaign(Path(args.out), results, args.wall_seconds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
