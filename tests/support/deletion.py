"""What a cluster still holds of a topic: the check that a deletion is complete (the
invariant "a deleted topic leaves no znode and no log directory behind"), for any test
that runs a ``Cluster`` in its own process.

``topic_leftovers`` lists, one line each, everything left of the topic: its znodes
(``/brokers/topics/<t>`` and all under it, ``/config/topics/<t>``,
``/admin/delete_topics/<t>``), its log directories in every broker's log dirs (live
``<t>-<p>`` or renamed ``<t>-<p>.<id>-delete``), and, on each running broker, anything of
it in its controller's context, its metadata cache, its leader epochs and its log manager
(hosted logs and queued removals). Empty means the topic is gone; wait for that with
``tests.support.waiting.eventually``.
"""

from __future__ import annotations

from pathlib import Path

from actors.broker.broker import Broker
from actors.controller.controller import KafkaController
from actors.log.manager import parse_log_dir_name
from actors.zk.store import StoreSession
from cluster.launch.cluster import Cluster
from protocol import zkdata
from protocol.errors import NoNodeError
from protocol.ids import TopicName
from protocol.log import ListLogs, LogListing

__all__ = ["running_brokers", "topic_leftovers", "topic_log_dirs", "topic_znodes"]


def running_brokers(cluster: Cluster) -> list[int]:
    """The brokers running (a crashed node is not, though its tasks may still be ending)."""
    return sorted(b for b, n in cluster.nodes.items() if n.running and not n.crashed)


async def topic_znodes(session: StoreSession, topic: str) -> list[str]:
    """The topic's znodes that exist: its assignment with every partition and state under
    it, its config, its deletion marker; in that order."""
    name = TopicName(topic)
    found: list[str] = []

    async def walk(path: str) -> None:
        try:
            children = await session.children(path)
        except NoNodeError:
            return
        found.append(path)
        for child in children:
            await walk(f"{path}/{child}")

    await walk(zkdata.topic_path(name))
    for path in (zkdata.topic_config_path(name), zkdata.delete_topic_path(name)):
        if await session.exists(path) is not None:
            found.append(path)
    return found


def topic_log_dirs(log_root: Path, topic: str) -> list[str]:
    """``<log dir>/<name>`` of every directory of the topic's logs, live or renamed for
    deletion, in every log dir under ``log_root`` (``broker-<id>``, ``broker-<id>.<k>``)."""
    found = []
    for log_dir in sorted(log_root.glob("broker-*")):
        for entry in sorted(log_dir.iterdir()):
            try:
                tp, _ = parse_log_dir_name(entry.name)
            except ValueError:
                continue
            if tp.topic == topic:
                found.append(f"{log_dir.name}/{entry.name}")
    return found


async def topic_leftovers(cluster: Cluster, session: StoreSession, topic: str) -> list[str]:
    """Everything ``cluster`` still holds of ``topic`` (see the module docstring), read
    through ``session`` and the brokers' actors; empty once the topic is deleted."""
    left = [f"znode {p}" for p in await topic_znodes(session, topic)]
    left += [f"dir {d}" for d in topic_log_dirs(cluster.spec.log_dir, topic)]
    for b in running_brokers(cluster):
        node = cluster.nodes[b]
        controller = node.actor("controller")
        broker = node.actor("broker")
        assert isinstance(controller, KafkaController)
        assert isinstance(broker, Broker)
        ctx = controller.context
        held = {
            "all_topics": topic in ctx.all_topics,
            "partition_assignments": topic in ctx.partition_assignments,
            "topics_to_be_deleted": topic in ctx.topics_to_be_deleted,
            "topics_with_deletion_started": topic in ctx.topics_with_deletion_started,
            "topics_ineligible_for_deletion": topic in ctx.topics_ineligible_for_deletion,
            "partition_states": any(tp.topic == topic for tp in ctx.partition_states),
            "replica_states": any(r.topic == topic for r in ctx.replica_states),
            "leaderships": any(tp.topic == topic for tp in ctx.leaderships),
            "partitions_being_reassigned": any(
                tp.topic == topic for tp in ctx.partitions_being_reassigned
            ),
        }
        left += [f"controller of broker {b}: {what}" for what, there in held.items() if there]
        status = await cluster.status(b)
        if status is None or topic in status.topics:
            left.append(f"metadata cache of broker {b}")
        if any(tp.topic == topic for tp in broker.leader_epochs):
            left.append(f"leader epochs of broker {b}")
        listing = await node.ask(broker.log_manager_ref, ListLogs(), timeout=5)
        assert isinstance(listing, LogListing)
        left += [
            f"log manager of broker {b}: {log.topic}-{log.partition}"
            for log in listing.logs
            if log.topic == topic
        ]
        left += [
            f"log manager of broker {b}: pending {p.name}"
            for p in listing.pending_deletion
            if p.topic == topic
        ]
    return left
