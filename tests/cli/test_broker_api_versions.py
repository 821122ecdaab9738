"""``kemu broker-api-versions``, Kafka 2.7's ``kafka-broker-api-versions.sh``: the text of
one broker's table as ``NodeApiVersions.toString(true)`` prints it for a 2.7 client, the
command against a running ``kemu up``, and bad command lines and unreachable servers in
one line with exit status 1."""

from __future__ import annotations

import io
import re
import socket
from pathlib import Path

import pytest

from cluster.cli.broker_api_versions import api_versions_text, main
from cluster.kafka.apis import KAFKA_2_7_API_NAMES, KAFKA_2_7_API_VERSIONS
from cluster.launch.cluster import SUPPORTED_APIS
from tests.support.kemu_commands import kemu, running_up


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_a_table_reads_as_node_api_versions_prints_it() -> None:
    """Each advertised key with its range (one version alone), the newest version a 2.7
    client can use, or why none; every API a 2.7 client knows that the broker lacks as
    UNSUPPORTED; a key 2.7 does not know as UNKNOWN; ascending, one per line."""
    text = api_versions_text({3: (0, 12), 18: (0, 3), 27: (0, 0), 36: (3, 4), 60: (0, 1)})
    lines = text.split("\n")
    assert (lines[0], lines[-1]) == ("(", ")")
    body = [line.removeprefix("\t").removesuffix(",") for line in lines[1:-1]]
    assert all(line.startswith("\t") for line in lines[1:-1])
    assert all(line.endswith(",") for line in lines[1:-2])
    assert not lines[-2].endswith(",")
    assert body[:5] == [
        "Produce(0): UNSUPPORTED",
        "Fetch(1): UNSUPPORTED",
        "ListOffsets(2): UNSUPPORTED",
        "Metadata(3): 0 to 12 [usable: 9]",
        "LeaderAndIsr(4): UNSUPPORTED",
    ]
    assert "ApiVersions(18): 0 to 3 [usable: 3]" in body
    assert "WriteTxnMarkers(27): 0 [usable: 0]" in body
    assert "SaslAuthenticate(36): 3 to 4 [unusable: node too new]" in body
    assert body[-2:] == ["UpdateFeatures(57): UNSUPPORTED", "UNKNOWN(60): 0 to 1"]
    assert not any(line.startswith(("Vote(", "DescribeQuorum(")) for line in body)  # disabled
    assert len(body) == len(KAFKA_2_7_API_VERSIONS) + 1  # every 2.7 API, and key 60


@pytest.mark.slow
def test_every_broker_of_a_running_cluster_is_listed(tmp_path: Path) -> None:
    """Against a three-broker ``kemu up``: one block per broker, ``host:port (id: N rack:
    null) -> (``, then its table as the 2.7 tool prints it: what kemu serves usable at 2.7's
    versions, the rest UNSUPPORTED."""
    with running_up(tmp_path) as up:
        done = kemu("broker-api-versions", "--bootstrap-server", up.bootstrap.split(",")[1])
    assert (done.returncode, done.stderr) == (0, "")
    heads = re.findall(r"^(\S+):(\d+) \(id: (\d+) rack: null\) -> \($", done.stdout, re.M)
    ports = sorted(int(hp.rsplit(":", 1)[1]) for hp in up.bootstrap.split(","))
    assert sorted(int(port) for _, port, _ in heads) == ports
    assert sorted(int(node_id) for *_, node_id in heads) == [0, 1, 2]
    blocks = done.stdout.split(" -> ")[1:]
    assert len(blocks) == 3
    for block in blocks:
        table = block[: block.index("\n)\n") + 2]
        assert table.count("\n\t") == len(KAFKA_2_7_API_VERSIONS)
        assert "\tMetadata(3): 0 to 9 [usable: 9],\n" in table
        assert "\tApiVersions(18): 0 to 3 [usable: 3],\n" in table
        assert "\tLeaderAndIsr(4): UNSUPPORTED,\n" in table
        assert table.endswith("\tUpdateFeatures(57): UNSUPPORTED\n)")
        for key, (low, high) in SUPPORTED_APIS.items():
            versions = f"{low} to {high}" if low < high else str(low)
            assert f"\t{KAFKA_2_7_API_NAMES[key]}({key}): {versions} [usable: {high}]" in table
        assert table == api_versions_text({**SUPPORTED_APIS, 18: (0, 3)})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_server_is_one_line() -> None:
    """No bootstrap server answers Metadata: Kafka's exception message, one line on
    stderr, nothing on stdout, exit status 1."""
    first, second = free_port(), free_port()
    status, out, err = run("--bootstrap-server", f"127.0.0.1:{first},localhost:{second}")
    assert (status, out) == (1, "")
    assert err == (
        f"Request METADATA failed on brokers List(127.0.0.1:{first} (id: -1 rack: null),"
        f" localhost:{second} (id: -2 rack: null))\n"
    )


@pytest.mark.parametrize(
    ("argv", "first_line", "usage"),
    [
        ((), "This tool helps to retrieve broker version information.", True),
        (("--help",), "This tool helps to retrieve broker version information.", True),
        (("--command-config", "x"), 'Missing required argument "[bootstrap-server]"', True),
        (("--bootstrap-server",), "Option bootstrap-server requires an argument", False),
        (("--bogus", "1"), "bogus is not a recognized option", False),
        (("--bootstrap-server", "nohost"), "Invalid url in bootstrap.servers: nohost", False),
    ],
)
def test_bad_command_lines_are_refused_before_anything_is_sent(
    argv: tuple[str, ...], first_line: str, usage: bool
) -> None:
    """Kafka's messages, with the options listed after a missing argument or a help
    request; exit status 1, nothing on stdout."""
    status, out, err = run(*argv)
    assert (status, out) == (1, "")
    lines = err.splitlines()
    assert lines[0] == first_line
    assert ("Option  Description" in lines) is usage
    if usage:
        assert any(line.startswith("--bootstrap-server <server(s) to use") for line in lines)
    else:
        assert len(lines) == 1


def test_version_and_the_kemu_entry_point() -> None:
    """``--version`` prints Kafka's version; the command is ``kemu broker-api-versions``."""
    assert run("--bootstrap-server", "x:1", "--version") == (0, "2.7.2 (Commit:kemu)\n", "")
    done = kemu("broker-api-versions", "--version")
    assert (done.returncode, done.stdout) == (0, "2.7.2 (Commit:kemu)\n")
