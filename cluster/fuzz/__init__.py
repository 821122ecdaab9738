"""A fuzzer of everything in kemu that reads bytes from a socket: the Kafka listener, the
internal TCP transport of broker processes, the store server, the control endpoint and the
Prometheus endpoint of ``kemu up``, each a real server in a child process (docs/fuzzing.md).
``python -m cluster.fuzz`` runs it; ``scripts/fuzz.sh`` wraps that."""

from cluster.fuzz.campaign import Replay, TargetReport, replay, run_target
from cluster.fuzz.servers import Endpoints, KemuServer, rss_bytes
from cluster.fuzz.targets import TARGETS, Finding, Outcome, ProbeFailed, Target

__all__ = [
    "TARGETS",
    "Endpoints",
    "Finding",
    "KemuServer",
    "Outcome",
    "ProbeFailed",
    "Replay",
    "Target",
    "TargetReport",
    "replay",
    "rss_bytes",
    "run_target",
]
