"""structlog, configured once per process; each broker's own log files.

Human-facing logs go to stderr, every line with its time (ISO 8601, UTC), level, event,
logger and fields, rendered for the console or as JSON (``json=True``). Actor identity
(``node``, ``actor``) is bound per task with structlog's context variables by the actor
runtime. Traces are separate (actors.runtime.tracer / cluster.trace_files): logs are for
people, traces are for machines; nothing here touches a trace, and the wall-clock time
of a log line never reaches one.

With ``broker_files=True`` (``kemu up``, ``kemu _broker``, ``kemu chaos``), each broker
started by ``cluster.launch`` also writes Kafka's three files in its log dir, split as
Kafka's ``config/log4j.properties`` splits them: ``controller.log`` (the ``kafka.controller``
loggers: ours under ``kemu.controller``), ``state-change.log`` (``state.change.logger``:
ours ``kemu.controller.state_change`` and ``kemu.state_change``) and ``server.log``
(everything else the broker's node logs), each line carrying ``broker_id``. Files record
at ``level`` when one was given, else at INFO (log4j's root level), while stderr keeps
WARNING. At DEBUG the network logs every message between actors (``message_sent``,
``message_received``); below DEBUG nothing of it runs (``messages_logged``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

import structlog

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "LogSettings",
    "broker_registered",
    "close_broker_logs",
    "configure_logging",
    "configured",
    "log_options",
    "messages_logged",
    "open_broker_logs",
]

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS: Final = ("console", "json")
STDERR_DEFAULT: Final = "WARNING"
FILES_DEFAULT: Final = "INFO"  # Kafka's log4j.rootLogger=INFO

SERVER_LOG: Final = "server.log"
CONTROLLER_LOG: Final = "controller.log"
STATE_CHANGE_LOG: Final = "state-change.log"
STATE_CHANGE_LOGGERS: Final = frozenset({"kemu.controller.state_change", "kemu.state_change"})


@dataclass(frozen=True)
class LogSettings:
    """What this process was configured with: ``level`` as given (None: the defaults),
    what the processes it starts are given too."""

    level: str | None = None
    json: bool = False
    broker_files: bool = False


_settings: LogSettings | None = None
_stderr_level = logging.WARNING
_file_level = logging.INFO


def configured() -> LogSettings:
    """This process's log settings (the defaults if it never configured logging)."""
    return _settings or LogSettings()


def messages_logged() -> bool:
    """Whether the messages between actors are logged (DEBUG): the network checks it once,
    so that nothing of it runs otherwise."""
    settings = configured()
    return settings.level == "DEBUG"


def file_for(logger_name: str) -> str:
    """Which of a broker's files a logger writes to (Kafka's log4j.properties split)."""
    if logger_name in STATE_CHANGE_LOGGERS:
        return STATE_CHANGE_LOG
    if logger_name == "kemu.controller" or logger_name.startswith("kemu.controller."):
        return CONTROLLER_LOG
    return SERVER_LOG


class BrokerLogs:
    """One broker's three files, all created (appending) with its first line once the
    broker has registered (``broker_registered``) and its log dir exists: a broker that
    fails before (a registered id, one registered by another broker at the same moment,
    a taken listener) leaves its log dir as it found it, as its log manager does. Lines
    before then wait in memory (up to ``EARLY_LINES``). A directory that cannot be written
    loses the lines: the log dir's failure is the broker's to report, not its log's."""

    EARLY_LINES: Final = 10_000

    def __init__(self, broker_id: int, directory: Path) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.registered = False
        self._files: dict[str, TextIO] | None = None
        self._early: list[tuple[str, str]] = []
        self._failed = False

    def write(self, name: str, line: str) -> None:
        if self._files is None:
            if self._failed:
                return
            if not self._opened():
                if len(self._early) < self.EARLY_LINES:
                    self._early.append((name, line))
                return
        self._write(name, line)

    def mark_registered(self) -> None:
        """The broker has registered: the lines held so far are written now (a broker
        that logs nothing more still has its start and registration in its files)."""
        self.registered = True
        if self._files is None and not self._failed:
            self._opened()

    def _opened(self) -> bool:
        """Open the files, with the lines held so far, once the broker has registered and
        its log dir exists; whether they are open."""
        if not self.registered or not self.directory.is_dir():
            return False
        self._files = self._open()
        if self._files is None:
            self._failed = True
            self._early.clear()
            return False
        early, self._early = self._early, []
        for early_name, early_line in early:
            self._write(early_name, early_line)
        return True

    def _write(self, name: str, line: str) -> None:
        assert self._files is not None
        try:
            out = self._files[name]
            out.write(line + "\n")
            out.flush()
        except OSError:  # e.g. the disk is full: the line is lost, the broker goes on
            pass

    def _open(self) -> dict[str, TextIO] | None:
        files: dict[str, TextIO] = {}
        try:
            for file_name in (SERVER_LOG, CONTROLLER_LOG, STATE_CHANGE_LOG):
                files[file_name] = (self.directory / file_name).open("a", encoding="utf-8")
        except OSError:
            for out in files.values():
                out.close()
            return None
        return files

    def close(self) -> None:
        for out in (self._files or {}).values():
            out.close()
        self._files = None


_brokers: dict[str, BrokerLogs] = {}  # by node id
_FIRST: Final = ("timestamp", "level", "logger", "event", "broker_id")


def open_broker_logs(node_id: str, broker_id: int, directory: Path) -> None:
    """From now on, what node ``node_id`` logs also goes to the files in ``directory``
    (nothing without ``broker_files``); a broker started again keeps its files open."""
    if not configured().broker_files:
        return
    old = _brokers.get(node_id)
    if old is not None and old.directory == directory:
        return
    if old is not None:
        old.close()
    _brokers[node_id] = BrokerLogs(broker_id, directory)


def broker_registered(node_id: str) -> None:
    """Node ``node_id``'s broker has registered: its files may be written from now on."""
    logs = _brokers.get(node_id)
    if logs is not None:
        logs.mark_registered()


def close_broker_logs(node_ids: Iterable[str]) -> None:
    """Close the files of these nodes (a cluster that ends)."""
    for node_id in node_ids:
        logs = _brokers.pop(node_id, None)
        if logs is not None:
            logs.close()


class _NamedLogger:
    """Knows its name (``structlog.get_logger(NAME)``) and writes each line to
    ``sys.stderr`` as it is at the time of writing (a test harness swaps and closes its
    capture streams), in one write, not print's two: the broker processes of ``kemu up
    --processes`` share their parent's stderr, and no line may be split by another's."""

    def __init__(self, name: str) -> None:
        self.name = name

    def msg(self, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    log = debug = info = warning = warn = error = critical = exception = fatal = failure = msg


def _named_logger(*args: Any) -> _NamedLogger:
    return _NamedLogger(str(args[0]) if args else "kemu")


def _add_logger_name(logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    event.setdefault("logger", getattr(logger, "name", "kemu"))
    return event


class _Route:
    """The last processor: renders the line once, writes it to the file of the broker
    whose node logged it (chosen by the logger's name), and hands it on to stderr if its
    level is shown there."""

    def __init__(self, renderer: Any, *, json: bool) -> None:
        self.renderer = renderer
        self.json = json

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        level = logging.getLevelName(str(event.get("level", "info")).upper())
        node = event.get("node")
        broker = _brokers.get(node) if isinstance(node, str) else None
        if broker is not None:
            event.setdefault("broker_id", broker.broker_id)
        name = file_for(str(event.get("logger", "")))  # before the renderer takes it out
        if self.json:  # what a reader scans for first, first
            event = {k: event[k] for k in _FIRST if k in event} | dict(event)
        line = self.renderer(logger, method, event)
        if broker is not None and level >= _file_level:
            broker.write(name, line)
        if level < _stderr_level:
            raise structlog.DropEvent
        return line


def _level_number(name: str) -> int:
    number = logging.getLevelName(name)
    assert isinstance(number, int), name
    return number


def configure_logging(
    *, level: str | None = None, json: bool = False, broker_files: bool = False
) -> None:
    """Configure this process's logging once (later calls change nothing). ``level``: of
    stderr and the broker files (None: WARNING on stderr, INFO in the files)."""
    global _settings, _stderr_level, _file_level
    if _settings is not None:
        return
    _settings = LogSettings(level=level, json=json, broker_files=broker_files)
    _stderr_level = _level_number(level or STDERR_DEFAULT)
    _file_level = _level_number(level or FILES_DEFAULT)
    lowest = min(_stderr_level, _file_level) if broker_files else _stderr_level
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _Route(renderer, json=json),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lowest),
        logger_factory=_named_logger,
        cache_logger_on_first_use=True,
    )
    logging.getLogger("aiozk").setLevel(logging.CRITICAL)


def log_options(settings: LogSettings) -> list[str]:
    """The command-line options that give a child process these settings."""
    options = ["--log-format", "json" if settings.json else "console"]
    if settings.level is not None:
        options += ["--log-level", settings.level]
    return options
