"""The outputs of ``kemu trace analyze`` and ``kemu trace diff``: JSON, and one
self-contained HTML page with its plots drawn as inline SVG (no plotting library, no
scripts, no external resources)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, Final

from spark.analyze import LIFECYCLE_COLUMNS

__all__ = ["render_analysis_html", "render_diff_html", "write_json"]

_PHASE_COLOURS: Final = {
    "created": "#4e79a7",
    "online": "#4e79a7",
    "marked": "#f28e2b",
    "update_metadata_deleted": "#e15759",
    "stop_replica_offline": "#76b7b2",
    "stop_replica_delete": "#59a14f",
    "znodes_gone": "#b07aa1",
    "logs_gone": "#9c755f",
}
_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #2e7d32; }
svg { display: block; margin: 0.5em 0 1em; } svg text { font-size: 11px; }
"""


def write_json(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n")


def _page(title: str, body: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _percentiles(title: str, what: str, stats: dict[str, dict[str, Any]]) -> list[str]:
    """A heading, a bar plot of p50/p90/p99 per key, and the table with counts and max."""
    return [
        f"<h3>{escape(title)}</h3>",
        bars_svg({k: (v["p50"], v["p90"], v["p99"]) for k, v in stats.items()}, PCTS, "s"),
        _table(
            (what, "count", "p50", "p90", "p99", "max"),
            [(k, v["count"], v["p50"], v["p90"], v["p99"], v["max"]) for k, v in stats.items()],
        ),
    ]


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_fmt(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


# ----------------------------------------------------------------------------- plots


def lifecycle_svg(lifecycles: Sequence[Mapping[str, Any]], end: float) -> str:
    """One row per topic generation: a bar per phase, from the phase's time to the next
    reached phase's (creation: created -> online; deletion: marked -> ... -> logs gone)."""
    if not lifecycles:
        return "<p>no topic lifecycle</p>"
    width, left, row_h = 760, 170, 22
    span = max(end, 1e-9)
    height = row_h * len(lifecycles) + 30

    def x(t: float) -> float:
        return left + (width - left - 10) * (t / span)

    parts = [f"<svg width='{width}' height='{height}' role='img'>"]
    for i, life in enumerate(lifecycles):
        y = 5 + i * row_h
        label = f"{life['topic']} #{life['generation']}"
        parts.append(f"<text x='4' y='{y + 14}'>{escape(label)}</text>")
        reached = [(c, life[c]) for c in LIFECYCLE_COLUMNS if life.get(c) is not None]
        for (phase, start), (_, stop) in zip(reached, [*reached[1:], (None, None)], strict=True):
            if phase == "online":
                continue  # creation ends at online; deletion starts at marked
            stop_t = start if stop is None else stop
            x0, x1 = x(start), x(stop_t)
            title = f"{phase} at t={start:.3f}s" + (
                "" if stop is None else f", next phase at t={stop_t:.3f}s"
            )
            parts.append(
                f"<rect x='{x0:.1f}' y='{y + 3}' width='{max(x1 - x0, 2):.1f}' height='14' "
                f"fill='{_PHASE_COLOURS[phase]}'><title>{escape(title)}</title></rect>"
            )
    axis_y = height - 10
    parts.append(f"<text x='{left}' y='{axis_y}'>0 s</text>")
    parts.append(f"<text x='{width - 60}' y='{axis_y}'>{span:.3g} s</text>")
    parts.append("</svg>")
    legend = " ".join(
        f"<span style='color:{colour}'>&#9632;</span> {escape(name)}"
        for name, colour in _PHASE_COLOURS.items()
        if name != "online"
    )
    return "".join(parts) + f"<p>{legend}</p>"


def bars_svg(values: Mapping[str, Sequence[float]], series: Sequence[str], unit: str) -> str:
    """Horizontal grouped bars: one group per key, one bar per series (e.g. p50/p90/p99),
    on a linear scale from 0 to the largest value."""
    if not values:
        return "<p>no data</p>"
    colours = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2")
    width, left, bar_h = 760, 230, 6
    group_h = bar_h * len(series) + 6
    height = group_h * len(values) + 30
    top = max((v for vs in values.values() for v in vs if v is not None), default=0.0)
    scale = (width - left - 80) / top if top > 0 else 0.0
    parts = [f"<svg width='{width}' height='{height}' role='img'>"]
    for i, (name, vs) in enumerate(values.items()):
        y = 5 + i * group_h
        parts.append(f"<text x='4' y='{y + group_h / 2 + 3}'>{escape(name)}</text>")
        for j, v in enumerate(vs):
            w = max((v or 0.0) * scale, 1.0)
            parts.append(
                f"<rect x='{left}' y='{y + j * bar_h}' width='{w:.1f}' height='{bar_h - 1}' "
                f"fill='{colours[j % len(colours)]}'><title>{escape(name)} {series[j]}: "
                f"{_fmt(v)} {unit}</title></rect>"
            )
    parts.append(f"<text x='{left}' y='{height - 8}'>0</text>")
    parts.append(f"<text x='{width - 80}' y='{height - 8}'>{top:.3g} {escape(unit)}</text>")
    parts.append("</svg>")
    legend = " ".join(
        f"<span style='color:{colours[j % len(colours)]}'>&#9632;</span> {escape(s)}"
        for j, s in enumerate(series)
    )
    return "".join(parts) + f"<p>{legend}</p>"


def rate_svg(counts: Sequence[int], bucket_seconds: float) -> str:
    """Sends per time bucket over the run, as columns."""
    if not counts or not any(counts):
        return "<p>no messages</p>"
    width, height, bottom = 760, 140, 20
    top = max(counts)
    col_w = (width - 60) / len(counts)
    parts = [f"<svg width='{width}' height='{height}' role='img'>"]
    for i, c in enumerate(counts):
        h = (height - bottom - 10) * c / top
        x = 50 + i * col_w
        start = i * bucket_seconds
        parts.append(
            f"<rect x='{x:.1f}' y='{height - bottom - h:.1f}' width='{max(col_w - 1, 1):.1f}' "
            f"height='{h:.1f}' fill='#4e79a7'><title>t={start:.3f}s: {c} sends</title></rect>"
        )
    parts.append(f"<text x='4' y='14'>{top}</text><text x='4' y='{height - bottom}'>0</text>")
    total = bucket_seconds * len(counts)
    parts.append(f"<text x='50' y='{height - 4}'>0 s</text>")
    parts.append(f"<text x='{width - 60}' y='{height - 4}'>{total:.3g} s</text></svg>")
    return "".join(parts)


# ----------------------------------------------------------------------------- analysis


def _run_section(run: str, result: Mapping[str, Any]) -> list[str]:
    out = [f"<h2 id='{escape(run)}'>{escape(run)}</h2>"]
    out.append(
        f"<p>{result['events']} events over {_fmt(result['end'])} s; "
        f"{result['operations']} topic operations; source {escape(str(result.get('source')))}</p>"
    )
    violations = result["violations"]
    status = (
        f"<span class='bad'>{len(violations)} violation(s)</span>"
        if violations
        else "<span class='ok'>no violation</span>"
    )
    out.append(f"<h3>Invariants: {status}</h3>")
    rows = [(v["rule"], v["message"], v["seq"], v["ts"]) for v in violations]
    rows += [(v["rule"] + " (notice)", v["message"], v["seq"], v["ts"]) for v in result["notices"]]
    if rows:
        out.append(_table(("rule", "what", "event", "t (s)"), rows))
    out.append("<h3>Topic lifecycles</h3>")
    out.append(lifecycle_svg(result["lifecycles"], result["end"] or 0.0))
    out.append(
        _table(
            ("topic", "gen", "partitions", *LIFECYCLE_COLUMNS, "creation (s)", "deletion (s)"),
            [
                (
                    c["topic"],
                    c["generation"],
                    c["partitions"],
                    *(c[k] for k in LIFECYCLE_COLUMNS),
                    c["creation_duration"],
                    c["deletion_duration"],
                )
                for c in result["lifecycles"]
            ],
        )
    )
    out += _percentiles("Request latencies (send → answer delivered)", "request", result["latency"])
    messages = result["messages"]
    out.append("<h3>Message rate (sends per bucket)</h3>")
    out.append(rate_svg(messages["rate"], messages["rate_bucket_seconds"]))
    out.append("<h3>Messages</h3>")
    per_op = result["messages_per_operation"]
    out.append(
        _table(
            ("type", "sent", "per operation"),
            [(k, v, per_op.get(k)) for k, v in messages["by_type"].items()],
        )
    )
    out.append(_table(("node", "sent"), list(messages["by_node"].items())))
    out += _percentiles("Controller event queue times", "event", result["queue_time"])
    out.append("<h3>Errors seen</h3>")
    out.append(_table(("error", "count"), list(result["errors"].items())))
    return out


PCTS: Final = ("p50", "p90", "p99")


def render_analysis_html(document: Mapping[str, Any]) -> str:
    runs: Mapping[str, Any] = document["runs"]
    summary = [
        (
            f"<a href='#{escape(run)}'>{escape(run)}</a>",
            r["events"],
            len(r["violations"]),
            len(r["lifecycles"]),
        )
        for run, r in runs.items()
    ]
    head = "".join(f"<th>{h}</th>" for h in ("run", "events", "violations", "lifecycles"))
    rows = "".join(
        f"<tr><td>{link}</td><td>{e}</td><td class='{'bad' if v else 'ok'}'>{v}</td>"
        f"<td>{n}</td></tr>"
        for link, e, v, n in summary
    )
    body = [f"<table><tr>{head}</tr>{rows}</table>"]
    for run, result in runs.items():
        body += _run_section(run, result)
    return _page(f"kemu trace analysis: {len(runs)} run(s)", body)


# ----------------------------------------------------------------------------- diff


def render_diff_html(document: Mapping[str, Any]) -> str:
    body: list[str] = []
    crossed = document["crossed"]
    body.append(
        f"<p class='{'bad' if crossed else 'ok'}'>{len(crossed)} threshold(s) crossed over "
        f"{len(document['pairs'])} run pair(s)</p>"
    )
    if document.get("unmatched"):
        body.append("<p>unmatched runs: " + escape(", ".join(document["unmatched"])) + "</p>")
    for pair in document["pairs"]:
        body.append(f"<h2>{escape(pair['run'])}</h2>")
        body.append(
            f"<p>baseline {escape(pair['baseline'])} · candidate {escape(pair['candidate'])}</p>"
        )
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
        body.append("<h3>Error names</h3>")
        body.append(
            _table(
                ("new in candidate", "vanished"),
                [(", ".join(pair["new_errors"]), ", ".join(pair["vanished_errors"]))],
            )
        )
        body.append("<h3>First divergence per topic (normalised message sequence)</h3>")
        body.append(
            _table(
                ("topic", "index", "baseline event", "baseline", "candidate event", "candidate"),
                [
                    (
                        d["topic"],
                        d["index"],
                        d["baseline_seq"],
                        d["baseline"],
                        d["candidate_seq"],
                        d["candidate"],
                    )
                    for d in pair["divergences"]
                ],
            )
        )
        body.append("<h3>Metric deltas</h3>")
        body.append(
            _table(
                ("metric", "baseline", "candidate", "delta"),
                [(m["metric"], m["baseline"], m["candidate"], m["delta"]) for m in pair["deltas"]],
            )
        )
    return _page("kemu trace diff", body)
