"""A run for people to look at: ``report.html``.

One self-contained page beside ``timeline.txt``: the page's script and style
(``report.js``, ``report.css``, package resources of ``cluster.chaos``, after the
message-sequence diagram that ``diff.html`` draws too: ``sequence.js`` and
``sequence.css`` of ``protocol.pages``) are written inline, and so is the run's trace, so the
file opens from disk with no network. The script draws, in the browser, a
message-sequence diagram of the run (one lane per broker, the store and the chaos
driver; requests and answers as arrows; faults as shaded spans; elections, session
expiries and crashes as marks; each topic's partition states) and time series with the
faults shaded (docs/chaos.md, "The report").

Python only puts the page together: the trace's bytes go in as they are (each ``<``
escaped, which only JSON strings hold), with a few facts about the run that the trace
does not carry (the scenario, its steps, the outcome). The page holds nothing of the
wall clock or of where it was written, so a deterministic run's page is byte-identical
for the same scenario and seed; and writing it costs a copy of the trace, not a pass
over its events.
"""

from __future__ import annotations

import functools
import html
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from cluster.chaos.model import Scenario
from cluster.chaos.timeline import step_label
from protocol.pages import asset, script_text

if TYPE_CHECKING:
    from cluster.chaos.runner import RunResult

__all__ = ["REPORT_FILE", "report_page", "write_report"]

REPORT_FILE = "report.html"


@functools.cache
def _asset(name: str) -> bytes:
    return (resources.files("cluster.chaos") / name).read_bytes()


def _run_facts(scenario: Scenario, result: RunResult) -> dict[str, Any]:
    """What the page shows besides the trace; nothing of the wall clock or the run's
    directory (the page of a deterministic run must not change with them)."""
    return {
        "scenario": scenario.name,
        "description": scenario.description.strip(),
        "seed": result.seed,
        "mode": result.mode,
        "store": result.store,
        "processes": result.processes,
        "brokers": scenario.cluster.brokers,
        "status": result.status,
        "error": result.error,
        "events": result.events,
        "simulated_seconds": result.simulated_seconds,
        "steps": [step_label(index, step) for index, step in enumerate(scenario.steps)],
        "violations": result.violations,
        "failures": result.failures,
        "notices": result.notices,
    }


def report_page(scenario: Scenario, result: RunResult, trace: bytes) -> bytes:
    """The page of a run whose trace file holds ``trace``."""
    facts = msgspec.json.encode(_run_facts(scenario, result))
    title = f"{scenario.name} seed {result.seed}: {result.status}"
    return b"".join(
        [
            b'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            b'<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            b"<title>kemu chaos: ",
            html.escape(title).encode(),
            b"</title>\n<style>\n",
            asset("sequence.css"),
            _asset("report.css"),
            b"</style>\n</head>\n<body>\n",
            b'<script type="application/json" id="run-facts">',
            script_text(facts),
            b'</script>\n<script type="application/x-ndjson" id="run-trace">\n',
            script_text(trace),
            b"</script>\n<script>\n",
            asset("sequence.js"),
            _asset("report.js"),
            b"</script>\n</body>\n</html>\n",
        ]
    )


def write_report(run_dir: Path, scenario: Scenario, result: RunResult) -> None:
    """Write ``report.html`` into ``run_dir`` from its ``trace.jsonl``."""
    trace = (run_dir / "trace.jsonl").read_bytes()
    (run_dir / REPORT_FILE).write_bytes(report_page(scenario, result, trace))
