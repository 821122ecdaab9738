"""A fuzz campaign: per target, a fresh server, ``inputs`` hypothesis-generated inputs
(each written on a connection of its own, see ``cluster.fuzz.targets``), a liveness probe
after every ``batch`` inputs (and at once when the server's process is gone), the RSS of
the server's process at the start and the end. The first failure stops the target: its
batch of inputs is saved with the server's output, and ``replay`` runs them again on a
fresh server to say which one does it."""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from cluster.fuzz.servers import Endpoints, KemuServer, rss_bytes
from cluster.fuzz.targets import Finding, ProbeFailed, Target

DEFAULT_BATCH: Final = 100
ROUND: Final = 2_000
"""Inputs per hypothesis run. Hypothesis remembers every input of a run (to avoid
repeating one), about 20 KiB each here, so a campaign is a series of runs of this many
inputs, the run ``r`` of seed ``s`` seeded with ``s * 1_000_003 + r``: the fuzzer's own
memory stays bounded and every run replays from its seed."""


class Crashed(Exception):
    """The server died, stopped answering the probe, or misbehaved; the reproducer is
    saved."""


@dataclass
class TargetReport:
    """What one target's run measured. With ``keep_going`` a crash restarts the server;
    the RSS figures are then those of the last server, over its ``last_server_inputs``."""

    target: str
    inputs: int = 0
    seconds: float = 0.0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    reproducers: list[Path] = field(default_factory=list)
    slow: list[Path] = field(default_factory=list)
    """Each input whose exchange timed out, saved alone (``crash.json`` format) for a look:
    a timeout is not a failure by itself, but it is the input to read first."""
    interrupted: bool = False  # stopped by the user (SIGINT, SIGTERM) before the end
    rss_start: int = 0
    rss_end: int = 0
    last_server_inputs: int = 0

    @property
    def failure(self) -> str | None:
        return self.failures[0] if self.failures else None

    @property
    def reproducer(self) -> Path | None:
        return self.reproducers[0] if self.reproducers else None

    @property
    def rate(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0

    @property
    def crashes(self) -> int:
        return len(self.failures)

    def line(self) -> str:
        mib = 1024 * 1024
        outcomes = " ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items()))
        restarted = (
            f" (last server: {self.last_server_inputs} inputs)"
            if self.last_server_inputs != self.inputs
            else ""
        )
        return (
            f"{self.target:<9} {self.inputs:>8} inputs {self.seconds:>8.1f} s "
            f"{self.rate:>7.0f}/s  crashes={self.crashes}  "
            f"rss {self.rss_start / mib:.1f} -> {self.rss_end / mib:.1f} MiB "
            f"({(self.rss_end - self.rss_start) / mib:+.1f}){restarted}  [{outcomes}]"
            + ("  (interrupted)" if self.interrupted else "")
        )


class _Server:
    """The server of a run, replaced after a crash when the run keeps going."""

    def __init__(self, target: Target, workdir: Path) -> None:
        self.server = KemuServer(workdir, target.name, processes=target.processes)
        self.endpoints = self.server.start()
        self.pid = target.pid(self.endpoints)


def run_target(
    target: Target,
    workdir: Path,
    *,
    inputs: int,
    seed: int,
    batch: int = DEFAULT_BATCH,
    crash_dir: Path,
    keep_going: bool = False,
    progress: Callable[[TargetReport], None] | None = None,
) -> TargetReport:
    """Fuzz one target on a fresh ``kemu up`` under ``workdir``. The first crash ends
    the run, unless ``keep_going``: then the server is replaced and the run goes on."""
    report = TargetReport(target.name)
    live = _Server(target, workdir)
    recent: collections.deque[object] = collections.deque(maxlen=batch)
    failed: list[Crashed] = []
    report.rss_start = rss_bytes(live.pid)
    started = time.monotonic()

    def check(why: str | None) -> None:
        gone = live.server.exit_status(live.pid)
        problem = why
        if gone is not None:
            problem = f"the server's process {gone}"
        elif problem is None:
            try:
                target.probe(live.endpoints)
            except ProbeFailed as exc:
                problem = str(exc)
        if problem is not None:
            report.failures.append(problem)
            report.reproducers.append(
                _save(crash_dir, target, seed, list(recent), problem, live.server)
            )
            failed.append(Crashed(problem))
            raise failed[-1]

    strategy = target.inputs(live.endpoints)

    def run(count: int, round_seed: int) -> None:
        @settings(
            max_examples=count,
            database=None,
            deadline=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
        )
        @given(strategy)
        def one(case: object) -> None:
            if failed:  # hypothesis replays the failing input: the server is gone already
                raise failed[-1]
            recent.append(case)
            try:
                outcome = target.exchange(live.endpoints, case).value
            except Finding as exc:
                check(str(exc))
            except OSError as exc:  # refused, reset during the handshake: look closer
                outcome = f"error:{type(exc).__name__}"
            report.inputs += 1
            report.last_server_inputs += 1
            report.outcomes[outcome] += 1
            if outcome == "timed_out":
                report.slow.append(
                    _save(crash_dir, target, seed, [case], "timed_out", live.server, "slow")
                )
            if report.inputs % batch == 0 or outcome.startswith("error") or outcome == "timed_out":
                check(None)
                report.seconds = time.monotonic() - started
                report.rss_end = rss_bytes(live.pid)
                if progress is not None and report.inputs % (batch * 50) == 0:
                    progress(report)
            elif live.server.exit_status(live.pid) is not None:
                check(None)

        hypothesis_seed(round_seed)(one)()

    number = 0
    try:
        while report.inputs < inputs:
            before = report.inputs
            try:
                run(min(ROUND, inputs - report.inputs), seed * 1_000_003 + number)
            except Crashed:
                if not keep_going:
                    break
                live.server.kill()  # hung or half dead: a graceful stop would only wait
                live = _Server(target, workdir)
                failed.clear()
                recent.clear()
                report.rss_start, report.last_server_inputs = rss_bytes(live.pid), 0
            number += 1
            if report.inputs == before and not failed:  # hypothesis found nothing new
                break
        else:
            check(None)
    except Crashed:
        pass
    except KeyboardInterrupt:
        report.interrupted = True
    except Exception as exc:  # the fuzzer's own bug, or a server's answer it cannot read
        report.failures.append(f"the fuzzer failed: {exc!r}")
        report.reproducers.append(
            _save(crash_dir, target, seed, list(recent), report.failures[-1], live.server)
        )
    finally:
        report.seconds = time.monotonic() - started
        report.rss_end = rss_bytes(live.pid)
        if failed:  # the server crashed or hangs: its output is saved, nothing to stop
            live.server.kill()
        else:
            live.server.stop()
    return report


def _save(
    crash_dir: Path,
    target: Target,
    seed: int,
    cases: list[object],
    problem: str,
    server: KemuServer,
    kind: str = "crash",
) -> Path:
    """The batch that ended in ``problem``, as ``crash.json``, with the server's output
    (``kind`` "slow": one input whose exchange timed out)."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    suffix = "" if kind == "crash" else f"-{kind}-{time.monotonic_ns()}"
    where = crash_dir / f"{target.name}-seed{seed}-{stamp}{suffix}"
    where.mkdir(parents=True, exist_ok=True)
    record = {
        "target": target.name,
        "seed": seed,
        "problem": problem,
        "cases": [target.encode_case(case) for case in cases],
    }
    (where / "crash.json").write_text(json.dumps(record, indent=1) + "\n")
    (where / "server-output.txt").write_text(server.output()[-200_000:])
    return where


@dataclass(frozen=True)
class Replay:
    """What replaying a saved batch showed: the index of the first input after which the
    server failed (None: it did not fail again) and how."""

    failed_at: int | None
    problem: str | None
    inputs: int


def replay(target: Target, reproducer: Path, workdir: Path) -> Replay:
    """Run a saved batch again, in order, on a fresh server, probing after every input."""
    record = json.loads((reproducer / "crash.json").read_text())
    cases = [target.decode_case(case) for case in record["cases"]]
    server = KemuServer(workdir, f"replay-{target.name}", processes=target.processes)
    endpoints = server.start()
    try:
        for index, case in enumerate(cases):
            problem = _one_replayed(target, server, endpoints, case)
            if problem is not None:
                return Replay(index, problem, len(cases))
        return Replay(None, None, len(cases))
    finally:
        server.stop()


def _one_replayed(
    target: Target, server: KemuServer, endpoints: Endpoints, case: object
) -> str | None:
    try:
        target.exchange(endpoints, case)
    except Finding as exc:
        return str(exc)
    except OSError:
        pass
    gone = server.exit_status(target.pid(endpoints))
    if gone is not None:
        return f"the server's process {gone}"
    try:
        target.probe(endpoints)
    except ProbeFailed as exc:
        return str(exc)
    return None
