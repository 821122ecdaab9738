"""``kemu zk ls|get|tree`` on the store of a running cluster (a real ZooKeeper, reached by
address, and the embedded store, handed in-process): children, data with its stat line,
the indented tree, and one clear error line for a missing node."""

from __future__ import annotations

import io
import re

import pytest

from cluster.cli.zk import ZkCommandError, format_data, run_zk_command, zk_main
from tests.support.topics_harness import STORE, Harness


async def _zk(harness: Harness, command: str, path: str) -> str:
    out = io.StringIO()
    address = harness.zookeeper or "embedded://in-process"
    store = None if harness.zookeeper else harness.store  # None: opened at its address
    await run_zk_command(command, path, address=address, out=out, store=store)
    return out.getvalue()


@pytest.mark.asyncio
async def test_ls_get_and_tree_show_the_clusters_znodes(store_cluster: Harness) -> None:
    """ls lists the broker ids, get prints a topic's assignment and its stat line, tree
    walks a subtree with two spaces per level."""
    await store_cluster.topics("--create", "--topic", "t", "--replica-assignment", "1:2", via=STORE)
    assert await _zk(store_cluster, "ls", "/brokers/ids") == "0\n1\n2\n"
    data, stat = (await _zk(store_cluster, "get", "/brokers/topics/t")).splitlines()
    assert data == (
        '{"version":2,"partitions":{"0":[1,2]},"adding_replicas":{},"removing_replicas":{}}'
    )
    assert re.fullmatch(
        r"czxid=0x[0-9a-f]+ mzxid=0x[0-9a-f]+ version=0 cversion=\d+ ephemeralOwner=0x0"
        r" numChildren=\d",
        stat,
    ), stat
    ephemeral = (await _zk(store_cluster, "get", "/brokers/ids/0")).splitlines()[1]
    assert not ephemeral.split("ephemeralOwner=")[1].startswith("0x0 ")
    tree = (await _zk(store_cluster, "tree", "/brokers")).splitlines()
    assert tree[:2] == ["/brokers", "  ids"]
    assert "    0" in tree
    assert "  topics" in tree
    assert "    t" in tree


@pytest.mark.asyncio
async def test_a_missing_node_is_one_error(store_cluster: Harness) -> None:
    """Every command on a missing node raises "Node does not exist: <path>"."""
    for command in ("ls", "get", "tree"):
        with pytest.raises(ZkCommandError, match=r"^Node does not exist: /nope$"):
            await _zk(store_cluster, command, "/nope")


def test_zk_main_reports_errors_on_one_line() -> None:
    """Without a running cluster the command fails with one line and exit status 1."""
    err = io.StringIO()
    status = zk_main("ls", "/", zookeeper=None, cluster_file="/nonexistent/cluster.json", err=err)
    assert status == 1
    assert err.getvalue().startswith("Error: no cluster file at /nonexistent/cluster.json")
    assert err.getvalue().count("\n") == 1
    bad = io.StringIO()
    assert zk_main("ls", "relative", zookeeper="127.0.0.1:1", cluster_file=None, err=bad) == 1
    assert bad.getvalue() == "Error: path must start with '/': 'relative'\n"


def test_binary_data_is_shown_in_hex() -> None:
    """Data that is not printable UTF-8 is shown as hex."""
    assert format_data(b"\x00\x01") == "hex:0001"
    assert format_data("héllo\n".encode()) == "héllo\n"
