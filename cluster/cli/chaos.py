"""``kemu chaos``: run scenario files over seeds, or check them.

``kemu chaos run SCENARIO... [--seed N | --seeds A..B] [--deterministic]
[--check-determinism] [--out DIR] [--verbose] [--quiet]`` runs every scenario with every
seed, one run directory each (``OUT/<scenario>/seed-<N>``), prints one line per run and,
for a failed run, its problems and the command that reproduces it; the exit status is 1 if
any run failed; for more than one run, ``OUT/campaign.html`` shows them all
(``cluster.chaos.campaign``). When stderr is a terminal, a progress line there counts
the runs done, the failures so far, the rate and the time left
(``cluster.cli.progress``); ``--quiet`` leaves it out. ``--check-determinism`` runs each
one twice and compares the traces byte for byte. ``kemu chaos check SCENARIO...`` only
validates the files. Bad input is an ``Error:`` line and exit status 2: a bad seed
range, or each problem of each scenario file (``FILE:LINE: ...``, all of them at once).
``kemu chaos schema`` prints the JSON Schema of a scenario with its shorthand expanded.

Real mode: ``--zookeeper [HOST:PORT[/chroot]]`` runs on a real ZooKeeper (a fresh chroot
per run; without an address, or for a scenario that says ``store: zookeeper``, a
throwaway local server is started for the whole command), ``--processes`` with one OS
process per broker (``cluster.launch.processes``). Both need the real clock: with
``--deterministic`` they are bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

import msgspec

from actors.runtime.code_identity import code_identity, different_code
from cluster.chaos.campaign import CAMPAIGN_FILE, write_campaign
from cluster.chaos.loader import ScenarioError, load_scenario, scenario_schema
from cluster.chaos.model import Scenario
from cluster.chaos.report import REPORT_FILE
from cluster.chaos.runner import RunOptions, RunResult, reproduce_command, run_scenario
from cluster.cli.progress import RunProgress, run_progress, spark_stage_progress
from protocol.errors import KemuError

__all__ = ["campaign_main", "chaos_main", "parse_seeds"]

DEFAULT_OUT = Path(".kemu/chaos")
DEFAULT_CAMPAIGN_OUT = Path(".kemu/chaos-campaign")
SHOWN_PROBLEMS = 10


class _InputError(Exception):
    """Bad command-line input: one line, exit status 2."""


def parse_seeds(seed: int | None, seeds: str | None) -> list[int]:
    """``--seed N`` or ``--seeds A..B`` (inclusive); seed 0 by default."""
    if seeds is None:
        return [0 if seed is None else seed]
    first, sep, last = seeds.partition("..")
    try:
        low, high = int(first), int(last)
    except ValueError:
        low = high = -1
    if not sep or low < 0 or high < low:
        raise _InputError(f"--seeds must be A..B with 0 <= A <= B, not {seeds!r}")
    return list(range(low, high + 1))


def chaos_main(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if args.chaos_command == "schema":
        out.write(json.dumps(scenario_schema(), indent=2) + "\n")
        return 0
    if args.chaos_command == "campaign":
        return campaign_main(args, out)
    deterministic = getattr(args, "deterministic", False) or getattr(
        args, "check_determinism", False
    )
    try:
        scenarios = _load(args.scenarios, _overrides(args))
        if args.chaos_command == "check":
            for path, scenario in scenarios:
                out.write(f"{path}: {scenario.name}: {len(scenario.steps)} steps, valid\n")
            return 0
        seeds = parse_seeds(args.seed, args.seeds)
        if deterministic:
            _refuse_real(scenarios)
    except ScenarioError as exc:
        for problem in exc.problems:  # every problem of every file, one line each
            print(f"Error: {problem}", file=sys.stderr)
        return 2
    except _InputError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    needs_zookeeper = any(s.cluster.store == "zookeeper" for _, s in scenarios)
    with contextlib.ExitStack() as stack:
        zookeeper = getattr(args, "zookeeper", None) or None
        if needs_zookeeper and zookeeper is None:
            try:
                zookeeper = stack.enter_context(_local_zookeeper())
            except RuntimeError as exc:
                print(f"Error: could not start a local ZooKeeper: {exc}", file=sys.stderr)
                return 1
            local = True
        else:
            local = False
        return _run_all(
            args,
            out,
            scenarios,
            seeds,
            deterministic=deterministic,
            zookeeper=zookeeper if needs_zookeeper else None,
            local_zookeeper=local,
        )


def campaign_main(args: argparse.Namespace, out: TextIO) -> int:
    """``kemu chaos campaign``: every (scenario, seed) run on Spark's executors
    (``cluster.chaos.spark_campaign``); prints each scenario's pass count, every run that
    did not pass with the command that reproduces it, the totals, and where
    ``campaign.html`` is. While the job runs, its stage (a task is a batch of runs: tasks
    done of all, failed tasks, the time left) is drawn as a bar on a terminal stderr
    (``cluster.cli.progress.spark_stage_progress``); ``--quiet`` leaves it out. Exit
    status 1 if a run did not pass (or Spark failed), 2 for bad input."""
    from cluster.chaos.spark_campaign import check_master, check_out_dir, out_dir, run_on_spark

    try:
        scenarios = _load(args.scenarios, {})
        seeds = parse_seeds(None, args.seeds)
        _refuse_real(scenarios)
    except ScenarioError as exc:
        for problem in exc.problems:
            print(f"Error: {problem}", file=sys.stderr)
        return 2
    except _InputError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    root = out_dir(args.out) if args.out else DEFAULT_CAMPAIGN_OUT
    check_master(args.master)
    check_out_dir(root)
    # The page is this campaign's once its job is done; until then there is none (an
    # earlier campaign's page would name runs this one replaces).
    (root / CAMPAIGN_FILE).unlink(missing_ok=True)
    texts = [(path, Path(path).read_text(encoding="utf-8")) for path, _ in scenarios]
    started = time.perf_counter()
    results, _ = run_on_spark(
        texts,
        seeds,
        root,
        master=args.master,
        conf=args.spark_conf,
        log_level=getattr(args, "log_level", None),
        log_json=getattr(args, "log_format", "console") == "json",
        stages=functools.partial(spark_stage_progress, quiet=getattr(args, "quiet", False)),
    )
    _summarise(out, [s.name for _, s in scenarios], results)
    page = write_campaign(root, results, time.perf_counter() - started)
    out.write(f"campaign: {page}\n")
    return 0 if all(r.status == "passed" for r in results) else 1


def _summarise(out: TextIO, names: Sequence[str], results: Sequence[RunResult]) -> None:
    """Each scenario's pass count, then every run that did not pass, then the totals."""
    for name in names:
        runs = [r for r in results if r.scenario == name]
        passed = sum(1 for r in runs if r.status == "passed")
        mark = "" if passed == len(runs) else "  FAILED"
        out.write(f"{name:<48} {passed:4d}/{len(runs)} passed{mark}\n")
    bad = [r for r in results if r.status != "passed"]
    if bad:
        out.write("\nfailed runs:\n")
        for result in bad:
            out.write(f"{result.scenario} seed={result.seed}: ")
            _report(out, result, None)
    simulated = sum(r.simulated_seconds for r in results)
    out.write(
        f"\n{len(names)} scenario(s), {len(results)} run(s): {len(results) - len(bad)} passed,"
        f" {len(bad)} failed; {simulated:.0f}s simulated\n"
    )


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    """The set-up entries ``--processes`` and ``--zookeeper`` override."""
    overrides: dict[str, str] = {}
    if getattr(args, "processes", False):
        overrides["mode"] = "processes"
    if getattr(args, "zookeeper", None) is not None:
        overrides["store"] = "zookeeper"
    return overrides


def _refuse_real(scenarios: Sequence[tuple[str, Scenario]]) -> None:
    for path, scenario in scenarios:
        setup = scenario.cluster
        if (setup.store, setup.mode) != ("embedded", "in-process"):
            raise _InputError(
                f"{path}: deterministic mode runs in one process on the embedded store, and"
                f" this run is store: {setup.store}, mode: {setup.mode} (drop --deterministic)"
            )


@contextlib.contextmanager
def _local_zookeeper() -> Iterator[str]:
    """A throwaway local ZooKeeper for the whole command (``cluster.launch.zookeeper_server``)."""
    from cluster.launch.zookeeper_server import ZooKeeperServer

    with ZooKeeperServer() as server:
        yield server.hosts


def _run_all(
    args: argparse.Namespace,
    out: TextIO,
    scenarios: Sequence[tuple[str, Scenario]],
    seeds: Sequence[int],
    *,
    deterministic: bool,
    zookeeper: str | None,
    local_zookeeper: bool,
) -> int:
    total = len(scenarios) * len(seeds)
    started = time.perf_counter()
    with run_progress(total, label="chaos", quiet=args.quiet) as progress:
        results = _run_each(
            args,
            progress.wrap(out),
            scenarios,
            seeds,
            progress,
            deterministic=deterministic,
            zookeeper=zookeeper,
            local_zookeeper=local_zookeeper,
        )
    failed = sum(1 for r in results if r.status != "passed")
    out.write(f"{total} run(s): {total - failed} passed, {failed} failed\n")
    if total > 1:
        root = Path(args.out) if args.out else DEFAULT_OUT
        page = write_campaign(root, results, time.perf_counter() - started)
        out.write(f"campaign: {page}\n")
    return 1 if failed else 0


def _run_each(
    args: argparse.Namespace,
    out: TextIO,
    scenarios: Sequence[tuple[str, Scenario]],
    seeds: Sequence[int],
    progress: RunProgress,
    *,
    deterministic: bool,
    zookeeper: str | None,
    local_zookeeper: bool,
) -> list[RunResult]:
    """Every run, one line each on ``out``; returns their results (a run that could not
    be done, or whose replay differs, is an ``error`` or ``failed`` result)."""
    root = Path(args.out) if args.out else DEFAULT_OUT
    total = len(scenarios) * len(seeds)
    results: list[RunResult] = []
    count = 0
    for path, scenario in scenarios:
        for seed in seeds:
            count += 1
            out.write(f"[{count}/{total}] {scenario.name} seed={seed} ... ")
            out.flush()
            options = RunOptions(
                run_dir=root / scenario.name / f"seed-{seed}",
                seed=seed,
                deterministic=deterministic,
                source=path,
                out=Path(args.out) if args.out else None,
                progress=_progress(out) if args.verbose else None,
                zookeeper=zookeeper if scenario.cluster.store == "zookeeper" else None,
                local_zookeeper=local_zookeeper,
                processes=scenario.cluster.mode == "processes",
            )
            try:
                result = run_scenario(scenario, options)
                mismatch = _replay(scenario, options, result) if args.check_determinism else None
            except KemuError as exc:
                out.write(f"error\n  {exc}\n")
                results.append(_not_run(scenario, options, str(exc)))
                progress.advance(failed=True)
                continue
            ok = result.status == "passed" and mismatch is None
            results.append(
                result
                if mismatch is None
                else msgspec.structs.replace(result, status="failed", error=mismatch)
            )
            if args.verbose:
                out.write("\n  => ")
            _report(out, result, mismatch)
            progress.advance(failed=not ok)
    return results


def _not_run(scenario: Scenario, options: RunOptions, error: str) -> RunResult:
    """The result of a run that could not be done (for the campaign page)."""
    return RunResult(
        scenario=scenario.name,
        source=options.source,
        seed=options.seed,
        mode="deterministic" if options.deterministic else "real",
        status="error",
        error=error,
        run_dir=str(options.run_dir),
        code=code_identity(),
        reproduce=reproduce_command(
            options.source,
            options.seed,
            options.deterministic,
            options.out,
            processes=options.processes,
        ),
    )


def _load(paths: Sequence[str], overrides: Mapping[str, str]) -> list[tuple[str, Scenario]]:
    """Every file loaded; ``ScenarioError`` with the problems of all of them, if any."""
    loaded: list[tuple[str, Scenario]] = []
    names: dict[str, str] = {}
    problems: list[str] = []
    for path in paths:
        try:
            scenario = load_scenario(path, cluster=overrides)
        except ScenarioError as exc:
            problems.extend(exc.problems)
            continue
        if scenario.name in names:
            raise _InputError(
                f"{path} and {names[scenario.name]} both name scenario {scenario.name!r}"
            )
        names[scenario.name] = path
        loaded.append((path, scenario))
    if problems:
        raise ScenarioError(*problems)
    return loaded


def _progress(out: TextIO) -> Callable[[str], None]:
    def say(line: str) -> None:
        out.write(f"\n    {line}")
        out.flush()

    return say


def _replay(scenario: Scenario, options: RunOptions, first: RunResult) -> str | None:
    """Run again into a sibling directory; None if the trace is the same, byte for byte,
    else where it first differs, and which code made each run if not the same code. The
    replay's directory goes when they agree."""
    replay_dir = options.run_dir.with_name(options.run_dir.name + ".replay")
    replay = run_scenario(
        scenario,
        RunOptions(
            run_dir=replay_dir,
            seed=options.seed,
            deterministic=True,
            source=options.source,
            out=options.out,
        ),
    )
    if replay.trace_sha256 == first.trace_sha256:
        shutil.rmtree(replay_dir)
        return None
    a = (options.run_dir / "trace.jsonl").read_bytes().splitlines()
    b = (replay_dir / "trace.jsonl").read_bytes().splitlines()
    line = next((i for i, (x, y) in enumerate(zip(a, b, strict=False), 1) if x != y), None)
    if line is None:
        line = min(len(a), len(b)) + 1
    differs = f"the replay's trace differs from line {line} (kept in {replay_dir})"
    code = different_code(first.code, replay.code)
    return differs if code is None else f"{differs}; {code}"


def _report(out: TextIO, result: RunResult, mismatch: str | None) -> None:
    ratio = result.simulated_seconds / result.wall_seconds if result.wall_seconds else 0.0
    numbers = (
        f"{result.events} events, {result.simulated_seconds:.1f}s simulated in "
        f"{result.wall_seconds:.2f}s"
    )
    if result.mode == "deterministic":
        numbers += f" ({ratio:.0f}:1)"
    status = result.status if mismatch is None else "not deterministic"
    out.write(f"{status} ({numbers})\n")
    if result.error:
        out.write(f"  error: {result.error}\n")
    problems = result.problems
    for problem in problems[:SHOWN_PROBLEMS]:
        out.write(f"  {problem.line()}\n")
    if len(problems) > SHOWN_PROBLEMS:
        out.write(f"  ... and {len(problems) - SHOWN_PROBLEMS} more (invariants.json)\n")
    if mismatch is not None:
        out.write(f"  {mismatch}\n")
    if status != "passed":
        out.write(f"  run directory: {result.run_dir}\n")
        out.write(f"  report: {Path(result.run_dir) / REPORT_FILE}\n")
        out.write(f"  reproduce: {result.reproduce}\n")
