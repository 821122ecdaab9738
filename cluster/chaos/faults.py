"""Faults carried out on a running cluster, and undone.

``inject`` does what a fault step says, through the cluster (``Cluster.crash_broker``,
``stop_broker``, ``pause_broker``), its network (fault rules, partitions), its store
(session expiry, latency), a broker's disk (``actors.log.disk.FaultyDisk``) or a broker
node's clock, and returns an ``ActiveFault`` whose ``heal`` undoes it (nothing, for an
instantaneous one).

Network rules only ever match messages between brokers: the chaos client node is never
named in them, so that the run's own requests and reads are not faulted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, assert_never

import msgspec

from actors.broker.broker import broker_node_id
from actors.log.disk import DiskOp
from cluster.chaos.group import find_coordinator
from cluster.chaos.harness import ChaosStepError, Harness
from cluster.chaos.model import (
    BrokerSel,
    ClockSkew,
    CrashBroker,
    DelayMessages,
    DiskFailure,
    DropMessages,
    DuplicateMessages,
    ExpireSession,
    Fault,
    KillController,
    KillCoordinator,
    NetworkPartition,
    PauseBroker,
    PauseMember,
    ReorderMessages,
    SlowStore,
    StopBroker,
)
from cluster.network import Delay, Drop, Duplicate, Match, Network, Reorder, Rule
from cluster.store.embedded import EmbeddedStore

__all__ = ["RESTART_TIMEOUT", "ActiveFault", "inject"]

RESTART_TIMEOUT: Final = 120.0
"""Seconds a restart waits for the broker's previous run and registration to be gone."""


@dataclass
class ActiveFault:
    """A fault in force: ``heal`` ends it. ``broker`` is the broker it took down, for
    crashes and stops (starting that broker heals it); ``nodes`` the nodes it hits
    (``broker-<id>``, ``store``), traced with ``fault_injected`` for the run's report."""

    id: str
    kind: str
    heal: Callable[[], Awaitable[None]]
    description: str
    nodes: tuple[str, ...]
    broker: int | None = None
    instant: bool = False  # over once injected: nothing to heal


async def _nothing() -> None:
    """The heal of an instantaneous fault."""


async def inject(h: Harness, fault: Fault, fault_id: str) -> ActiveFault:
    """Carry out ``fault``; an ``instant`` one has nothing to heal."""
    match fault:
        case CrashBroker() | KillController():
            selector: BrokerSel = fault.broker if isinstance(fault, CrashBroker) else "controller"
            broker = await _running(h, selector)
            await h.crash_broker(broker)
            return _down(h, fault_id, fault, broker, f"broker {broker} crashed")
        case KillCoordinator():
            coordinator = await find_coordinator(h, fault.group)
            if coordinator is None or not h.is_running(coordinator):
                raise ChaosStepError(f"group {fault.group} has no running coordinator")
            if fault.graceful:
                await h.stop_broker(coordinator, timeout=RESTART_TIMEOUT)
                how = "stopped"
            else:
                await h.crash_broker(coordinator)
                how = "crashed"
            text = f"broker {coordinator} (coordinator of group {fault.group}) {how}"
            return _down(h, fault_id, fault, coordinator, text)
        case StopBroker():
            broker = await _running(h, fault.broker)
            await h.stop_broker(broker, timeout=RESTART_TIMEOUT)
            return _down(h, fault_id, fault, broker, f"broker {broker} stopped")
        case PauseBroker():
            broker = await _running(h, fault.broker)
            await h.pause_broker(broker)

            async def resume() -> None:
                await h.resume_broker(broker)

            return ActiveFault(
                fault_id,
                "pause_broker",
                resume,
                f"broker {broker} paused",
                (broker_node_id(broker),),
            )
        case PauseMember():
            gate = h.member_gates.get((fault.group, fault.member))
            if gate is None:
                raise ChaosStepError(
                    f"no member {fault.member} of group {fault.group} (started by a consume step)"
                )
            gate.close()

            async def thaw() -> None:
                gate.open()

            return ActiveFault(
                fault_id,
                "pause_member",
                thaw,
                f"member {fault.group}-{fault.member} paused",
                (),
            )
        case NetworkPartition():
            network = _network(h)
            groups = [sorted({await _node(h, m) for m in group}) for group in fault.groups]
            rule_id = network.partition(*groups)
            return ActiveFault(
                fault_id,
                "partition",
                _remove_rule(h, rule_id),
                " | ".join(",".join(g) for g in groups),
                tuple(sorted({node for group in groups for node in group})),
            )
        case DropMessages() | DelayMessages() | DuplicateMessages() | ReorderMessages():
            rule = await _rule(h, fault)
            rule_id = _network(h).add_rule(rule)
            return ActiveFault(
                fault_id,
                _kind(fault),
                _remove_rule(h, rule_id),
                _text(rule),
                tuple(sorted({*(rule.match.src or ()), *(rule.match.dst or ())})),
            )
        case ExpireSession():
            broker = await _running(h, fault.broker)
            status = await h.status(broker)
            if status is None or not status.registered:
                raise ChaosStepError(f"broker {broker} has no store session to expire")
            await h.expire_session(broker, status.session_id)
            return ActiveFault(
                fault_id,
                "expire_session",
                _nothing,
                f"broker {broker}'s session {status.session_id} expired",
                (broker_node_id(broker), "store"),
                instant=True,
            )
        case SlowStore():
            store = _embedded(h)
            store.set_latency(fault.latency)

            async def normal_speed() -> None:
                store.set_latency(0.0)

            return ActiveFault(
                fault_id, "slow_store", normal_speed, f"{fault.latency}s", ("store",)
            )
        case DiskFailure():
            broker = await h.resolve(fault.broker)
            disk = h.disk(broker)
            dirs = h.log_dirs(broker)
            if fault.log_dir >= len(dirs):
                raise ChaosStepError(
                    f"broker {broker} has {len(dirs)} log dir(s): no log_dir {fault.log_dir}"
                )
            where = dirs[fault.log_dir]
            if fault.entry is not None:
                where = where / fault.entry
            if fault.readonly:
                failing = disk.unwritable(where)
            else:
                ops = None if fault.ops is None else [DiskOp(op) for op in fault.ops]
                failing = disk.fail(where, ops, times=fault.times)

            async def repaired() -> None:
                if failing in disk.faults:
                    disk.heal(failing)

            if fault.readonly:
                what = "mutating operations fail (EROFS)"
            else:
                what = f"{', '.join(sorted(failing.ops))} fail (EIO)"
            if fault.times is not None:
                what += f" {fault.times} time(s)"
            place = f"logs/broker-{broker}" + ("" if fault.entry is None else f"/{fault.entry}")
            return ActiveFault(
                fault_id,
                "disk_failure",
                repaired,
                f"{what} under {place}",
                (broker_node_id(broker),),
            )
        case ClockSkew():
            broker = await _running(h, fault.broker)
            clock = h.cluster.nodes[broker].clock  # the node's own: its store
            true_skew, true_rate = clock.skew, clock.rate  # connection and channel read it too
            clock.adjust(skew=fault.skew, rate=fault.rate)

            async def restored() -> None:
                clock.adjust(skew=true_skew, rate=true_rate)

            return ActiveFault(
                fault_id,
                "clock_skew",
                restored,
                f"broker {broker}: skew {fault.skew}s, rate {fault.rate}",
                (broker_node_id(broker),),
            )
        case _:
            raise AssertionError(f"not a fault: {fault!r}")


def _text(rule: Rule) -> str:
    """A rule as sorted JSON (its sets in hash order would make traces differ)."""
    return msgspec.json.encode(msgspec.to_builtins(rule, order="deterministic")).decode()


def _kind(fault: Fault) -> str:
    tag = type(fault).__struct_config__.tag
    assert isinstance(tag, str)
    return tag


def _down(h: Harness, fault_id: str, fault: Fault, broker: int, text: str) -> ActiveFault:
    async def restart() -> None:
        if not h.is_running(broker):
            await h.start_broker(broker, timeout=RESTART_TIMEOUT)

    return ActiveFault(
        fault_id, _kind(fault), restart, text, (broker_node_id(broker),), broker=broker
    )


async def _running(h: Harness, selector: BrokerSel) -> int:
    broker = await h.resolve(selector)
    if not h.is_running(broker):
        raise ChaosStepError(f"broker {broker} is not running")
    return broker


async def _node(h: Harness, selector: BrokerSel) -> str:
    return broker_node_id(await h.resolve(selector))


def _network(h: Harness) -> Network:
    network = h.cluster.network
    if network is None:
        raise ChaosStepError("the cluster's network is not running")
    return network


def _embedded(h: Harness) -> EmbeddedStore:
    store = h.store
    if not isinstance(store, EmbeddedStore):
        raise ChaosStepError("slow_store needs the embedded store")
    return store


def _remove_rule(h: Harness, rule_id: int) -> Callable[[], Awaitable[None]]:
    async def remove() -> None:
        network = h.cluster.network
        if network is not None and rule_id in network.rules:
            network.remove_rule(rule_id)

    return remove


async def _rule(
    h: Harness, fault: DropMessages | DelayMessages | DuplicateMessages | ReorderMessages
) -> Drop | Delay | Duplicate | Reorder:
    every = [broker_node_id(b) for b in range(h.brokers)]
    src = every if fault.src is None else [await _node(h, s) for s in fault.src]
    dst = every if fault.dst is None else [await _node(h, s) for s in fault.dst]
    match = Match.where(src=src, dst=dst, types=fault.types)
    match fault:
        case DropMessages():
            return Drop(probability=fault.probability, match=match)
        case DelayMessages():
            return Delay(seconds=fault.seconds, jitter=fault.jitter, match=match)
        case DuplicateMessages():
            return Duplicate(probability=fault.probability, match=match)
        case ReorderMessages():
            return Reorder(
                probability=fault.probability,
                window=fault.window,
                max_hold=fault.max_hold,
                match=match,
            )
        case _:
            assert_never(fault)
