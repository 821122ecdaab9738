"""docs/metrics.md's table of names is what the Prometheus endpoint serves: a scrape of a
running one-broker cluster (its broker also the active controller) has exactly the
table's families, each standing for the MBean the table gives it, and the controller's
timers are exactly those the page lists, one per ``ControllerState`` that has one."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from cluster.launch.cluster import Cluster, ClusterSpec
from cluster.launch.control import ClusterLauncher
from cluster.launch.prometheus import exposition, metric_name
from tests.support.kemu_commands import REPO

pytestmark = pytest.mark.asyncio

PAGE = REPO / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(kafka\.\w+:type=\w+,name=[\w<>]+)` \| `(\w+)` ", re.MULTILINE)


def documented() -> dict[str, str]:
    """Prometheus name -> MBean, for each row of the page's table but the timers' one
    (``<State>RateAndTimeMs``)."""
    rows = ROW.findall(PAGE.read_text())
    assert len(rows) > 20
    return {name: mbean for mbean, name in rows if "<" not in mbean}


def documented_timers() -> set[str]:
    """The timers' MBean names the page lists after the table."""
    text = PAGE.read_text()
    section = text[text.index("The timers are one per `ControllerState`") :]
    section = " ".join(section[: section.index("\n\n")].split())
    named = set(re.findall(r"`(\w+RateAndTimeMs)`", section))
    states = section[section.index("`<State>RateAndTimeMs` for") : section.index("; none for")]
    states = states.removeprefix("`<State>RateAndTimeMs` for").replace(" and ", ", ")
    return named | {f"{state.strip()}RateAndTimeMs" for state in states.split(",")}


async def test_the_scrape_has_exactly_the_documented_families(tmp_path: Path) -> None:
    """Each family of a scrape is a row of the table with the MBean its help names, or a
    listed timer; every row and every listed timer is in the scrape."""
    async with anyio.create_task_group() as tg:
        spec = ClusterSpec(brokers=1, base_port=0, log_dir=tmp_path / "logs")
        cluster: Cluster = await tg.start(Cluster(spec).run)
        with anyio.fail_after(30):
            body, _ = exposition(await ClusterLauncher(cluster).cluster_metrics())
        tg.cancel_scope.cancel()
    helps = dict(re.findall(r"^# HELP (\w+) (kafka\.\S+)", body.decode(), re.MULTILINE))
    timers = {name: mbean for name, mbean in helps.items() if mbean.endswith("RateAndTimeMs")}
    others = {name: mbean for name, mbean in helps.items() if name not in timers}
    assert others == documented()
    assert {
        metric_name("controller", "ControllerStats", timer) for timer in documented_timers()
    } == set(timers)
    assert all(
        mbean == f"kafka.controller:type=ControllerStats,name={mbean.rpartition('=')[2]}"
        for mbean in timers.values()
    )
