"""Inputs for the Prometheus endpoint's HTTP reader (``cluster.launch.prometheus``): a
request head built from its parts (the method, the target, the version, headers, some
of each valid, some not), as is, mutated, or past the head's size limit, and raw bytes.
One input is one connection's whole request: the endpoint reads one per connection."""

from __future__ import annotations

from typing import Final

from hypothesis import strategies as st

from cluster.fuzz.mutations import mutated
from cluster.launch.prometheus import REQUEST_LIMIT

__all__ = ["http_inputs"]

METHODS: Final = (b"GET", b"POST", b"HEAD", b"PUT", b"get", b"", b"G\x00T")
TARGETS: Final = (b"/metrics", b"/", b"/metrics?x=1", b"/nowhere", b"*", b"", b"/%00")
VERSIONS: Final = (b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.1x", b"", b"http/1.1")
HEADERS: Final = (
    b"Host: 127.0.0.1",
    b"Accept: application/openmetrics-text",
    b"Accept: text/plain;q=0.5, */*",
    b"Accept: application/openmetrics-text; version=1.0.0; escaping=allow-utf-8",
    b"Accept:",
    b"Content-Length: 5",
    b"no colon here",
    b": empty name",
)


@st.composite
def _head(draw: st.DrawFn) -> bytes:
    line = b" ".join(
        (
            draw(st.sampled_from(METHODS)),
            draw(st.sampled_from(TARGETS)),
            draw(st.sampled_from(VERSIONS)),
        )
    )
    headers = draw(st.lists(st.sampled_from(HEADERS) | st.binary(max_size=40), max_size=4))
    return b"\r\n".join((line, *headers)) + b"\r\n\r\n"


def http_inputs() -> st.SearchStrategy[bytes]:
    """One request: a head, mutated or not, a head whose headers outgrow
    ``REQUEST_LIMIT``, or raw bytes."""
    oversized = _head().map(
        lambda head: head[:-2] + b"X-Pad: " + b"a" * (REQUEST_LIMIT + 1) + b"\r\n\r\n"
    )
    return st.one_of(
        _head(),
        _head().flatmap(mutated),
        oversized,
        st.binary(max_size=256),
    )
