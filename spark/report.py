"""The outputs of ``kemu trace analyze`` and ``kemu trace diff``: JSON, and one
self-contained HTML page each, ``report.html`` and ``diff.html`` (docs/spark.md,
"Reports").

The plots are matplotlib figures written as inline SVG (text kept as ``<text>``, so a
value drawn on a bar is in the page's DOM), with axes, ticks, units and legends; numbers
are rounded for people (``seconds``); tables sit in boxes that scroll rather than push
the page wider. A campaign (several runs) gets its summary at the top: one dot per run
and a row per scenario. Each value label carries an SVG id, ``value-<chart>-<key>``,
which the browser tests read back. Nothing on the pages is fetched from the network.
"""

from __future__ import annotations

import io
import json
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from protocol.pages import asset, script_text
from spark.analyze import LIFECYCLE_COLUMNS
from spark.schema import EVENT_COLUMNS, RawEvent, raw_events

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["render_analysis_html", "render_diff_html", "seconds", "trace_window", "write_json"]

PCTS: Final = ("p50", "p90", "p99")
_PCT_COLOURS: Final = ("#4e79a7", "#f28e2b", "#e15759")
_BASELINE: Final = "#4e79a7"
_CANDIDATE: Final = "#e15759"
_PHASE_COLOURS: Final = {
    "created": "#4e79a7",
    "marked": "#f28e2b",
    "update_metadata_deleted": "#e15759",
    "stop_replica_offline": "#76b7b2",
    "stop_replica_delete": "#59a14f",
    "znodes_gone": "#b07aa1",
    "logs_gone": "#9c755f",
}
_PHASE_NAMES: Final = {
    "created": "creating (created → online)",
    "marked": "marked for deletion",
    "update_metadata_deleted": "UpdateMetadata leader -2 sent",
    "stop_replica_offline": "StopReplica (delete=false) sent",
    "stop_replica_delete": "StopReplica (delete=true) sent",
    "znodes_gone": "znodes gone, logs still on disk",
    "logs_gone": "logs gone",
}
_TOP: Final = 15
"""Bars per chart of counts (message types, errors); the rest are in the table below it."""
_AROUND: Final = 120
"""Events drawn before and after the first divergent event, on each side of diff.html."""
_OPEN_RUNS: Final = 3
"""Runs whose section starts open: all of a campaign this small, else the failing ones."""

_STYLE: Final = """
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  margin: 0; padding: 16px 20px 40px; color: #1d2430; overflow-x: hidden; }
h1 { font-size: 20px; margin: 0 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 22px 0 6px; border-bottom: 1px solid #d6dce4; }
h3 { font-size: 14px; margin: 14px 0 4px; }
summary h2 { display: inline; border: 0; }
details.run { border: 1px solid #d6dce4; border-radius: 4px; padding: 6px 10px; margin: 10px 0; }
.note { color: #5d6b7e; font-size: 13px; max-width: 110ch; overflow-wrap: anywhere; }
.bad { color: #c0281f; font-weight: 600; } .ok { color: #23803b; }
.scroll { max-width: 100%; overflow: auto; max-height: 420px; margin: 4px 0 12px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #dde2e8; padding: 2px 8px; text-align: right; vertical-align: top; }
th { background: #f3f5f8; position: sticky; top: 0; }
td.text, th.text { text-align: left; overflow-wrap: anywhere; max-width: 60ch; }
svg.plot { display: block; max-width: 100%; height: auto; margin: 4px 0 8px; }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr));
  gap: 8px 18px; }
.grid2 > * { min-width: 0; }
code, .mono { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
.sequence-box { position: relative; width: 100%; overflow: hidden; }
svg.sequence { cursor: grab; touch-action: none; }
.divergence { border-left: 3px solid #c0281f; padding: 2px 10px; margin: 6px 0; }
"""
_OVERFLOW_CHECK: Final = """
<script>
// For the browser tests and for people: <body data-overflow> names what is wider than
// the window ("none" when nothing is).
window.addEventListener("load", function () {
  var over = [];
  var root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + 1) over.push("page");
  document.querySelectorAll("svg.plot").forEach(function (svg) {
    if (svg.getBoundingClientRect().right > root.clientWidth + 1) over.push(svg.dataset.chart);
  });
  document.querySelectorAll(".sequence-box").forEach(function (box) {
    if (box.scrollWidth > box.clientWidth + 1) over.push("sequence");
  });
  document.body.dataset.overflow = over.length ? over.join(" ") : "none";
  document.body.dataset.ready = "1";
});
</script>
"""


_DRAW_SEQUENCES: Final = """
// diff.html: each <div data-sequence=ID> draws the events of the JSON element ID, the
// divergent event (its `focus` seq) marked
(function () {
  const tip = document.createElement("div");
  tip.id = "tip";
  document.body.appendChild(tip);
  for (const box of document.querySelectorAll("[data-sequence]")) {
    const data = JSON.parse(document.getElementById(box.dataset.sequence).textContent);
    const events = data.events;
    const model = KemuSequence.buildModel(events, data.brokers);
    const focus = events.findIndex((e) => e.seq === data.focus);
    const state = {
      axis: "order", view: null, topic: "", hiddenLanes: new Set(), focus: focus < 0 ? null : focus,
      hiddenTypes: new Set(model.types.map(([t]) => t).filter(KemuSequence.isStoreRead)),
    };
    const svg = box.querySelector("svg");
    const diagram = KemuSequence.Diagram({
      events, model, svg, state, tip, prefix: box.dataset.sequence + "-",
      box: box.querySelector(".sequence-box"), hint: box.querySelector(".hint"),
    });
    state.view = diagram.fullDomain();
    diagram.draw();
    svg.dataset.focusSeq = data.focus;
    svg.dataset.lanes = model.laneIds.join(" ");
    window.addEventListener("resize", diagram.redraw);
  }
})();
"""


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


# ----------------------------------------------------------------------------- numbers


def seconds(value: float | None) -> str:
    """A duration for people: ``0``, ``850 µs``, ``12.5 ms``, ``2.35 s``, ``41 s``."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if magnitude < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _key(text: str) -> str:
    """``text`` as part of an SVG id: letters, digits, ``.``, ``_`` and ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


# ----------------------------------------------------------------------------- plots


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig: Figure, chart: str, title: str) -> str:
    """The figure as an inline ``<svg class="plot" data-chart=chart>`` with a title."""
    import matplotlib

    out = io.StringIO()
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": f"kemu-{chart}", "font.size": 10}
    ):
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    text = out.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    # matplotlib names its definitions from the figure's content; a prefix per chart
    # keeps ids unique on a page of many figures
    text = re.sub(r'id="([^"]+)"', lambda m: f'id="{_id(chart, m.group(1))}"', text)
    text = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{_id(chart, m.group(1))})", text)
    text = re.sub(
        r'xlink:href="#([^"]+)"', lambda m: f'xlink:href="#{_id(chart, m.group(1))}"', text
    )
    head = f'<svg class="plot" data-chart="{escape(chart)}" role="img" aria-label="{escape(title)}"'
    return head + text[len("<svg") :]


def _id(chart: str, name: str) -> str:
    return name if name.startswith("value-") else f"{_key(chart)}-{name}"


def _style(ax: Axes) -> None:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="x", color="#e6eaef", linewidth=0.8)
    ax.set_axisbelow(True)


def _labels(ax: Axes, bars: Any, chart: str, keys: Sequence[str], texts: Sequence[str]) -> None:
    """Each bar's value written at its end, as text with the id ``value-<chart>-<key>``."""
    for label, key in zip(
        ax.bar_label(bars, labels=list(texts), padding=3, fontsize=9), keys, strict=True
    ):
        label.set_gid(f"value-{_key(chart)}-{_key(key)}")


def hbars(
    chart: str,
    title: str,
    values: Mapping[str, Sequence[float]],
    series: Sequence[str],
    colours: Sequence[str],
    *,
    unit: str,
    label: Any = _number,
    log: bool = False,
) -> str:
    """Horizontal bars, one group per key and one bar per series, each labelled with its
    value; ``log``: a logarithmic value axis (for durations over several decades)."""
    names = list(values)
    height = 0.9 + 0.24 * len(names) * max(1, len(series)) ** 0.6
    fig = _figure(8.6, height)
    ax = fig.add_subplot()
    step = 0.8 / len(series)
    for j, (name, colour) in enumerate(zip(series, colours, strict=True)):
        ys = [i + (j - (len(series) - 1) / 2) * step for i in range(len(names))]
        xs = [float(values[k][j] or 0.0) for k in names]
        bars = ax.barh(ys, xs, height=step * 0.9, color=colour, label=name)
        keys = [f"{k}-{name}" if len(series) > 1 else k for k in names]
        _labels(ax, bars, chart, keys, [label(x) for x in xs])
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
    top = max((float(v or 0.0) for vs in values.values() for v in vs), default=0.0)
    if not log:
        ax.set_xlim(0, top * 1.18 if top > 0 else 1)
    ax.set_xlabel(unit)
    _style(ax)
    if len(series) > 1:
        fig.legend(loc="outside lower center", ncols=len(series), fontsize=9, frameon=False)
    return _svg(fig, chart, title)


def lifecycle_plot(chart: str, lifecycles: Sequence[Mapping[str, Any]], end: float) -> str:
    """One row per topic generation, a bar per phase from its time to the next reached
    phase's (creation: created → online; deletion: marked → ... → logs gone)."""
    fig = _figure(8.6, 1.6 + 0.42 * len(lifecycles))
    ax = fig.add_subplot()
    drawn: set[str] = set()
    span = max(end, 1e-3)
    for row, life in enumerate(lifecycles):
        reached = [(c, life[c]) for c in LIFECYCLE_COLUMNS if life.get(c) is not None]
        for (phase, start), (_, stop) in zip(reached, [*reached[1:], (None, None)], strict=True):
            if phase == "online":
                continue  # creation ends at online; deletion starts at marked
            width = (stop if stop is not None else start) - start
            ax.broken_barh(
                [(start, max(width, span / 400))],
                (row - 0.35, 0.7),
                color=_PHASE_COLOURS[phase],
                label=None if phase in drawn else _PHASE_NAMES[phase],
            )
            drawn.add(phase)
        for what, key in (("creation", "creation_duration"), ("deletion", "deletion_duration")):
            if life.get(key) is not None and what == "deletion":
                at = life["logs_gone"] if life.get("logs_gone") is not None else life["znodes_gone"]
                text = ax.text(
                    at, row, f"  deleted in {seconds(life[key])}", va="center", fontsize=9
                )
                text.set_gid(f"value-{_key(chart)}-{_key(life['topic'])}-{life['generation']}")
    ax.set_yticks(
        range(len(lifecycles)), [f"{life['topic']} #{life['generation']}" for life in lifecycles]
    )
    ax.invert_yaxis()
    ax.set_xlim(0, span * 1.25)
    ax.set_xlabel("trace time (s)")
    _style(ax)
    fig.legend(loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    return _svg(fig, chart, "topic lifecycles")


def rate_plot(chart: str, sides: Mapping[str, tuple[Sequence[int], float]]) -> str:
    """Messages per second over the run, one step line per side (a run, or baseline and
    candidate), from the analysis' equal time buckets."""
    fig = _figure(8.6, 2.6)
    ax = fig.add_subplot()
    colours = {"baseline": _BASELINE, "candidate": _CANDIDATE}
    for name, (counts, bucket) in sides.items():
        if not counts or bucket <= 0:
            continue
        xs = [i * bucket for i in range(len(counts) + 1)]
        ys = [c / bucket for c in counts]
        ax.stairs(
            ys,
            xs,
            label=name,
            color=colours.get(name, _BASELINE),
            linewidth=1.6,
            fill=len(sides) == 1,
            alpha=0.85 if len(sides) == 1 else 1.0,
        )
        peak = max(range(len(counts)), key=lambda i: counts[i])
        text = ax.annotate(
            f"{ys[peak]:.3g}/s",
            (xs[peak] + bucket / 2, ys[peak]),
            fontsize=8,
            ha="center",
            va="bottom",
            xytext=(0, 2),
            textcoords="offset points",
        )
        text.set_gid(f"value-{_key(chart)}-peak-{_key(name)}")
    ax.set_xlabel("trace time (s)")
    ax.set_ylabel("messages/s")
    ax.set_ylim(bottom=0)
    ax.margins(x=0)
    _style(ax)
    if len(sides) > 1:
        ax.legend(fontsize=9, frameon=False)
    return _svg(fig, chart, "messages per second")


def summary_plot(chart: str, runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One dot per run: its trace time against its events, red when it broke an
    invariant."""
    fig = _figure(8.6, 3.0)
    ax = fig.add_subplot()
    for bad, colour, name in ((False, "#23803b", "no violation"), (True, "#c0281f", "violations")):
        picked = [r for r in runs.values() if bool(r["violations"]) == bad]
        if picked:
            ax.scatter(
                [r["end"] or 0.0 for r in picked],
                [r["events"] for r in picked],
                color=colour,
                label=f"{name} ({len(picked)})",
                s=24,
                alpha=0.8,
            )
    ax.set_xlabel("trace time of the run (s)")
    ax.set_ylabel("events")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _style(ax)
    ax.grid(axis="y", color="#e6eaef", linewidth=0.8)
    ax.legend(fontsize=9, frameon=False)
    return _svg(fig, chart, "runs")


# ----------------------------------------------------------------------------- html


def _page(title: str, body: Iterable[str], *, diagrams: bool = False) -> str:
    """The page; ``diagrams``: with the sequence diagram's style and script (protocol/pages/), which
    draws each ``<div data-sequence=ID>`` from the JSON in the element ``ID``."""
    style = (asset("sequence.css").decode() if diagrams else "") + _STYLE
    script = (
        "<script>\n" + asset("sequence.js").decode() + _DRAW_SEQUENCES + "</script>\n"
        if diagrams
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{style}</style></head><body>"
        f"<h1>{escape(title)}</h1>\n"
        + "\n".join(body)
        + script
        + _OVERFLOW_CHECK
        + "</body></html>\n"
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, text: int = 1) -> str:
    """A table in a box that scrolls; the first ``text`` columns are text, the rest
    numbers (rounded). A cell given as ``("html", markup)`` is written as is."""
    if not rows:
        return "<p class='note'>none</p>"

    def cell(i: int, c: Any) -> str:
        cls = " class='text'" if i < text or isinstance(c, str) else ""
        if isinstance(c, tuple) and c[0] == "html":
            return f"<td{cls}>{c[1]}</td>"
        return f"<td{cls}>{escape(_number(c))}</td>"

    head = "".join(
        f"<th{' class=text' if i < text else ''}>{escape(h)}</th>" for i, h in enumerate(header)
    )
    body = "".join(
        "<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<div class='scroll'><table><tr>{head}</tr>{body}</table></div>"


def _durations(
    chart: str, title: str, what: str, stats: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """A percentile chart of the keys with a non-zero duration (a log axis when they span
    more than two decades), a note naming those always 0, and the table."""
    out = [f"<h3>{escape(title)}</h3>"]
    timed = {k: v for k, v in stats.items() if (v["max"] or 0) > 0}
    zero = sorted(k for k in stats if k not in timed)
    if timed:
        values = {k: [v[p] for p in PCTS] for k, v in timed.items()}
        positive = [x for vs in values.values() for x in vs if x]
        log = bool(positive) and max(positive) / min(positive) > 100
        out.append(
            hbars(chart, title, values, PCTS, _PCT_COLOURS, unit="seconds", label=seconds, log=log)
        )
    if zero:
        out.append(
            f"<p class='note'>{len(zero)} {what}(s) took no time on the trace's clock (a "
            f"deterministic run's virtual clock does not move while actors work): "
            f"{escape(', '.join(zero))}.</p>"
        )
    out.append(
        _table(
            (what, "count", "p50", "p90", "p99", "max"),
            [(k, v["count"], *(seconds(v[p]) for p in (*PCTS, "max"))) for k, v in stats.items()],
        )
    )
    return out


def _counts(chart: str, title: str, counts: Mapping[str, int], unit: str) -> str:
    top = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:_TOP])
    if not top:
        return "<p class='note'>none</p>"
    note = (
        "" if len(counts) <= _TOP else f"<p class='note'>the {_TOP} commonest of {len(counts)}</p>"
    )
    return (
        hbars(chart, title, {k: [v] for k, v in top.items()}, ("count",), ("#4e79a7",), unit=unit)
        + note
    )


def _run_section(index: int, run: str, result: Mapping[str, Any], open_: bool) -> list[str]:
    violations = result["violations"]
    status = (
        f"<span class='bad'>{len(violations)} violation(s)</span>"
        if violations
        else "<span class='ok'>no violation</span>"
    )
    out = [
        f"<details class='run' id='run-{index}'{' open' if open_ else ''}>"
        f"<summary><h2>{escape(run)}</h2> · {status}</summary>",
        f"<p class='note'>{result['events']:,} events over {seconds(result['end'])} of trace "
        f"time; {result['operations']} topic operation(s); "
        f"<span class='mono'>{escape(str(result.get('source')))}</span></p>",
    ]
    rows = [(v["rule"], v["message"], v["seq"], seconds(v["ts"])) for v in violations]
    rows += [
        (v["rule"] + " (notice)", v["message"], v["seq"], seconds(v["ts"]))
        for v in result["notices"]
    ]
    if rows:
        out.append("<h3>Invariants</h3>" + _table(("rule", "what", "event", "t"), rows, text=2))
    out.append("<h3>Topic lifecycles</h3>")
    lifecycles = result["lifecycles"]
    if lifecycles:
        out.append(lifecycle_plot(f"lifecycle-{index}", lifecycles, result["end"] or 0.0))
    out.append(
        _table(
            (
                "topic",
                "gen",
                "partitions",
                "creation",
                "deletion",
                *(c.replace("_", " ") for c in LIFECYCLE_COLUMNS),
            ),
            [
                (
                    c["topic"],
                    c["generation"],
                    c["partitions"],
                    seconds(c["creation_duration"]),
                    seconds(c["deletion_duration"]),
                    *(seconds(c[k]) for k in LIFECYCLE_COLUMNS),
                )
                for c in lifecycles
            ],
        )
    )
    messages = result["messages"]
    out.append("<h3>Messages per second</h3>")
    out.append(
        rate_plot(f"rate-{index}", {"sent": (messages["rate"], messages["rate_bucket_seconds"])})
    )
    per_op = result["messages_per_operation"]
    out.append("<div class='grid2'><div><h3>Messages by type</h3>")
    out.append(_counts(f"types-{index}", "messages by type", messages["by_type"], "messages sent"))
    out.append(
        "<details><summary>every type, and per topic operation</summary>"
        + _table(
            ("type", "sent", "per operation"),
            [(k, v, per_op.get(k)) for k, v in messages["by_type"].items()],
        )
        + "</details></div><div><h3>Messages by node</h3>"
    )
    out.append(_counts(f"nodes-{index}", "messages by node", messages["by_node"], "messages sent"))
    out.append("</div></div><div class='grid2'><div>")
    out += _durations(
        f"latency-{index}",
        "Request latencies (send → answer delivered)",
        "request type",
        result["latency"],
    )
    out.append("</div><div>")
    out += _durations(
        f"queue-{index}", "Controller event queue times", "event", result["queue_time"]
    )
    out.append("</div></div><h3>Errors seen</h3>")
    out.append(_counts(f"errors-{index}", "errors", result["errors"], "times seen"))
    out.append("</details>")
    return out


def _scenario(run: str) -> str:
    return run.rsplit("/seed-", 1)[0] if "/seed-" in run else run


def _campaign_summary(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    failed = [r for r in runs.values() if r["violations"]]
    events = sum(r["events"] for r in runs.values())
    out = [
        "<h2>Summary</h2>",
        f"<p>{len(runs)} run(s), {events:,} events; "
        + (
            f"<span class='bad'>{len(failed)} run(s) broke an invariant</span>"
            if failed
            else "<span class='ok'>no invariant broken</span>"
        )
        + "</p>",
    ]
    by_scenario: dict[str, list[Mapping[str, Any]]] = {}
    for run, result in runs.items():
        by_scenario.setdefault(_scenario(run), []).append(result)
    if len(runs) > 1:
        out.append(summary_plot("summary", runs))
        rows = []
        for name, results in by_scenario.items():
            deletions = [
                c["deletion_duration"]
                for r in results
                for c in r["lifecycles"]
                if c["deletion_duration"] is not None
            ]
            rows.append(
                (
                    name,
                    len(results),
                    sum(bool(r["violations"]) for r in results),
                    round(statistics.median(r["events"] for r in results)),
                    seconds(statistics.median(r["end"] or 0.0 for r in results)),
                    seconds(max(deletions)) if deletions else "-",
                )
            )
        out.append(
            _table(
                (
                    "scenario",
                    "runs",
                    "with violations",
                    "median events",
                    "median length",
                    "longest deletion",
                ),
                rows,
            )
        )
    out.append(
        _table(
            ("run", "events", "length", "violations", "topic lifecycles"),
            [
                (
                    ("html", f"<a href='#run-{i}'>{escape(run)}</a>"),
                    r["events"],
                    seconds(r["end"]),
                    (
                        "html",
                        f"<span class='{'bad' if r['violations'] else 'ok'}'>"
                        f"{len(r['violations'])}</span>",
                    ),
                    len(r["lifecycles"]),
                )
                for i, (run, r) in enumerate(runs.items())
            ],
        )
    )
    return out


def render_analysis_html(document: Mapping[str, Any]) -> str:
    runs: Mapping[str, Any] = document["runs"]
    body = _campaign_summary(runs)
    few = len(runs) <= _OPEN_RUNS
    for index, (run, result) in enumerate(runs.items()):
        body += _run_section(index, run, result, few or bool(result["violations"]))
    return _page(f"kemu trace analysis: {len(runs)} run(s)", body)


# ----------------------------------------------------------------------------- diff


def _delta_plot(chart: str, deltas: Sequence[Mapping[str, Any]], crossed: set[str]) -> str:
    """Baseline and candidate side by side for the metrics that changed most: those
    beyond their threshold first (their names marked), then by relative change."""

    def change(d: Mapping[str, Any]) -> float:
        b, c = float(d["baseline"] or 0.0), float(d["candidate"] or 0.0)
        return abs(c - b) / max(abs(b), abs(c), 1e-12)

    shown = sorted(deltas, key=lambda d: (d["metric"] not in crossed, -change(d), d["metric"]))
    shown = shown[:_TOP]
    values = {
        ("✖ " if d["metric"] in crossed else "") + d["metric"]: [
            float(d["baseline"] or 0.0),
            float(d["candidate"] or 0.0),
        ]
        for d in shown
    }
    return hbars(
        chart,
        "metrics that changed",
        values,
        ("baseline", "candidate"),
        (_BASELINE, _CANDIDATE),
        unit="value (seconds, or messages per operation)",
    )


def _divergence(d: Mapping[str, Any]) -> str:
    return (
        f"<div class='divergence'><b>{escape(d['topic'])}</b>: its normalised sequences part at "
        f"its event {d['index']} (of {d['baseline_events']} in the baseline, "
        f"{d['candidate_events']} in the candidate)"
        f"<br>baseline event {_number(d['baseline_seq'])}: "
        f"<code>{escape(str(d['baseline']))}</code>"
        f"<br>candidate event {_number(d['candidate_seq'])}: "
        f"<code>{escape(str(d['candidate']))}</code></div>"
    )


def trace_window(path: Path, seq: int) -> list[bytes]:
    """The events of the trace at ``path`` from ``_AROUND`` before the event ``seq`` to
    ``_AROUND`` after it, each as its JSON text."""
    low, high = seq - _AROUND, seq + _AROUND
    if path.suffix == ".parquet":
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=list(EVENT_COLUMNS))
        table = table.filter(
            pc.and_(pc.greater_equal(table["seq"], low), pc.less_equal(table["seq"], high))
        )
        return [
            msgspec.json.encode(RawEvent(**{**row, "fields": msgspec.Raw(row["fields"] or "{}")}))
            for row in table.to_pylist()
        ]
    found: list[bytes] = []
    for event in raw_events(path):
        if event.seq > high:
            break
        if event.seq >= low:
            found.append(msgspec.json.encode(event))
    return found


def _brokers(windows: Iterable[Sequence[bytes]]) -> int:
    """How many broker lanes both diagrams draw: one past the highest broker named."""
    ids = [int(m) for w in windows for e in w for m in re.findall(rb'"broker-(\d+)', e)]
    return max(ids) + 1 if ids else 0


def _diagrams(index: int, pair: Mapping[str, Any]) -> list[str]:
    """Both runs' sequence diagrams side by side around the first divergence (the
    earliest in the baseline's trace), its event marked on each side."""
    found = [
        d
        for d in pair["divergences"]
        if d["baseline_seq"] is not None or d["candidate_seq"] is not None
    ]
    if not found:
        return []
    first = min(
        found, key=lambda d: (d["baseline_seq"] is None, d["baseline_seq"] or 0, d["topic"])
    )
    sides = {side: (Path(pair[side]), first[f"{side}_seq"]) for side in ("baseline", "candidate")}
    try:
        windows = {
            side: trace_window(path, seq) if seq is not None else []
            for side, (path, seq) in sides.items()
        }
    except (OSError, ValueError) as exc:
        return [f"<p class='note'>the sequence diagrams could not be drawn: {escape(str(exc))}</p>"]
    brokers = _brokers(windows.values())
    out = [
        f"<h3>Around the first divergence: topic {escape(first['topic'])}</h3>",
        "<p class='note'>Each run's messages from "
        f"{_AROUND} events before its divergent event to {_AROUND} after; the divergent "
        "event is the red line, and what it drew is thick red. Wheel: zoom, drag: pan, "
        "hover: details.</p><div class='grid2'>",
    ]
    for side, (_, seq) in sides.items():
        ident = f"sequence-{index}-{side}"
        data = (
            b'{"focus":'
            + (str(seq).encode() if seq is not None else b"null")
            + b',"brokers":'
            + str(brokers).encode()
            + b',"events":['
            + b",".join(windows[side])
            + b"]}"
        )
        what = f"event {seq:,}" if seq is not None else "its sequence of the topic ended"
        out.append(
            f"<div class='sequence' data-sequence='{ident}' data-side='{side}'>"
            f"<h3>{side}: {what}</h3><div class='hint note'></div>"
            f"<div class='sequence-box'><svg class='sequence' id='{ident}-svg' role='img' "
            f"aria-label='{side} message sequence'></svg></div>"
            f"<script type='application/json' id='{ident}'>{script_text(data).decode()}</script>"
            "</div>"
        )
    out.append("</div>")
    return out


def render_diff_html(document: Mapping[str, Any]) -> str:
    crossed = document["crossed"]
    pairs = document["pairs"]
    body = [
        "<h2>Summary</h2>",
        f"<p class='{'bad' if crossed else 'ok'}'>{len(crossed)} threshold(s) crossed over "
        f"{len(pairs)} run pair(s)</p>",
        _table(
            ("run", "thresholds crossed", "metrics changed", "topics diverging"),
            [
                (
                    ("html", f"<a href='#pair-{i}'>{escape(p['run'])}</a>"),
                    (
                        "html",
                        f"<span class='{'bad' if p['crossed'] else 'ok'}'>"
                        f"{len(p['crossed'])}</span>",
                    ),
                    len(p["deltas"]),
                    len(p["divergences"]),
                )
                for i, p in enumerate(pairs)
            ],
        ),
    ]
    if document.get("unmatched"):
        body.append(
            "<p class='note'>unmatched runs: " + escape(", ".join(document["unmatched"])) + "</p>"
        )
    for i, pair in enumerate(pairs):
        body.append(
            f"<details class='run' id='pair-{i}' open><summary><h2>"
            f"{escape(pair['run'])}</h2></summary>"
        )
        body.append(
            f"<p class='note'>baseline <span class='mono'>{escape(pair['baseline'])}</span>"
            f"<br>candidate <span class='mono'>{escape(pair['candidate'])}</span></p>"
        )
        body += _diagrams(i, pair)
        body.append("<h3>First divergence per topic (normalised message sequence)</h3>")
        body.append(
            "".join(_divergence(d) for d in pair["divergences"])
            or "<p class='note'>none: every topic's sequence is the same</p>"
        )
        rates = pair.get("rates")
        if rates:
            body.append("<h3>Messages per second, baseline and candidate</h3>")
            body.append(
                rate_plot(
                    f"rate-pair-{i}",
                    {side: (r["rate"], r["bucket_seconds"]) for side, r in rates.items()},
                )
            )
        crossed_names = {c["metric"] for c in pair["crossed"]}
        if pair["deltas"]:
            body.append("<h3>Metrics that changed</h3>")
            body.append(_delta_plot(f"deltas-{i}", pair["deltas"], crossed_names))
        body.append("<h3>Thresholds crossed</h3>")
        body.append(
            _table(
                ("metric", "baseline", "candidate", "delta", "limit"),
                [
                    (c["metric"], c["baseline"], c["candidate"], c["delta"], c["limit"])
                    for c in pair["crossed"]
                ],
            )
        )
        if pair["new_errors"] or pair["vanished_errors"]:
            body.append("<h3>Error names</h3>")
            body.append(
                _table(
                    ("new in the candidate", "vanished"),
                    [(", ".join(pair["new_errors"]), ", ".join(pair["vanished_errors"]))],
                    text=2,
                )
            )
        body.append("<h3>Every metric delta</h3>")
        body.append(
            _table(
                ("metric", "baseline", "candidate", "delta"),
                [(m["metric"], m["baseline"], m["candidate"], m["delta"]) for m in pair["deltas"]],
            )
        )
        body.append("</details>")
    return _page("kemu trace diff", body, diagrams=True)
