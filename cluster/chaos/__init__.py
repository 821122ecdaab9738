"""Scripted chaos: scenarios (YAML or Python), faults, invariants, deterministic replays.

``load_scenario`` reads a scenario file, ``run_scenario`` runs it with a seed (on the
virtual clock in deterministic mode) into a run directory, and the invariant rules of
``actors.invariants`` check its trace and end state. ``kemu chaos run`` is the
command line (``cluster.cli.chaos``); docs/chaos.md is the reference.
"""

from __future__ import annotations

from actors.invariants import FinalState, Violation, check_final, check_trace
from cluster.chaos.loader import ScenarioError, check_scenario, load_scenario, parse_scenario
from cluster.chaos.model import Pattern, Scenario
from cluster.chaos.runner import RunOptions, RunResult, run_scenario

__all__ = [
    "FinalState",
    "Pattern",
    "RunOptions",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "Violation",
    "check_final",
    "check_scenario",
    "check_trace",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
]
