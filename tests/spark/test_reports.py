"""The pages of ``kemu trace analyze`` (``report.html``) and ``kemu trace diff``
(``diff.html``), opened in headless Chromium from the file system: their plots are drawn
with the document's values (read back from the SVG), nothing is wider than the window,
and nothing is fetched. Screenshots go to ``artifacts/analysis/``."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from cluster.cli.main import main
from cluster.trace_files import export_parquet
from spark.report import seconds, trace_window
from tests.support.browser import ARTIFACTS, Element, elements, render
from tests.support.campaign import run_forgetful_controller

SCENARIO = "controller-killed-mid-deletion"
RUN = f"{SCENARIO}/seed-1"

# each runs chaos runs and a browser
pytestmark = pytest.mark.slow


def _values(dom: list[Element]) -> dict[str, str]:
    """Every value label of the page's plots: its id, and its text."""
    return {
        e.attrs["id"]: e.text.strip() for e in dom if e.attrs.get("id", "").startswith("value-")
    }


def _body(dom: list[Element]) -> Element:
    return next(e for e in dom if e.tag == "body")


def _no_network(page: str) -> None:
    without_namespaces = page.replace("http://www.w3.org/2000/svg", "").replace(
        "http://www.w3.org/1999/xlink", ""
    )
    assert "http://" not in without_namespaces
    assert "https://" not in without_namespaces


@pytest.fixture(scope="module")
def analysed(
    campaign: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Any], list[Element]]:
    out = tmp_path_factory.mktemp("analysis")
    with redirect_stdout(io.StringIO()):
        assert main(["trace", "analyze", str(campaign), "--out", str(out), "--quiet"]) == 0
    page = out / "report.html"
    _no_network(page.read_text())
    dom = elements(render(page, ARTIFACTS / "analysis" / "report.png", out / "chromium"))
    return json.loads((out / "analysis.json").read_text()), dom


def test_the_analysis_page_plots_the_document_s_values(
    analysed: tuple[dict[str, Any], list[Element]],
) -> None:
    document, dom = analysed
    body = _body(dom)
    assert body.attrs["data-ready"] == "1"
    assert body.attrs["data-overflow"] == "none"
    runs = list(document["runs"])
    index = runs.index(RUN)
    run = document["runs"][RUN]
    values = _values(dom)
    charts = {e.attrs["data-chart"] for e in dom if e.tag == "svg" and "plot" in e.classes}
    assert "summary" in charts  # a campaign: one dot per run at the top
    assert {f"lifecycle-{index}", f"rate-{index}", f"types-{index}", f"latency-{index}"} <= charts
    # the messages by type: a bar per type, the commonest first, each labelled with its count
    by_type = sorted(run["messages"]["by_type"].items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    for name, count in by_type:
        assert values[f"value-types-{index}-{name}"] == f"{count:,}"
    # the deletion of `events`, as long as the document says
    (events,) = [c for c in run["lifecycles"] if c["topic"] == "events"]
    deleted = values[f"value-lifecycle-{index}-events-0"]
    assert deleted == f"deleted in {seconds(events['deletion_duration'])}"
    # latencies: the requests that took time on the virtual clock, at their percentiles
    timed = {k: v for k, v in run["latency"].items() if v["max"] > 0}
    assert timed  # the replica fetchers' long polls
    for name, stats in timed.items():
        for pct in ("p50", "p90", "p99"):
            assert values[f"value-latency-{index}-{name}-{pct}"] == seconds(stats[pct])
    # the busiest second of the run, from its rate buckets
    rate, bucket = run["messages"]["rate"], run["messages"]["rate_bucket_seconds"]
    assert values[f"value-rate-{index}-peak-sent"] == f"{max(rate) / bucket:.3g}/s"
    # axes with ticks and units
    texts = {e.text.strip() for e in dom if e.tag == "text"}
    assert {"trace time (s)", "messages/s", "messages sent", "seconds", "events"} <= texts


def test_the_diff_page_overlays_both_runs(
    campaign: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that forgets the marked topics at failover: the diff page draws both
    runs' message rates on one chart and the changed metrics as baseline and candidate
    bars, with the document's values."""
    candidate = run_forgetful_controller(tmp_path / "candidate", monkeypatch)
    out = tmp_path / "out"
    with redirect_stdout(io.StringIO()):
        status = main(
            [
                "trace",
                "diff",
                str(campaign / SCENARIO / "seed-1"),
                str(candidate),
                "--out",
                str(out),
                "--quiet",
            ]
        )
    assert status == 1
    page = out / "diff.html"
    _no_network(page.read_text())
    dom = elements(render(page, ARTIFACTS / "analysis" / "diff.png", tmp_path / "chromium"))
    assert _body(dom).attrs["data-overflow"] == "none"
    (pair,) = json.loads((out / "diff.json").read_text())["pairs"]
    values = _values(dom)
    for side in ("baseline", "candidate"):
        rate = pair["rates"][side]
        assert (
            values[f"value-rate-pair-0-peak-{side}"]
            == f"{max(rate['rate']) / rate['bucket_seconds']:.3g}/s"
        )
    # the changed metrics, those beyond their threshold first (marked), each bar
    # labelled with its value
    crossed = {c["metric"] for c in pair["crossed"]}
    drawn = 0
    for delta in pair["deltas"]:
        name = ("\u2716 " if delta["metric"] in crossed else "") + delta["metric"]
        key = "value-deltas-0-" + re.sub(r"[^A-Za-z0-9._-]", "_", name)
        if f"{key}-baseline" in values:
            drawn += 1
            assert delta["metric"] in crossed
            assert values[f"{key}-baseline"] == f"{delta['baseline'] or 0.0:.3g}"
            assert values[f"{key}-candidate"] == f"{delta['candidate'] or 0.0:.3g}"
    assert drawn == 15  # absent on one side: 0 there
    legend = {e.text.strip() for e in dom if e.tag == "text"}
    assert {"baseline", "candidate"} <= legend
    # both runs' sequence diagrams, side by side, around the first divergence: the
    # earliest in the baseline's trace, its event marked on each side
    first = min(pair["divergences"], key=lambda d: d["baseline_seq"])
    svgs = {e.attrs["id"]: e for e in dom if e.tag == "svg" and "sequence" in e.classes}
    assert list(svgs) == ["sequence-0-baseline-svg", "sequence-0-candidate-svg"]
    for side, svg in zip(("baseline", "candidate"), svgs.values(), strict=True):
        assert svg.attrs["data-focus-seq"] == str(first[f"{side}_seq"])
        assert svg.attrs["data-lanes"] == "broker-0 broker-1 broker-2 store chaos"
        assert int(svg.attrs["data-arrows-drawn"]) > 0
    focus = {e.attrs["data-seq"] for e in dom if e.tag == "line" and "focus" in e.classes}
    assert focus == {str(first["baseline_seq"]), str(first["candidate_seq"])}
    # what the divergent events drew (here the candidate's partition transition) is
    # drawn thick red
    assert [e for e in dom if "divergent" in e.classes]
    lanes = [e.text for e in dom if e.tag == "text" and "lane-name" in e.classes]
    assert lanes == ["broker-0", "broker-1", "broker-2", "metadata store", "chaos driver"] * 2
    # the diagrams zoom and show an arrow's fields on hover, as the chaos report's do
    copy = tmp_path / "interact.html"
    copy.write_bytes(page.read_bytes().replace(b"</body></html>", _INTERACT + b"</body></html>"))
    shot = ARTIFACTS / "analysis" / "diff-interact.png"
    body = _body(elements(render(copy, shot, tmp_path / "chromium-interact")))
    assert body.attrs["data-interacted"] == "1"
    assert body.attrs["data-tip"].split("from")[0] == body.attrs["data-hovered"]
    assert 0 < int(body.attrs["data-zoomed"]) < int(body.attrs["data-before"])


def test_the_diff_diagrams_read_parquet_and_jsonl_alike(campaign: Path, tmp_path: Path) -> None:
    """A diff of Parquet exports draws the same events around the divergence as one of
    the JSONL traces."""
    trace = campaign / RUN / "trace.jsonl"
    parquet = tmp_path / "trace.parquet"
    export_parquet(trace, parquet)
    middle = 600
    jsonl_window, parquet_window = trace_window(trace, middle), trace_window(parquet, middle)
    assert [json.loads(e)["seq"] for e in jsonl_window] == list(range(middle - 120, middle + 121))
    assert [json.loads(e) for e in parquet_window] == [json.loads(e) for e in jsonl_window]


# Appended to a copy of diff.html: hovers the baseline diagram's first arrow, then zooms
# it in with the wheel; what it saw goes into <body>'s data attributes.
_INTERACT = b"""<script>
(async function () {
  const body = document.body;
  const svg = document.getElementById("sequence-0-baseline-svg");
  const arrow = svg.querySelector("line.arrow");
  body.dataset.hovered = arrow.dataset.type;
  arrow.dispatchEvent(new PointerEvent("pointermove", { bubbles: true, clientX: 50, clientY: 50 }));
  body.dataset.tip = document.getElementById("tip").textContent;
  body.dataset.before = svg.dataset.arrowsInView;
  const box = svg.getBoundingClientRect();
  const at = { bubbles: true, cancelable: true, clientX: box.left + box.width / 2,
    clientY: box.top + 40 };
  svg.dispatchEvent(new WheelEvent("wheel", { ...at, deltaY: -800 }));
  await new Promise((done) => setTimeout(done, 100));
  body.dataset.zoomed = svg.dataset.arrowsInView;
  body.dataset.interacted = "1";
})();
</script>
"""
