"""structlog, configured once per process.

Human-facing logs go to stderr (console renderer, or JSON with ``json=True``); actor
identity (node, actor) is bound per task with structlog's context variables by the actor
runtime. Traces are separate (actors.runtime.tracer / cluster.trace_files): logs are for
people, traces are for machines.
"""

from __future__ import annotations

import logging
import sys

import structlog

_configured = False
_level = "WARNING"


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time of writing, not the stream it was
    when logging was configured (a test harness swaps and closes its capture streams)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configured_level() -> str:
    """The level this process logs at: what the processes it starts are given."""
    return _level


def configure_logging(*, level: str = "WARNING", json: bool = False) -> None:
    global _configured, _level
    if _configured:
        return
    _configured = True
    _level = level
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    logging.getLogger("aiozk").setLevel(logging.CRITICAL)
