"""The Prometheus endpoint of ``kemu up``: the brokers' metrics under the names the
Prometheus JMX exporter gives Kafka's MBeans (docs/metrics.md has the table).

A scrape (``GET /metrics``) asks every running broker for its metrics through the
launcher (``Launcher.cluster_metrics``: the broker actor's ``ReplicaManager`` metrics, the
controller actor's gauges, timers and meters), then renders that one snapshot with
``prometheus_client``: ``MetricsSnapshot`` is a custom ``Collector`` whose ``collect``
turns the snapshot into metric families, and the library's encoder writes the exposition
format the scraper's Accept header asks for (Prometheus text or OpenMetrics).

The HTTP server is ours, on the launcher's event loop, not ``prometheus_client``'s
``start_http_server``: that one runs in a thread of its own and calls ``collect`` there,
where the actors cannot be asked (their mailboxes and asks belong to the loop's tasks); a
collector that hopped back onto the loop would block a thread on the loop for each
scrape. Here a scrape is one more task of the launcher: it asks the actors as ``kemu
top`` does, and ``collect`` only reads the answers. The server speaks just what a scraper
needs: one ``GET`` per connection, answered with ``Connection: close``; a request it
cannot read gets 400, another method 405, another path 404.

Mapping (the JMX exporter's usual Kafka rules, names lower-cased, one ``broker`` label):
an MBean ``kafka.<domain>:type=<Type>,name=<Name>`` gauge is ``kafka_<domain>_<type>_<name>``;
a meter ``<Name>PerSec`` is the counter ``kafka_<domain>_<type>_<name>_total`` (its count;
rates are PromQL's ``rate()``); a timer is a summary ``kafka_<domain>_<type>_<name>`` whose
``_count`` is the exporter's and whose ``_sum`` (milliseconds) is kemu's, in place of
the exporter's mean and percentiles.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable

import anyio
import anyio.abc
from anyio.abc import SocketAttribute
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from protocol.errors import NetworkError
from protocol.launcher import ClusterMetrics

__all__ = [
    "CONTROLLER_EVENT_MANAGER_GAUGES",
    "MetricsSnapshot",
    "exposition",
    "metric_name",
    "serve_prometheus",
]

CONTROLLER_EVENT_MANAGER_GAUGES = frozenset({"EventQueueSize"})
"""The controller gauges of ``ControllerEventManager``'s MBean; the others are
``KafkaController``'s."""

REQUEST_LIMIT = 8192
"""The most bytes of a request's head read before it is refused (a scrape is a few hundred)."""
REQUEST_TIMEOUT = 10.0
"""Seconds a connection has to send its request's head."""
DRAIN_TIMEOUT = 1.0
DRAIN_LIMIT = 1 << 20
"""After refusing a request: how long, and how many bytes, its rest is read and dropped."""


def metric_name(domain: str, mbean_type: str, name: str) -> str:
    """The JMX exporter's name of MBean ``kafka.<domain>:type=<mbean_type>,name=<name>``
    (a meter's ``PerSec`` dropped: the counter family adds ``_total``)."""
    if name.endswith("PerSec"):
        name = name[: -len("PerSec")]
    return f"kafka_{domain}_{mbean_type}_{name}".lower()


class MetricsSnapshot(Collector):
    """A ``prometheus_client`` collector of one ``ClusterMetrics`` snapshot."""

    def __init__(self, snapshot: ClusterMetrics) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        gauges: dict[str, GaugeMetricFamily] = {}
        counters: dict[str, CounterMetricFamily] = {}
        summaries: dict[str, SummaryMetricFamily] = {}

        def gauge(domain: str, mbean_type: str, name: str) -> GaugeMetricFamily:
            key = metric_name(domain, mbean_type, name)
            if key not in gauges:
                gauges[key] = GaugeMetricFamily(
                    key, _help(domain, mbean_type, name), labels=["broker"]
                )
            return gauges[key]

        def counter(domain: str, mbean_type: str, name: str) -> CounterMetricFamily:
            key = metric_name(domain, mbean_type, name)
            if key not in counters:
                counters[key] = CounterMetricFamily(
                    key, _help(domain, mbean_type, name) + " (Count)", labels=["broker"]
                )
            return counters[key]

        def summary(domain: str, mbean_type: str, name: str) -> SummaryMetricFamily:
            key = metric_name(domain, mbean_type, name)
            if key not in summaries:
                summaries[key] = SummaryMetricFamily(
                    key,
                    _help(domain, mbean_type, name) + " (Count; sum in milliseconds)",
                    labels=["broker"],
                )
            return summaries[key]

        for view in self.snapshot.brokers:
            broker = [str(view.broker_id)]
            replica = view.replica_manager
            if replica is not None:
                for name, value in replica.gauges:
                    gauge("server", "ReplicaManager", name).add_metric(broker, value)
                for name, count in replica.meters:
                    counter("server", "ReplicaManager", name).add_metric(broker, count)
            queue = view.controller
            if queue is not None:
                for name, value in queue.gauges:
                    owner = (
                        "ControllerEventManager"
                        if name in CONTROLLER_EVENT_MANAGER_GAUGES
                        else "KafkaController"
                    )
                    gauge("controller", owner, name).add_metric(broker, value)
                for name, events, total_ms in queue.timers:
                    summary("controller", "ControllerStats", name).add_metric(
                        broker, count_value=events, sum_value=total_ms
                    )
                for name, count in queue.meters:
                    counter("controller", "ControllerStats", name).add_metric(broker, count)
        return [*gauges.values(), *counters.values(), *summaries.values()]


def _help(domain: str, mbean_type: str, name: str) -> str:
    """A family's help: the MBean it stands for."""
    return f"kafka.{domain}:type={mbean_type},name={name}"


def exposition(snapshot: ClusterMetrics, accept: str = "") -> tuple[bytes, str]:
    """``snapshot`` in the exposition format ``accept`` asks for: (body, content type)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MetricsSnapshot(snapshot))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


async def serve_prometheus(
    metrics: Callable[[], Awaitable[ClusterMetrics]],
    *,
    host: str,
    port: int = 0,
    task_status: anyio.abc.TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``GET /metrics`` on ``host:port`` (0: a free port), each scrape a fresh
    ``metrics()`` snapshot; reports its ``HOST:PORT``, serves until cancelled."""
    try:
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
    except OSError as exc:
        raise NetworkError(
            f"the Prometheus endpoint cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
    async with listener:
        bound = int(listener.extra(SocketAttribute.local_port))  # noqa: S610 - not Django
        task_status.started(f"{host}:{bound}")
        await listener.serve(lambda stream: _handle(stream, metrics))


async def _handle(
    stream: anyio.abc.SocketStream, metrics: Callable[[], Awaitable[ClusterMetrics]]
) -> None:
    async with stream:
        try:
            with anyio.fail_after(REQUEST_TIMEOUT):
                head = await _read_head(stream)
        except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return
        if head is None:
            await _respond(stream, 400, b"bad request\n")
            await _discard_rest(stream)
            return
        method, path, headers = head
        if method != "GET":
            await _respond(stream, 405, b"only GET\n", extra=(("Allow", "GET"),))
            return
        if path.split("?", 1)[0] not in ("/metrics", "/"):
            await _respond(stream, 404, b"not found: the metrics are at /metrics\n")
            return
        body, content_type = exposition(await metrics(), headers.get("accept", ""))
        await _respond(stream, 200, body, content_type=content_type)


async def _read_head(stream: anyio.abc.SocketStream) -> tuple[str, str, dict[str, str]] | None:
    """The request line and headers, None if they are not HTTP/1.x or too long."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > REQUEST_LIMIT:
            return None
        data += await stream.receive(4096)
    lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    return parts[0], parts[1], headers


async def _discard_rest(stream: anyio.abc.SocketStream) -> None:
    """Read what the client still sends, for a moment, before closing: closing on unread
    bytes resets the connection, and the client could lose the answer."""
    with anyio.move_on_after(DRAIN_TIMEOUT), contextlib.suppress(anyio.EndOfStream, OSError):
        received = 0
        while received < DRAIN_LIMIT:
            received += len(await stream.receive(65536))


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


async def _respond(
    stream: anyio.abc.SocketStream,
    status: int,
    body: bytes,
    *,
    content_type: str = "text/plain; charset=utf-8",
    extra: tuple[tuple[str, str], ...] = (),
) -> None:
    head = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        # (the scraper may have gone away)
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
