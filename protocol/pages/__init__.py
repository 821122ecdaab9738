"""What the HTML pages of kemu share: the message-sequence diagram of a trace
(``sequence.js``, ``sequence.css``), drawn by the chaos run report (``report.html``,
``cluster.chaos.report``) and by the diff page of ``kemu trace diff`` (``diff.html``,
``spark.report``). Both write these files inline into their pages, so that a page opens
from the file system with no network. This package imports nothing of ours, so that both
``cluster`` and ``spark`` may use it."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["asset", "script_text"]


@functools.cache
def asset(name: str) -> bytes:
    """The bytes of one of this package's files (``sequence.js``, ``sequence.css``)."""
    return (resources.files(__package__) / name).read_bytes()


def script_text(text: bytes) -> bytes:
    """JSON (or JSON Lines) safe inside a ``<script>`` element: ``<`` only occurs in
    JSON strings, where ``\\u003c`` means the same, so no ``</script>`` or ``<!--`` can
    end or confuse the element."""
    return text.replace(b"<", b"\\u003c")
