"""Partition logs that tests open straight on their files (``actors.log.partition_log.Log``
on a temporary directory, no log manager to close them), closed when each test ends.

A test module wraps every ``Log(...)`` it makes in ``OPENED.keep`` and imports
``close_opened_logs``, an autouse fixture: a log the test left open (as a crashed broker
would leave it, or when an assertion failed first) gives its three descriptors per segment
back, where they piled up over the run (a few hundred, with pexpect's ``select()`` refusing
any descriptor past 1023)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.log.partition_log import Log


class OpenedLogs:
    """The logs opened since the last ``close_all``."""

    def __init__(self) -> None:
        self._logs: list[Log] = []

    def keep(self, log: Log) -> Log:
        self._logs.append(log)
        return log

    def close_all(self) -> None:
        """Close every log kept (closing one the test closed already does nothing)."""
        logs, self._logs = self._logs, []
        for log in logs:
            log.close()


OPENED = OpenedLogs()


@pytest.fixture(autouse=True)
def close_opened_logs() -> Iterator[None]:
    yield
    OPENED.close_all()
