"""``report.html``: every run directory has one; it is the same bytes for the same
scenario and seed; opened in a real browser (headless Chromium, offline, from the file)
it draws the run: one lane per broker plus the store and the chaos driver, the
controller's requests as arrows to each broker, the kill and the next controller's
election as marks, the fault as a span, the time series, and nothing wider than the page.
The browser's screenshots go to ``artifacts/report/`` at the repository's root."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.chaos import RunOptions, RunResult, load_scenario, parse_scenario, run_scenario
from cluster.chaos.report import report_page
from tests.support.browser import ARTIFACTS, Element, elements, render

ROOT = Path(__file__).resolve().parents[2]
KILLED = ROOT / "scenarios" / "controller-killed-mid-deletion.yaml"
SEED = 3


def _run(path: Path, seed: int, run_dir: Path) -> RunResult:
    return run_scenario(load_scenario(path), RunOptions(run_dir=run_dir, seed=seed))


def _trace(run_dir: Path) -> list[dict[str, object]]:
    lines = (run_dir / "trace.jsonl").read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


@dataclass(frozen=True)
class Drawn:
    result: RunResult
    trace: list[dict[str, object]]
    dom: list[Element]

    def all(self, tag: str, cls: str, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.dom
            if e.tag == tag
            and cls in e.classes
            and all(e.attrs.get(f"data-{k}") == v for k, v in attrs.items())
        ]

    def body(self) -> Element:
        return next(e for e in self.dom if e.tag == "body")


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    base = tmp_path_factory.mktemp("report")
    result = _run(KILLED, SEED, base / "run")
    assert result.status == "passed", [p.line() for p in result.problems]
    page = Path(result.run_dir) / "report.html"
    screenshot = ARTIFACTS / "report" / f"controller-killed-mid-deletion-seed-{SEED}.png"
    dom = render(page, screenshot, base / "chromium")
    return Drawn(result, _trace(Path(result.run_dir)), elements(dom))


def _controller(trace: list[dict[str, object]], epoch: int) -> str:
    for event in trace:
        fields = event["fields"]
        assert isinstance(fields, dict)
        if event["type"] == "controller_elected" and fields["epoch"] == epoch:
            return str(event["node"])
    raise AssertionError(f"no controller elected with epoch {epoch}")


def test_the_page_is_ready_with_one_lane_per_node_and_nothing_overflowing(killed: Drawn) -> None:
    body = killed.body()
    assert body.attrs.get("data-ready") == "1"
    assert body.attrs["data-overflow"] == "none"
    lanes = ["broker-0", "broker-1", "broker-2", "store", "chaos"]
    assert body.attrs["data-lanes"] == " ".join(lanes)
    assert [e.attrs["data-lane"] for e in killed.all("g", "lane")] == lanes
    names = [e.text for e in killed.all("text", "lane-name")]
    assert names == ["broker-0", "broker-1", "broker-2", "metadata store", "chaos driver"]
    assert [e.attrs["data-topic"] for e in killed.all("g", "topic-lane")] == ["events", "keep"]


def test_stop_replica_arrows_go_from_each_controller_to_the_replicas(killed: Drawn) -> None:
    first, second = _controller(killed.trace, 1), _controller(killed.trace, 2)
    arrows = killed.all("line", "arrow", type="StopReplicaRequest")
    pairs = {(a.attrs["data-src"], a.attrs["data-dst"]) for a in arrows}
    brokers = {f"broker-{b}" for b in range(3)}
    # the first controller got its first StopReplica(delete=true) out before it was
    # killed; the second one sends them to every other replica (the events topic has
    # one on every broker), the dead broker's once it is back
    assert any(src == first for src, _ in pairs)
    assert {dst for src, dst in pairs if src == second} == brokers - {second}
    assert {src for src, _ in pairs} <= {first, second}
    answers = killed.all("line", "arrow", type="StopReplicaResponse")
    assert {(a.attrs["data-src"], a.attrs["data-dst"]) for a in answers} >= {
        (dst, second) for dst in brokers - {second}
    }


def test_the_kill_the_fault_and_the_controller_change_are_drawn(killed: Drawn) -> None:
    first, second = _controller(killed.trace, 1), _controller(killed.trace, 2)
    crash = killed.all("text", "mark", type="node_crashed", lane=first)
    elected = killed.all("text", "mark", type="controller_elected", lane=second)
    assert len(crash) == 1
    assert elected
    assert float(elected[-1].attrs["x"]) > float(crash[0].attrs["x"])
    faults = killed.all("rect", "fault", fault="kill_controller")
    assert [f.attrs["data-lane"] for f in faults] == [first]
    bands = killed.all("rect", "band")
    assert [b.attrs["data-lane"] for b in bands][:2] == [first, second]
    # the first controller's band ends where it crashed; the fault's span starts just
    # after (the runner records the fault once the crash is done)
    end_of_first = float(bands[0].attrs["x"]) + float(bands[0].attrs["width"])
    assert end_of_first == pytest.approx(float(crash[0].attrs["x"]), abs=1)
    assert 0 <= float(faults[0].attrs["x"]) - end_of_first < 20
    assert killed.all("rect", "state", state="OnlinePartition")
    # the topic's directories: renamed for deletion, then removed from every broker's
    # disk once the brokers' file-delete delay passed, after the second controller took over
    removed = killed.all("text", "mark", type="remove")
    assert {m.attrs["data-lane"] for m in removed} == {f"broker-{b}" for b in range(3)}
    assert min(float(m.attrs["x"]) for m in removed) > float(elected[-1].attrs["x"])
    assert killed.all("text", "mark", type="rename")


def test_the_time_series_are_drawn_with_the_fault_shaded(killed: Drawn) -> None:
    charts = {e.attrs["data-chart"] for e in killed.all("div", "chart")}
    assert {"partitions", "queue", "messages"} <= charts
    assert "produce" not in charts  # no data plane in this scenario
    shaded = killed.all("rect", "fault-series")
    assert len(shaded) == len(charts)  # the one fault, on every chart
    for chart in killed.all("svg", "series"):
        assert chart.attrs["data-empty"] == "0"


# Appended to a copy of the page: hovers a StopReplica arrow, zooms in, then picks the
# topic "keep"; what it saw goes into <body>'s data attributes for the dumped DOM.
_INTERACT = b"""<script>
(async function () {
  const body = document.body;
  const frame = () => new Promise((done) => setTimeout(done, 100));  // the page draws within 16 ms
  const diagram = document.getElementById("diagram");
  const arrow = diagram.querySelector('line.arrow[data-type="StopReplicaRequest"]');
  arrow.dispatchEvent(new PointerEvent("pointermove", { bubbles: true, clientX: 50, clientY: 50 }));
  body.dataset.tip = document.getElementById("tip").textContent;
  const paired = [...diagram.querySelectorAll("line.paired")];
  body.dataset.paired = paired.map((line) => line.dataset.type).join(" ");
  body.dataset.before = diagram.dataset.arrowsInView;
  for (let k = 0; k < 3; k++) document.getElementById("zoom-in").click();
  await frame();
  body.dataset.zoomed = diagram.dataset.arrowsInView;
  document.getElementById("zoom-reset").click();
  const topic = document.getElementById("topic");
  topic.value = "keep";
  topic.dispatchEvent(new Event("change"));
  await frame();
  body.dataset.interacted = "1";
})();
</script>
"""


def test_hover_zoom_and_the_topic_filter_work_in_the_browser(killed: Drawn, tmp_path: Path) -> None:
    page = (Path(killed.result.run_dir) / "report.html").read_bytes()
    assert page.endswith(b"</body>\n</html>\n")
    copy = tmp_path / "interact.html"
    copy.write_bytes(page.replace(b"</body>\n</html>\n", _INTERACT + b"</body>\n</html>\n"))
    screenshot = ARTIFACTS / "report" / f"controller-killed-mid-deletion-seed-{SEED}-keep.png"
    dom = Drawn(killed.result, killed.trace, elements(render(copy, screenshot, tmp_path / "c")))
    body = dom.body()
    assert body.attrs.get("data-interacted") == "1"
    tip = body.attrs["data-tip"]
    assert tip.startswith("StopReplicaRequest")  # the arrow's type, then its fields
    assert "stops" in tip
    assert '"events"' in tip  # the partitions it stops, from the chaos tap
    assert "answered byStopReplicaResponse" in tip
    # the arrow and its answer drawn thick
    assert sorted(body.attrs["data-paired"].split()) == [
        "StopReplicaRequest",
        "StopReplicaResponse",
    ]
    assert 0 < int(body.attrs["data-zoomed"]) < int(body.attrs["data-before"])
    assert [e.attrs["data-topic"] for e in dom.all("g", "topic-lane")] == ["keep"]
    assert not dom.all("line", "arrow", type="StopReplicaRequest")  # all of them for events
    assert dom.all("line", "arrow", type="LeaderAndIsrRequest")  # keep's creation
    assert body.attrs["data-overflow"] == "none"


FAILING = """\
name: wrong
description: creates one topic, then expects one nobody creates
cluster: {brokers: 2}
steps:
  - create_topic: {topic: made, partitions: 2, replication_factor: 2, outcome: ok}
  - expect: {topic_exists: never, within: 2}
  - sleep: 5
"""
_GO_TO_THE_FAILURE = b"""<script>
document.querySelector("[data-goto]").click();
setTimeout(() => { document.body.dataset.clicked = "1"; }, 100);
</script>
"""


def test_a_problem_s_event_link_brings_the_diagram_to_it(tmp_path: Path) -> None:
    result = run_scenario(parse_scenario(FAILING), RunOptions(run_dir=tmp_path / "run", seed=1))
    assert [p.rule for p in result.problems] == ["expectation"]
    failed_at = result.problems[0].seq
    assert failed_at is not None
    page = (Path(result.run_dir) / "report.html").read_bytes()
    copy = tmp_path / "clicked.html"
    copy.write_bytes(page.replace(b"</body>", _GO_TO_THE_FAILURE + b"</body>"))
    screenshot = ARTIFACTS / "report" / "failed-expectation-link.png"
    dom = elements(render(copy, screenshot, tmp_path / "chromium"))
    body = next(e for e in dom if e.tag == "body")
    assert body.attrs.get("data-clicked") == "1"
    links = [e for e in dom if e.tag == "a" and "data-goto" in e.attrs]
    assert [link.attrs["data-goto"] for link in links] == [str(failed_at)]
    assert [e for e in dom if e.tag == "line" and "focus" in e.classes]  # the event, marked
    hint = next(e for e in dom if e.attrs.get("id") == "diagram-hint").text
    first, last = (int(n) for n in re.findall(r"events (\d+) to (\d+)", hint)[0])
    assert first <= failed_at <= last
    assert last - first <= 300 < result.events  # zoomed in around it


def test_nothing_overflows_a_narrow_window(killed: Drawn, tmp_path: Path) -> None:
    page = Path(killed.result.run_dir) / "report.html"
    screenshot = ARTIFACTS / "report" / f"controller-killed-mid-deletion-seed-{SEED}-narrow.png"
    narrow = Drawn(
        killed.result,
        killed.trace,
        elements(render(page, screenshot, tmp_path / "chromium", width=480)),
    )
    assert narrow.body().attrs["data-overflow"] == "none"
    diagram = next(e for e in narrow.dom if e.attrs.get("id") == "diagram")
    assert int(diagram.attrs["width"]) < 480
    assert len(narrow.all("g", "lane")) == 5


def test_the_same_seed_writes_the_same_page(tmp_path: Path) -> None:
    one = _run(KILLED, 5, tmp_path / "one")
    two = _run(KILLED, 5, tmp_path / "elsewhere" / "two")
    other = _run(KILLED, 6, tmp_path / "other")
    page = (Path(one.run_dir) / "report.html").read_bytes()
    assert page == (Path(two.run_dir) / "report.html").read_bytes()
    assert page != (Path(other.run_dir) / "report.html").read_bytes()
    assert str(tmp_path).encode() not in page
    assert b"http://" not in page.replace(b"http://www.w3.org/2000/svg", b"")
    assert b"https://" not in page


def test_trace_text_cannot_end_the_page_s_script_elements(tmp_path: Path) -> None:
    result = _run(KILLED, 1, tmp_path / "run")
    scenario = load_scenario(KILLED)
    trace = (Path(result.run_dir) / "trace.jsonl").read_bytes()
    hostile = trace + b'{"seq":1,"fields":{"detail":"</script><!--<script>"}}\n'
    page = report_page(scenario, result, hostile)
    # the three script elements of the page, and nothing of the trace, end in </script>
    assert page.count(b"</script>") == 3
    assert b"<!--" not in page
    assert b"\\u003c/script>\\u003c!--\\u003cscript>" in page
