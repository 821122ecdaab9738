"""``kemu top``: a live view of a running ``kemu up`` cluster, redrawn every second.

It finds the cluster through its cluster file (``--cluster-file``, default
``.kemu/cluster.json``), as ``kemu zk`` and ``kemu broker`` do, and reads two sources each
refresh:

* the metadata store, as Kafka's tools read ZooKeeper: the registered brokers
  (``/brokers/ids``), the controller and its epoch (``/controller``,
  ``/controller_epoch``), every topic's assignment and partition states
  (``/brokers/topics/<t>``, ``.../partitions/<p>/state``), the topics' ``min.insync.replicas``
  (``/config/topics/<t>``), the pending deletions (``/admin/delete_topics``) and
  reassignments (``/admin/reassign_partitions``, and the partitions whose assignment still
  has adding or removing replicas);
* the launcher's control endpoint (``ClusterViewRequest``): each broker's state as the
  launcher knows it (running, stopped, killed, paused), the active controller's event
  queue (Kafka's ``EventQueueSize`` and ``ControllerState``), and the brokers'
  ``min.insync.replicas``.

A partition is offline, under-replicated or under its min ISR as ``kafka-topics.sh
--describe`` has it (``TopicCommand.PartitionDescription``): offline when it has no leader
or its leader is not registered; under-replicated when its ISR is smaller than its
replicas; under min ISR when it has no leader or its ISR is smaller than the topic's
``min.insync.replicas``. Each list shows its first ``LIST_CAP`` partitions.

On a terminal the view is drawn in place (rich's ``Live``) until ``q`` or Ctrl-C, both
exit 0; elsewhere (a pipe, a file) each frame is printed plainly, one after the other.
``--once`` prints one frame and exits. A cluster that cannot be reached, or that stops
while watched, is one line on stderr and exit 1.
"""

from __future__ import annotations

import contextlib
import os
import sys
import termios
import tty
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TextIO

import anyio
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from actors.controller.controller import CONTROLLER_GAUGES
from actors.zk import kafka_zk
from actors.zk.store import MetadataStore, StoreSession
from cluster.launch.connect import connect_launcher, load_cluster_file, open_store
from protocol import zkdata
from protocol.control import TopicPartition
from protocol.errors import KemuError, NoNodeError, StoreError, ZkDataError, unwrap_kemu_error
from protocol.ids import BrokerId, TopicName
from protocol.launcher import ClusterView, ClusterViewRequest

__all__ = ["Frame", "PartitionRow", "read_frame", "render", "run_top", "top_main"]

LIST_CAP: Final = 10  # partitions shown per list; the count says how many there are
VIEW_TIMEOUT: Final = 10.0  # for the launcher's answer to ClusterViewRequest
DEFAULT_INTERVAL: Final = 1.0
PLAIN_WIDTH: Final = 100  # columns of a frame printed to a pipe or a file
MIN_ISR: Final = "min.insync.replicas"

LauncherAsk = Callable[..., Awaitable[object]]


class TopError(KemuError):
    """A ``kemu top`` failure, printed as one line."""


@dataclass(frozen=True)
class PartitionRow:
    """One partition as a list of the view shows it; ``leader`` None when it has none."""

    tp: TopicPartition
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class BrokerRow:
    """One broker: its state as the launcher knows it ("-" without a launcher), and its
    registration in the store (``endpoint`` and ``epoch``, the znode's czxid) if any."""

    broker_id: int
    state: str
    endpoint: str | None
    epoch: int | None


@dataclass(frozen=True)
class Frame:
    """Everything one refresh shows."""

    cluster_id: str
    controller_id: int | None
    controller_epoch: int | None
    brokers: tuple[BrokerRow, ...]
    topics: int
    partitions: int
    offline: tuple[PartitionRow, ...]
    under_replicated: tuple[PartitionRow, ...]
    under_min_isr: tuple[PartitionRow, ...]
    deletions: tuple[str, ...]
    reassignments: tuple[TopicPartition, ...]
    queue_depth: int | None  # None: no running broker answered as the active controller
    controller_state: str
    controller_gauges: Mapping[str, int] = field(default_factory=dict)
    """The active controller's gauges under Kafka's names (``KafkaController``'s)."""


def classify(
    rows: Sequence[PartitionRow], *, live: set[int], min_isr: Mapping[str, int]
) -> tuple[tuple[PartitionRow, ...], tuple[PartitionRow, ...], tuple[PartitionRow, ...]]:
    """The offline, under-replicated and under-min-ISR partitions of ``rows``, as
    ``TopicCommand.PartitionDescription`` decides them (``hasUnavailablePartitions``,
    ``isUnderReplicated``, ``isUnderMinIsr``)."""
    offline = tuple(r for r in rows if r.leader is None or r.leader not in live)
    under_replicated = tuple(r for r in rows if len(r.isr) < len(r.replicas))
    under_min_isr = tuple(
        r for r in rows if r.leader is None or len(r.isr) < min_isr.get(r.tp.topic, 1)
    )
    return offline, under_replicated, under_min_isr


async def _read_or_none(session: StoreSession, path: str) -> bytes | None:
    try:
        data, _ = await session.get(path)
    except NoNodeError:
        return None
    return data


async def _topic_min_isr(
    session: StoreSession, topics: Sequence[TopicName], default: int
) -> dict[str, int]:
    """Each topic's ``min.insync.replicas``: its own config, else ``default``."""
    outcomes = await session.get_each([(zkdata.topic_config_path(t), False) for t in topics])
    out: dict[str, int] = {}
    for topic, outcome in zip(topics, outcomes, strict=True):
        out[topic] = default
        if isinstance(outcome, NoNodeError):
            continue
        if isinstance(outcome, StoreError):
            raise outcome
        value = zkdata.EntityConfig.decode(outcome[0]).config.get(MIN_ISR)
        if value is not None and value.strip().isdigit():
            out[topic] = int(value)
    return out


async def _reassigning(
    session: StoreSession, assignments: Mapping[TopicName, Mapping[int, zkdata.ReplicaAssignment]]
) -> tuple[TopicPartition, ...]:
    """The partitions being reassigned: those of ``/admin/reassign_partitions`` (the
    ZooKeeper path of ``kafka-reassign-partitions.sh``), and those whose assignment still
    has adding or removing replicas (AlterPartitionReassignments)."""
    found: set[TopicPartition] = set()
    try:
        legacy = await kafka_zk.get_partition_reassignment(session)
    except ZkDataError:  # not a reassignment: Kafka's controller ignores it too
        legacy = None
    if legacy is not None:
        found.update(legacy.as_dict())
    for topic, partitions in assignments.items():
        for partition, assignment in partitions.items():
            if assignment.adding_replicas or assignment.removing_replicas:
                found.add(TopicPartition(topic, partition))
    return tuple(sorted(found))


async def read_frame(session: StoreSession, view: ClusterView | None) -> Frame:
    """One refresh: the store as ``session`` reads it now, with the launcher's ``view``
    (None when there is no launcher to ask)."""
    registered = await kafka_zk.get_brokers(session)
    controller = await kafka_zk.get_controller_id(session)
    epoch_data = await _read_or_none(session, zkdata.CONTROLLER_EPOCH_PATH)
    cluster_data = await _read_or_none(session, zkdata.CLUSTER_ID_PATH)
    topics = tuple(sorted(await kafka_zk.get_all_topics(session)))
    assignments = await kafka_zk.get_assignments(session, topics)
    tps = [TopicPartition(t, p) for t, parts in sorted(assignments.items()) for p in sorted(parts)]
    states = await kafka_zk.get_partition_states(session, tps)
    default_min_isr = view.min_insync_replicas if view is not None else 1
    min_isr = await _topic_min_isr(session, tuple(assignments), default_min_isr)
    rows = []
    for tp in tps:
        state = states.get(tp)
        leader_isr = state.state if state is not None else None
        leader = leader_isr.leader if leader_isr is not None else -1
        rows.append(
            PartitionRow(
                tp=tp,
                leader=None if leader < 0 else int(leader),
                replicas=tuple(int(b) for b in assignments[tp.topic][tp.partition].replicas),
                isr=tuple(int(b) for b in leader_isr.isr) if leader_isr is not None else (),
            )
        )
    offline, under_replicated, under_min_isr = classify(
        rows, live={int(b) for b in registered}, min_isr=min_isr
    )
    launcher_states = {int(b): s.value for b, s in view.states} if view is not None else {}
    brokers = []
    for broker_id in sorted(set(launcher_states) | {int(b) for b in registered}):
        registration = registered.get(BrokerId(broker_id))
        endpoint = None
        if registration is not None and registration.registration.endpoints:
            first = registration.registration.endpoints[0]
            endpoint = f"{first.host}:{first.port}"
        brokers.append(
            BrokerRow(
                broker_id=broker_id,
                state=launcher_states.get(broker_id, "-"),
                endpoint=endpoint,
                epoch=registration.epoch if registration is not None else None,
            )
        )
    queue = view.controller_queue if view is not None else None
    return Frame(
        cluster_id=zkdata.ClusterId.decode(cluster_data).cluster_id if cluster_data else "-",
        controller_id=None if controller is None else int(controller),
        controller_epoch=(
            None if epoch_data is None else int(zkdata.decode_controller_epoch(epoch_data))
        ),
        brokers=tuple(brokers),
        topics=len(assignments),
        partitions=len(tps),
        offline=offline,
        under_replicated=under_replicated,
        under_min_isr=under_min_isr,
        deletions=tuple(sorted(await kafka_zk.get_topic_deletions(session))),
        reassignments=await _reassigning(session, assignments),
        queue_depth=queue.depth if queue is not None else None,
        controller_state=queue.state if queue is not None else "-",
        controller_gauges=dict(queue.gauges) if queue is not None else {},
    )


# ---------------------------------------------------------------------- drawing


def _ids(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def _partition_list(title: str, rows: Sequence[PartitionRow]) -> RenderableType:
    table = Table(title=f"{title} ({len(rows)})", title_justify="left", box=None, pad_edge=False)
    for column in ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"):
        table.add_column(column)
    for row in rows[:LIST_CAP]:
        leader = "none" if row.leader is None else str(row.leader)
        table.add_row(
            row.tp.topic, str(row.tp.partition), leader, _ids(row.replicas), _ids(row.isr)
        )
    if len(rows) > LIST_CAP:
        table.add_row(f"... {len(rows) - LIST_CAP} more", "", "", "", "")
    return table


GAUGES: Final = tuple(
    name
    for name in CONTROLLER_GAUGES
    if name not in ("ActiveControllerCount", "ControllerState", "EventQueueSize")
)
"""The controller gauges the view prints, in this order (Kafka's names); the header
shows the other three (who is active, its state, its queue)."""


def render(frame: Frame) -> RenderableType:
    """One frame: the controller, the brokers, the counts, then each non-empty list."""
    if frame.controller_id is None:
        controller = "controller: none"
    else:
        epoch = "-" if frame.controller_epoch is None else str(frame.controller_epoch)
        controller = f"controller: broker {frame.controller_id} (epoch {epoch})"
    queue = "-"  # no running broker answered as the active controller
    if frame.queue_depth is not None:
        queue = f"{frame.queue_depth} ({frame.controller_state})"
    registered = sum(1 for b in frame.brokers if b.endpoint is not None)
    header = Text(
        f"kemu top  cluster {frame.cluster_id}  {controller}"
        f"  event queue: {queue}\n"
        f"brokers: {registered} registered of {len(frame.brokers)}",
        style="bold",
    )
    brokers = Table(box=None, pad_edge=False)
    for column in ("BROKER", "STATE", "REGISTERED", "ENDPOINT", "EPOCH"):
        brokers.add_column(column)
    for b in frame.brokers:
        brokers.add_row(
            str(b.broker_id),
            b.state,
            "yes" if b.endpoint is not None else "no",
            b.endpoint or "-",
            "-" if b.epoch is None else str(b.epoch),
        )
    counts = Text(
        f"topics: {frame.topics}  partitions: {frame.partitions}"
        f"  offline: {len(frame.offline)}  under-replicated: {len(frame.under_replicated)}"
        f"  under-min-isr: {len(frame.under_min_isr)}\n"
        f"pending deletions: {len(frame.deletions)}"
        + (f" ({', '.join(frame.deletions[:LIST_CAP])})" if frame.deletions else "")
        + f"  reassignments: {len(frame.reassignments)}"
        + (
            " ("
            + ", ".join(f"{tp.topic}-{tp.partition}" for tp in frame.reassignments[:LIST_CAP])
            + ")"
            if frame.reassignments
            else ""
        )
    )
    parts: list[RenderableType] = [header, brokers, counts]
    shown = [(n, frame.controller_gauges[n]) for n in GAUGES if n in frame.controller_gauges]
    if shown:
        parts.append(Text("controller: " + "  ".join(f"{n}={v}" for n, v in shown)))
    for title, rows in (
        ("offline partitions", frame.offline),
        ("under-replicated partitions", frame.under_replicated),
        ("under-min-isr partitions", frame.under_min_isr),
    ):
        if rows:
            parts.append(_partition_list(title, rows))
    return Group(*parts)


# ---------------------------------------------------------------------- the loop


@contextlib.contextmanager
def _keys(fd: int | None) -> Iterator[None]:
    """Single keys from the terminal ``fd`` (cbreak mode: no echo, no line buffering; Ctrl-C
    still interrupts), restored however the view ends; nothing when ``fd`` is None."""
    if fd is None:
        yield
        return
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _quit_within(fd: int | None, seconds: float) -> bool:
    """Wait ``seconds``; True as soon as ``q`` is typed on ``fd`` (or it reached its end)."""
    with anyio.move_on_after(seconds):
        if fd is None:
            await anyio.sleep_forever()
            return False  # not reached: only the deadline ends the sleep
        while True:
            await anyio.wait_readable(fd)
            typed = os.read(fd, 64)
            if not typed or b"q" in typed.lower():
                return True
    return False


@contextlib.asynccontextmanager
async def _sources(
    address: str, store: MetadataStore | None, cluster_file: Path | None
) -> AsyncIterator[StoreSession]:
    async with AsyncExitStack() as stack:
        if store is None:
            store = await stack.enter_async_context(
                open_store(address, name="kemu-top", cluster_file=cluster_file)
            )
        session = await store.open_session(timeout=30.0, name="kemu-top")
        try:
            yield session
        finally:
            with anyio.CancelScope(shield=True):
                await session.close()
            session.events.close()


async def run_top(
    *,
    address: str,
    control: str,
    secret: bytes,
    console: Console,
    interval: float = DEFAULT_INTERVAL,
    once: bool = False,
    keys: int | None = None,
    store: MetadataStore | None = None,
    cluster_file: Path | None = None,
) -> None:
    """Draw the cluster whose store is at ``address`` (or ``store``) and whose launcher
    serves ``control`` ("" for none) on ``console``: one frame if ``once``, else one each
    ``interval`` seconds (in place on a terminal) until ``q`` on the terminal ``keys``."""
    with unwrap_kemu_error():  # the task groups of open_store and connect_launcher wrap errors
        async with AsyncExitStack() as stack:
            session = await stack.enter_async_context(_sources(address, store, cluster_file))
            ask: LauncherAsk | None = None
            if control:
                ask = await stack.enter_async_context(connect_launcher(control, secret=secret))

            async def frame() -> RenderableType:
                view = None
                if ask is not None:
                    reply = await ask(ClusterViewRequest(), timeout=VIEW_TIMEOUT)
                    if not isinstance(reply, ClusterView):
                        raise TopError(f"unexpected answer from the launcher: {reply!r}")
                    view = reply
                return render(await read_frame(session, view))

            if once:
                console.print(await frame())
                return
            if not console.is_terminal:
                while True:
                    console.print(await frame())
                    console.print()
                    console.file.flush()
                    if await _quit_within(keys, interval):
                        return
            with _keys(keys), Live(console=console, screen=True, auto_refresh=False) as live:
                while True:
                    live.update(await frame(), refresh=True)
                    if await _quit_within(keys, interval):
                        return


def top_main(
    *,
    cluster_file: str | None,
    interval: float,
    once: bool,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``kemu top``: returns the exit status (0 also after Ctrl-C); errors are one line on
    ``err``."""
    out = out or sys.stdout
    err = err or sys.stderr
    if not interval > 0:
        err.write(f"Error: --interval {interval:g}: must be more than 0 seconds\n")
        return 2
    console = Console(file=out, highlight=False)
    if not console.is_terminal:
        console = Console(file=out, highlight=False, width=PLAIN_WIDTH)
    keys = sys.stdin.fileno() if console.is_terminal and sys.stdin.isatty() else None
    try:
        path = Path(cluster_file) if cluster_file else None
        info = load_cluster_file(path)
        if not info.store:
            raise TopError("the cluster file names no store")
        secret = info.secret_bytes if info.control else b""
        anyio.run(
            lambda: run_top(
                address=info.store,
                control=info.control,
                secret=secret,
                console=console,
                interval=interval,
                once=once,
                keys=keys,
                cluster_file=path,
            )
        )
    except KemuError as exc:
        err.write(f"Error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
