"""``python -m cluster.fuzz``: fuzz kemu's socket readers (docs/fuzzing.md).

    python -m cluster.fuzz [--inputs N] [--targets kafka,internal,store,control,metrics]
                           [--seed S] [--crash-dir DIR] [--workdir DIR] [--keep-going]
    python -m cluster.fuzz --replay DIR

Exit status 0 when no target crashed, 1 when one did (its reproducer's directory and the
command that replays it are printed), 2 for bad arguments."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from pathlib import Path

from cluster.fuzz.campaign import TargetReport, replay, run_target
from cluster.fuzz.targets import TARGETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cluster.fuzz", description=__doc__)
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per target")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    parser.add_argument("--batch", type=int, default=100, help="inputs between probes")
    parser.add_argument("--crash-dir", type=Path, default=Path("fuzz-crashes"))
    parser.add_argument("--workdir", type=Path, default=None, help="servers' dirs (default: temp)")
    parser.add_argument(
        "--keep-going", action="store_true", help="after a crash, restart the server, go on"
    )
    parser.add_argument("--replay", type=Path, default=None, help="a reproducer directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # so that the servers are stopped on the way out
    names = [n for n in args.targets.split(",") if n]
    unknown = sorted(set(names) - set(TARGETS))
    if unknown or args.inputs < 1 or args.batch < 1:
        what = f"unknown target {unknown[0]!r}" if unknown else "--inputs and --batch must be >= 1"
        print(f"fuzz: {what} (targets: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kemu-fuzz-") as temporary:
        workdir = args.workdir or Path(temporary)
        if args.replay is not None:
            return _replay(args.replay, workdir)
        reports: list[TargetReport] = []
        for name in names:
            try:
                report = run_target(
                    TARGETS[name],
                    workdir,
                    inputs=args.inputs,
                    seed=args.seed,
                    batch=args.batch,
                    crash_dir=args.crash_dir,
                    keep_going=args.keep_going,
                    progress=lambda r: print(f"  ... {r.line()}", flush=True),
                )
            except RuntimeError as exc:  # kemu up did not start
                print(f"fuzz: {name}: {str(exc).splitlines()[0]}", file=sys.stderr)
                return 1
            reports.append(report)
            if report.interrupted:
                break
    for report in reports:
        print(report.line())
    for report in reports:
        _print_failure(report)
    return 1 if any(r.failure for r in reports) else 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _print_failure(report: TargetReport) -> None:
    for slow in report.slow:
        print(f"{report.target}: an exchange timed out; its input: {slow}/crash.json")
    for failure, reproducer in zip(report.failures, report.reproducers, strict=True):
        print(f"{report.target}: CRASH: {failure}")
        print(f"  reproducer: {reproducer}")
        print(f"  replay: scripts/fuzz.sh --replay {reproducer}")


def _replay(reproducer: Path, workdir: Path) -> int:
    name = json.loads((reproducer / "crash.json").read_text())["target"]
    result = replay(TARGETS[name], reproducer, workdir)
    if result.failed_at is None:
        print(f"{name}: the {result.inputs} saved inputs did not make the server fail")
        return 0
    print(f"{name}: input {result.failed_at} of {result.inputs}: {result.problem}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
