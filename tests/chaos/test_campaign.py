"""``campaign.html``: a campaign of two scenarios over three seeds (one scenario fails on
purpose: it expects a topic nobody creates) writes one page into its output directory;
opened in headless Chromium (offline, from the file) at 1400 and 480 px it shows six
cells coloured by outcome, the failed ones linking to their runs' reports, each
scenario's pass count and histograms, every failure with its reproduce command, no
script error and nothing wider than the page. Written again from the same results it is
the same bytes but for the wall time; a run whose directory is gone is a cell without a
link. Screenshots go to ``artifacts/campaign/``."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from cluster.chaos.campaign import campaign_page, collect, nice_ticks
from cluster.chaos.runner import RunResult
from tests.support.browser import ARTIFACTS, Element, elements, render
from tests.support.chaos_cli import FAILING, PASSING, kemu, write

SEEDS = (1, 2, 3)
WALL = re.compile(rb'<span id="wall-time">[^<]*</span>')


@dataclass(frozen=True)
class Campaign:
    out: Path
    sources: list[str]
    printed: str
    dom: dict[int, list[Element]]  # by window width

    def all(self, width: int, tag: str, cls: str) -> list[Element]:
        return [e for e in self.dom[width] if e.tag == tag and cls in e.classes]

    def body(self, width: int) -> Element:
        return next(e for e in self.dom[width] if e.tag == "body")


def _campaign(tmp_path: Path, sources: list[str], out: Path) -> tuple[int, str]:
    argv = ["chaos", "run", *sources, "--seeds", "1..3", "--deterministic", "--out", str(out)]
    return kemu([*argv, "--quiet"])


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    base = tmp_path_factory.mktemp("campaign")
    sources = [write(base, "tiny.yaml", PASSING), write(base, "wrong.yaml", FAILING)]
    out = base / "out"
    status, printed = _campaign(base, sources, out)
    assert status == 1, printed
    page = out / "campaign.html"
    assert f"campaign: {page}" in printed
    dom = {
        width: elements(
            render(page, ARTIFACTS / "campaign" / f"campaign-{width}.png", base / f"c{width}",
                   width=width)
        )
        for width in (1400, 480)
    }  # fmt: skip
    return Campaign(out, sources, printed, dom)


@pytest.mark.parametrize("width", [1400, 480])
def test_the_page_is_ready_and_nothing_overflows(campaign: Campaign, width: int) -> None:
    body = campaign.body(width)
    assert body.attrs.get("data-ready") == "1"
    assert body.attrs["data-overflow"] == "none"


def test_six_cells_coloured_by_outcome_the_failed_ones_link_to_their_reports(
    campaign: Campaign,
) -> None:
    cells = [e for e in campaign.all(1400, "a", "cell") if "data-seed" in e.attrs]
    sections = campaign.all(1400, "section", "scenario")
    assert [s.attrs["data-scenario"] for s in sections] == ["tiny", "wrong"]
    assert [(e.attrs["data-status"], e.attrs["data-seed"]) for e in cells] == [
        ("passed", "1"), ("passed", "2"), ("passed", "3"),
        ("failed", "1"), ("failed", "2"), ("failed", "3"),
    ]  # fmt: skip
    for cell in cells:
        status = cell.attrs["data-status"]
        assert {"cell", status} <= cell.classes
        report = campaign.out / cell.attrs["href"]
        assert report.is_file()  # every run directory was kept: kemu chaos run keeps them
        summary = json.loads((report.parent / "summary.json").read_text())
        assert (summary["scenario"], summary["seed"], summary["status"]) == (
            "tiny" if status == "passed" else "wrong",
            int(cell.attrs["data-seed"]),
            status,
        )
    counts = campaign.all(1400, "span", "count")
    assert [(c.attrs["data-passed"], c.attrs["data-runs"], c.text) for c in counts] == [
        ("3", "3", "3/3 passed"),
        ("0", "3", "0/3 passed"),
    ]


def test_the_summary_and_every_failure_with_its_reproduce_command(campaign: Campaign) -> None:
    by_id = {e.attrs["id"]: e.text for e in campaign.dom[1400] if "id" in e.attrs}
    assert (by_id["runs"], by_id["passed"], by_id["failed"]) == ("6", "3", "3")
    assert by_id["seeds"] == "1..3"
    assert re.fullmatch(r"\d+\.\d s|\d+ min \d+ s", by_id["wall-time"])
    failures = campaign.all(1400, "li", "failure")
    assert [(f.attrs["data-scenario"], f.attrs["data-seed"]) for f in failures] == [
        ("wrong", "1"), ("wrong", "2"), ("wrong", "3"),
    ]  # fmt: skip
    commands = [e.text for e in campaign.all(1400, "code", "reproduce")]
    for seed, (failure, command) in enumerate(zip(failures, commands, strict=True), 1):
        summary = json.loads((campaign.out / "wrong" / f"seed-{seed}" / "summary.json").read_text())
        assert command == summary["reproduce"]
        assert f"--seed {seed} --deterministic" in command
        assert "expect topic_exists never within 2s" in failure.text


def test_each_scenario_has_histograms_of_run_lengths_and_events(campaign: Campaign) -> None:
    charts = campaign.all(1400, "svg", "hist")
    assert [c.attrs["data-chart"] for c in charts] == ["simulated", "events"] * 2
    dom = campaign.dom[1400]
    # the charts' bars, in document order, hold the three runs of each chart
    bars = [e for e in dom if e.tag == "rect" and "bar" in e.classes]
    assert sum(int(b.attrs["data-count"]) for b in bars) == 3 * len(charts)
    labels = [e.text for e in dom if e.tag == "text" and "unit" in e.classes]
    assert labels.count("run length, simulated (s)") == 2
    assert labels.count("trace (events)") == 2
    wrong = json.loads((campaign.out / "wrong" / "seed-1" / "summary.json").read_text())
    x_ticks = [float(e.text.replace(",", "")) for e in dom if e.tag == "text" and "x" in e.classes]
    # the failing runs all stop at their 2 s expectation's deadline: a tick below and
    # one above it
    assert any(t <= wrong["simulated_seconds"] for t in x_ticks)
    assert any(t > wrong["simulated_seconds"] for t in x_ticks)


def test_the_same_results_give_the_same_page_but_the_wall_time(
    campaign: Campaign, tmp_path: Path
) -> None:
    first = (campaign.out / "campaign.html").read_bytes()
    status, _ = _campaign(tmp_path, campaign.sources, campaign.out)  # the same runs again
    assert status == 1
    again = (campaign.out / "campaign.html").read_bytes()
    assert WALL.sub(b"", again) == WALL.sub(b"", first)
    assert len(WALL.findall(first)) == 1


def test_a_run_whose_directory_is_gone_is_a_cell_without_a_link(
    campaign: Campaign, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    shutil.copytree(campaign.out, out)
    sources = [str(Path(s)) for s in campaign.sources]
    # summaries name the original directory: the copy's results, pointed at the copy
    results = [
        msgspec.structs.replace(r, run_dir=r.run_dir.replace(str(campaign.out), str(out)))
        for r in collect(out, sources, range(1, 4))
    ]
    assert [(r.scenario, r.seed) for r in results] == [
        (name, seed) for name in ("tiny", "wrong") for seed in SEEDS
    ]
    shutil.rmtree(out / "tiny" / "seed-2")
    dom = elements(campaign_page(results, out, 1.0).decode())
    kept = [e for e in dom if e.tag == "a" and "cell" in e.classes]
    gone = [e for e in dom if e.tag == "span" and e.attrs.get("data-kept") == "0"]
    assert [(e.attrs["data-status"], e.attrs["data-seed"]) for e in gone] == [("passed", "2")]
    assert "not kept" in gone[0].attrs["title"]
    assert len(kept) == 5


def test_a_seed_without_a_result_is_a_missing_cell() -> None:
    results = [
        RunResult(scenario="a", source="a.yaml", seed=1, mode="deterministic"),
        RunResult(scenario="b", source="b.yaml", seed=2, mode="deterministic", status="error",
                  error="could not start", reproduce="kemu chaos run b.yaml --seed 2"),
    ]  # fmt: skip
    dom = elements(campaign_page(results, Path("nowhere"), 0.0).decode())
    cells = [(e.attrs["class"], e.attrs["data-seed"]) for e in dom if "cell" in e.classes
             and "data-seed" in e.attrs]  # fmt: skip
    assert cells == [
        ("cell passed", "1"), ("cell missing", "2"), ("cell missing", "1"), ("cell error", "2"),
    ]  # fmt: skip
    by_id = {e.attrs["id"]: e.text for e in dom if "id" in e.attrs}
    assert (by_id["runs"], by_id["passed"], by_id["failed"]) == ("4", "1", "1 (1 error(s))")


@pytest.mark.parametrize(
    ("low", "high", "integer", "ticks"),
    [
        (0.0, 1.0, False, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (2.0, 2.0, False, [1.8, 1.9, 2.0, 2.1, 2.2]),
        (0.0, 0.0, False, [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
        (212.0, 212.0, True, [211.0, 212.0, 213.0]),
        (385.0, 1393.0, True, [200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0, 1400.0]),
        (0.0, 3.0, True, [0.0, 1.0, 2.0, 3.0]),
    ],
)
def test_ticks_are_round_and_cover_the_values(
    low: float, high: float, integer: bool, ticks: list[float]
) -> None:
    assert nice_ticks(low, high, integer=integer) == ticks


def test_long_runs_and_large_event_counts_fit_their_axes(tmp_path: Path) -> None:
    """Five-digit event counts and runs of thousands of seconds: every tick label stays
    inside its chart at 480 px."""
    results = [
        RunResult(scenario="long-" + "x" * 60, source="l.yaml", seed=seed,
                  mode="deterministic", events=9_400 + 1_013 * seed,
                  simulated_seconds=1_000.0 + 2_170.5 * seed)
        for seed in range(1, 9)
    ]  # fmt: skip
    page = tmp_path / "campaign.html"
    page.write_bytes(campaign_page(results, tmp_path, 3_725.0))
    screenshot = ARTIFACTS / "campaign" / "long-runs-480.png"
    dom = elements(render(page, screenshot, tmp_path / "chromium", width=480))
    body = next(e for e in dom if e.tag == "body")
    assert body.attrs["data-overflow"] == "none"
    x_ticks = [e.text for e in dom if e.tag == "text" and "x" in e.classes]
    assert "18,000" in x_ticks  # the last tick above the largest count, 17,504
    assert next(e.text for e in dom if e.attrs.get("id") == "wall-time") == "1 h 2 min"
