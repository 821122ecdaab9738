"""The ``kemu`` command line.

Every failure a user can cause ends as one clear line on stderr and a non-zero exit, never
a traceback: ``KemuError`` and ``UsageError`` are caught here, once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from actors.runtime.clock import run_real
from cluster.cli.args import UsageError, key_values
from cluster.cli.trace import add_spark_conf_argument, add_trace_parser
from cluster.gc_settings import configure_gc
from cluster.logging import LOG_FORMATS, LOG_LEVELS, configure_logging
from protocol.errors import InconsistentClusterIdError, KemuError, unwrap_kemu_error

if TYPE_CHECKING:
    from cluster.launch.cluster import Advertised


def _cmd_demo(args: argparse.Namespace) -> int:
    from cluster.cli.demo import run_demo

    return run_demo(brokers=args.brokers, seed=args.seed, virtual=args.virtual)


def _cmd_up(args: argparse.Namespace) -> int:
    from actors.admin import ConfigError
    from cluster.cli.up import discard_failed_start, prepare_up, run_up, up_config
    from cluster.launch.cluster import ClusterSpec

    if args.brokers < 1:
        raise UsageError("--brokers must be at least 1")
    if args.zookeeper and args.store_port is not None:
        raise UsageError(
            "--store-port serves the embedded store; with --zookeeper the brokers use"
            " ZooKeeper and there is none to serve"
        )
    listener_host, port, advertised = _listeners(args)
    if port and port + args.brokers - 1 > MAX_PORT:
        what = "--port" if args.listeners is None else "--listeners"
        raise UsageError(
            f"{what} {port}: {args.brokers} brokers need ports {port}"
            f" to {port + args.brokers - 1}, beyond {MAX_PORT}"
        )
    racks: dict[int, str] = {}
    for key, value in key_values(args.rack, "--rack").items():
        if not key.isdigit() or int(key) >= args.brokers:
            raise UsageError(f"--rack {key}={value}: no broker {key}")
        racks[int(key)] = value
    spec = ClusterSpec(
        brokers=args.brokers,
        base_port=port,
        listener_host=listener_host,
        advertised=advertised,
        log_dir=Path(args.log_dir),
        zookeeper=args.zookeeper,
        racks=racks,
        config=up_config(args.brokers, key_values(args.config, "--config")),
        seed=args.seed,
        store_port=None if args.zookeeper else args.store_port or 0,
        metrics_port=args.metrics_port,
    )
    try:
        spec.broker_config()
    except ConfigError as exc:
        raise UsageError(str(exc).split(". Known names")[0]) from None
    cluster_file = Path(args.cluster_file)
    start = prepare_up(
        spec, cluster_file, default_cluster_file=args.cluster_file == DEFAULT_CLUSTER_FILE
    )
    trace = Path(args.trace) if args.trace else None

    def run() -> int:
        launch = run_up
        if args.processes:
            from cluster.launch.processes import run_up_processes

            launch = run_up_processes
        return run_real(
            lambda: launch(
                spec,
                cluster_file=cluster_file,
                trace=trace,
                on_ready=start.mark_ready,
                parent_pid=args.parent_pid,
            ),
            # Brokers in this process: a loop that can freeze one (`kemu broker pause`).
            freezable=not args.processes,
        )

    try:
        with unwrap_kemu_error():
            return run()
    except InconsistentClusterIdError as exc:
        if spec.zookeeper:
            raise
        # The embedded store is new at every start: a log dir kept from an earlier run is
        # another cluster's, as Kafka's brokers find it after their ZooKeeper was wiped.
        raise KemuError(
            f"{exc} (the embedded store of kemu up starts empty each time: give another"
            f" --log-dir, or remove {spec.log_dir})"
        ) from exc
    finally:
        discard_failed_start(start)


def _listeners(args: argparse.Namespace) -> tuple[str | None, int, Advertised | None]:
    """``kemu up``'s Kafka listeners: where they bind (None: loopback, the default), the
    first broker's port, and what is advertised (None: the listeners' own address). One
    warning line on stderr for listeners off loopback (PLAINTEXT, no authentication)."""
    from cluster.cli.listeners import check_routable, loopback, parse_advertised, parse_listener
    from cluster.launch.cluster import Advertised

    advertised = None
    if args.advertised_listeners is not None:
        one = parse_advertised(args.advertised_listeners)
        advertised = Advertised(host=one.host, port=one.port)
    if args.listeners is None:
        return None, DEFAULT_KAFKA_PORT if args.port is None else args.port, advertised
    if args.port is not None:
        raise UsageError(
            "--port and --listeners cannot be given together: the port is the listener's"
        )
    listener = parse_listener("--listeners", args.listeners)
    if advertised is None:  # the listener's own address is advertised
        check_routable("--listeners", args.listeners, listener.host)
    if not loopback(listener.host):
        print(
            f"kemu: warning: --listeners {args.listeners}: the Kafka listeners are not on"
            " loopback, and anyone who can reach them can use them (PLAINTEXT, no"
            " authentication)",
            file=sys.stderr,
            flush=True,
        )
    return listener.host, listener.port, advertised


def _cmd_broker(args: argparse.Namespace) -> int:
    from cluster.cli.broker import broker_main

    return broker_main(
        args.broker_command, getattr(args, "id", None), cluster_file=args.cluster_file
    )


def _cmd_broker_run(args: argparse.Namespace) -> int:
    from cluster.cli.broker import broker_run

    return broker_run(
        broker_id=args.id,
        zookeeper=args.zookeeper,
        listeners=args.listeners,
        advertised_listeners=args.advertised_listeners,
        log_dir=args.log_dir,
        config=key_values(args.config, "--config"),
    )


def _cmd_top(args: argparse.Namespace) -> int:
    from cluster.cli.top import top_main

    return top_main(cluster_file=args.cluster_file, interval=args.interval, once=args.once)


def _cmd_broker_process(args: argparse.Namespace) -> int:
    from actors.admin import BrokerConfig, ConfigError
    from cluster.launch.broker_process import BrokerProcessSpec, TapFactory, run_broker_process
    from cluster.launch.connect import parse_host_port

    peers: dict[int, tuple[str, int]] = {}
    for node, address in key_values(args.peer, "--peer").items():
        prefix, _, broker_id = node.rpartition("-")
        if prefix != "broker" or not broker_id.isdigit():
            raise UsageError(f"--peer {node}={address}: expected broker-ID=HOST:PORT")
        peers[int(broker_id)] = parse_host_port(address)
    spec = BrokerProcessSpec(
        broker_id=args.id,
        store=args.store,
        network_port=args.network_port,
        peers=peers,
        port=args.port,
        log_dir=Path(args.log_dir),
        host=args.host,
        listener_host=args.listener_host,
        advertised_host=args.advertised_host,
        advertised_port=args.advertised_port,
        rack=args.rack,
        config=key_values(args.config, "--config"),
        incarnation=args.incarnation,
        seed=args.seed,
        parent_pid=args.parent_pid,
        trace=None if args.trace is None else Path(args.trace),  # chaos real mode
        trace_origin=args.trace_origin,
    )
    try:
        BrokerConfig.from_overrides(dict(spec.config))
    except ConfigError as exc:
        raise UsageError(str(exc).split(". Known names")[0]) from None
    tap: TapFactory | None = None
    if spec.trace is not None:  # a real-mode chaos run reads the controller's requests too
        from cluster.chaos.tap import ControlTap

        tap = ControlTap
    return anyio.run(
        lambda: run_broker_process(spec, tap=tap), backend_options={"use_uvloop": True}
    )


def _cmd_topics(args: argparse.Namespace) -> int:
    from cluster.cli.topics import main as topics_main

    return topics_main(args.args)


def _cmd_kafka_tool(args: argparse.Namespace) -> int:
    """The console tools, each with its own jopt-style parser (``cluster.cli.<module>``)."""
    import importlib

    module = importlib.import_module(f"cluster.cli.{args.tool_module}")
    status: int = module.main(args.args)
    return status


def _cmd_zk(args: argparse.Namespace) -> int:
    from cluster.cli.zk import zk_main

    return zk_main(
        args.zk_command, args.path, zookeeper=args.zookeeper, cluster_file=args.cluster_file
    )


def _cmd_chaos(args: argparse.Namespace) -> int:
    from cluster.cli.chaos import chaos_main

    return chaos_main(args)


def _add_chaos_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = sub.add_parser("chaos", help="run chaos scenarios: faults, invariants, replays")
    chaos_sub = chaos.add_subparsers(dest="chaos_command", required=True, metavar="ACTION")
    run = chaos_sub.add_parser("run", help="run scenario files (docs/chaos.md) over seeds")
    check = chaos_sub.add_parser("check", help="validate scenario files without running them")
    for one in (run, check):
        one.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="a scenario YAML file")
        one.set_defaults(func=_cmd_chaos)
    schema = chaos_sub.add_parser(
        "schema",
        help="print the JSON Schema of a scenario (its shorthand expanded; docs/chaos.md)",
    )
    schema.set_defaults(func=_cmd_chaos)
    _add_campaign_parser(chaos_sub)
    seeds = run.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=int, help="the seed of the run (default 0)")
    seeds.add_argument("--seeds", metavar="A..B", help="every seed from A to B, inclusive")
    run.add_argument("--deterministic", action="store_true", help="virtual clock, one trace")
    run.add_argument(
        "--check-determinism", action="store_true", help="run twice, compare the traces"
    )
    run.add_argument("--out", metavar="DIR", help="run directories go here (.kemu/chaos)")
    run.add_argument("--verbose", action="store_true", help="print every step as it runs")
    run.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line on stderr (drawn only when stderr is a terminal)",
    )
    for one in (run, check):
        _add_log_options(one)
        one.add_argument(
            "--processes", action="store_true", help="one OS process per broker (real clock)"
        )
        one.add_argument(
            "--zookeeper",
            nargs="?",
            const="",
            metavar="HOST:PORT[/chroot]",
            help="a real ZooKeeper (alone: start a throwaway local one)",
        )


def _add_campaign_parser(chaos_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    campaign = chaos_sub.add_parser(
        "campaign",
        help="run scenarios over seeds as a Spark job, deterministic mode (docs/spark.md)",
    )
    campaign.add_argument("scenarios", nargs="+", metavar="SCENARIO", help="a scenario YAML file")
    campaign.add_argument(
        "--seeds", required=True, metavar="A..B", help="every seed from A to B, inclusive"
    )
    campaign.add_argument(
        "--master", help="a Spark master URL (default local[*], or spark-submit's)"
    )
    campaign.add_argument(
        "--out",
        metavar="DIR",
        help="run directories go here, a path every executor can write (.kemu/chaos-campaign)",
    )
    campaign.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_spark_conf_argument(campaign)
    _add_log_options(campaign)
    campaign.set_defaults(func=_cmd_chaos_campaign)


def _cmd_chaos_campaign(args: argparse.Namespace) -> int:
    from cluster.cli.chaos import chaos_main
    from cluster.cli.trace import spark_conf

    args.spark_conf = spark_conf(args)
    return chaos_main(args)


def _cmd_reassign(args: argparse.Namespace) -> int:
    from cluster.cli.reassign import main as reassign_main

    return reassign_main(args.args)


def _cmd_leader_election(args: argparse.Namespace) -> int:
    from cluster.cli.leader_election import main as leader_election_main

    return leader_election_main(args.args)


def _add_reassignment_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for name, text, func in (
        (
            "reassign-partitions",
            "kafka-reassign-partitions.sh --generate|--execute|--verify|--cancel|--list (--help)",
            _cmd_reassign,
        ),
        (
            "leader-election",
            "kafka-leader-election.sh (--bootstrap-server, or the ZooKeeper path; --help)",
            _cmd_leader_election,
        ),
    ):
        one = sub.add_parser(name, help=text, add_help=False, prefix_chars="\0")
        one.add_argument("args", nargs=argparse.REMAINDER)  # the command's jopt-style parser
        one.set_defaults(func=func)


def _runs_brokers(args: argparse.Namespace) -> bool:
    """``kemu up``, ``kemu _broker``, ``kemu broker run`` and ``kemu chaos``: they take
    ``--log-level``/``--log-format`` after their name too, and each broker they run writes
    its log files (cluster.logging)."""
    if args.command == "broker":
        return bool(args.broker_command == "run")
    return args.command in ("up", "_broker", "chaos")


DEFAULT_CLUSTER_FILE = ".kemu/cluster.json"
MAX_PORT = 65_535
DEFAULT_KAFKA_PORT = 9092  # Kafka's default listener port


def _port(text: str) -> int:
    """A TCP port argument: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (0 to {MAX_PORT})")
    return port


def _pid(text: str) -> int:
    """A process id argument: a positive integer."""
    try:
        pid = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if pid < 1:
        raise argparse.ArgumentTypeError(f"{pid} is not a process id (1 or more)")
    return pid


def _quiet_stdout() -> None:
    """After the reader of stdout went away (``kemu ... | head``): point stdout at
    /dev/null, so that the interpreter's last flush does not fail again at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _add_log_options(parser: argparse.ArgumentParser, *, argparse_default: bool = False) -> None:
    """``--log-level`` and ``--log-format``: on ``kemu`` itself (``kemu --log-level INFO
    up``) and after a command that runs brokers (``kemu up --log-level INFO``), where they
    are only set when given (``argparse.SUPPRESS``), so that they do not undo the first."""

    def default(value: str | None) -> str | None:
        return value if argparse_default else argparse.SUPPRESS

    parser.add_argument(
        "--log-level",
        default=default(None),
        type=str.upper,
        choices=LOG_LEVELS,
        help="the level of stderr and of the brokers' log files: "
        + ", ".join(LOG_LEVELS)
        + " (default WARNING on stderr, INFO in the files; DEBUG adds every message"
        " between actors)",
    )
    parser.add_argument(
        "--log-format",
        default=default("console"),
        choices=LOG_FORMATS,
        help="console lines (default) or one JSON object per line",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kemu", description="Emulate a ZooKeeper-mode Apache Kafka 2.7 cluster."
    )
    _add_log_options(parser, argparse_default=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="a live smoke demo of the runtime, network and store")
    demo.add_argument("--brokers", type=int, default=3, help="number of broker nodes (default 3)")
    demo.add_argument("--seed", type=int, default=1, help="seed of the run (default 1)")
    demo.add_argument(
        "--virtual", action="store_true", help="run on the virtual clock (deterministic)"
    )
    demo.set_defaults(func=_cmd_demo)

    up = sub.add_parser("up", help="launch a local cluster and run it until Ctrl-C")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--port", type=_port, help="broker i listens on 127.0.0.1:PORT+i (default 9092; 0: any)"
    )
    up.add_argument(
        "--listeners",
        metavar="PLAINTEXT://HOST:PORT",
        help="where the Kafka listeners bind, as Kafka's listeners (broker i on PORT+i;"
        " instead of --port)",
    )
    up.add_argument(
        "--advertised-listeners",
        metavar="PLAINTEXT://HOST:PORT",
        help="what the brokers tell clients, as Kafka's advertised.listeners (broker i at"
        " PORT+i; port 0: the bound one); default: the listeners",
    )
    up.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]", help="use a real ZooKeeper")
    up.add_argument("--log-dir", default=".kemu/logs", help="root of the brokers' log dirs")
    up.add_argument("--rack", action="append", default=[], metavar="ID=RACK")
    up.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config by its Kafka name (repeatable)",
    )
    up.add_argument("--trace", metavar="FILE", help="write the trace (JSON lines) here")
    up.add_argument("--seed", type=int, default=0, help="seed of the cluster's randomness")
    up.add_argument("--cluster-file", default=DEFAULT_CLUSTER_FILE, metavar="PATH")
    up.add_argument(
        "--store-port",
        type=_port,
        help="port serving the embedded store to other processes (default: any; not with"
        " --zookeeper)",
    )
    up.add_argument(
        "--metrics-port",
        type=_port,
        default=0,
        help="loopback port of the Prometheus endpoint, GET /metrics (default: any)",
    )
    up.add_argument(
        "--processes",
        action="store_true",
        help="run each broker in a process of its own (the store stays in this one)",
    )
    up.add_argument(
        "--parent-pid",
        type=_pid,
        metavar="PID",
        help="stop cleanly (as on SIGTERM) once process PID is gone: for a program that"
        " starts kemu up and may be killed before it can stop it",
    )
    _add_log_options(up)
    up.set_defaults(func=_cmd_up)

    broker = sub.add_parser(
        "broker",
        help="run one broker (kafka-server-start.sh); stop, kill, start, pause or resume a broker"
        " of a running `kemu up`; show them all",
    )
    broker_sub = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    for action, text in (
        ("stop", "graceful stop (controlled shutdown, session closed)"),
        ("kill", "crash: SIGKILL with --processes; its session is left to expire"),
        ("start", "start a stopped or killed broker again (a new broker epoch)"),
        ("pause", "freeze a broker whole (SIGSTOP with --processes); its session expires"),
        ("resume", "let a paused broker run on (SIGCONT with --processes)"),
        ("status", "every broker's state, pid, endpoint and epoch, and the controller"),
    ):
        one = broker_sub.add_parser(action, help=text, description=text)
        if action != "status":
            one.add_argument("id", type=int, metavar="ID", help="the broker id")
        one.add_argument(
            "--cluster-file",
            metavar="PATH",
            help="the cluster file of a running `kemu up` (default .kemu/cluster.json)",
        )
        one.set_defaults(func=_cmd_broker)
    _add_broker_run_parser(broker_sub)

    top = sub.add_parser(
        "top",
        help="a live view of a running `kemu up`: brokers, controller, partitions at risk",
        description="A live view of a running `kemu up`, redrawn every --interval seconds"
        " until q or Ctrl-C: brokers, the controller and its event queue, topics, offline,"
        " under-replicated and under-min-ISR partitions, pending deletions and reassignments.",
    )
    top.add_argument("--once", action="store_true", help="print one view and exit")
    top.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="seconds between two refreshes (default 1)",
    )
    top.add_argument(
        "--cluster-file",
        metavar="PATH",
        help="the cluster file of a running `kemu up` (default .kemu/cluster.json)",
    )
    top.set_defaults(func=_cmd_top)

    # One broker process of `kemu up --processes`, started by it (not listed in the help;
    # the name is cluster.launch.broker_process.BROKER_PROCESS_COMMAND).
    process = sub.add_parser("_broker", description="one broker process of `kemu up --processes`")
    process.add_argument("--id", type=int, required=True, help="the broker id")
    process.add_argument(
        "--store", required=True, help="embedded://HOST:PORT or HOST:PORT[/chroot] (ZooKeeper)"
    )
    process.add_argument("--host", default="127.0.0.1", help="the host to listen on")
    process.add_argument(
        "--network-port", type=int, required=True, help="the inter-node (actor) port"
    )
    process.add_argument(
        "--peer", action="append", default=[], metavar="broker-ID=HOST:PORT", help="another broker"
    )
    process.add_argument("--port", type=int, default=9092, help="the Kafka listener (0: any)")
    process.add_argument("--listener-host", help="where the Kafka listener binds (default --host)")
    process.add_argument("--advertised-host", help="the host it registers (default: bound)")
    process.add_argument("--advertised-port", type=int, default=0, help="0: the bound port")
    process.add_argument("--log-dir", default=".kemu/logs", help="root of the brokers' log dirs")
    process.add_argument("--rack")
    process.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    process.add_argument("--seed", type=int, default=0)
    process.add_argument("--incarnation", type=int, default=0, help="earlier runs of this broker")
    process.add_argument("--parent-pid", type=int, help="stop once this process is gone")
    # chaos real mode (cluster.chaos): the process's own trace, times from a shared origin
    process.add_argument("--trace", metavar="FILE", help="write this process's trace here")
    process.add_argument("--trace-origin", type=float, default=0.0, help="CLOCK_MONOTONIC zero")
    _add_log_options(process)
    process.set_defaults(func=_cmd_broker_process)

    topics = sub.add_parser(
        "topics",
        help="kafka-topics.sh: create, list, describe, alter, delete topics (--help for options)",
        add_help=False,
        prefix_chars="\0",  # every argument goes to the command's own jopt-style parser
    )
    topics.add_argument("args", nargs=argparse.REMAINDER)
    topics.set_defaults(func=_cmd_topics)

    for name, module, summary in (
        (
            "console-producer",
            "console_producer",
            "kafka-console-producer.sh: stdin lines to a topic",
        ),
        (
            "console-consumer",
            "console_consumer",
            "kafka-console-consumer.sh: a topic's records to stdout",
        ),
        ("get-offsets", "get_offsets", "GetOffsetShell: the earliest, latest or by-time offsets"),
        ("dump-log", "dump_log", "kafka-dump-log.sh: print log segment and index files"),
        (
            "broker-api-versions",
            "broker_api_versions",
            "kafka-broker-api-versions.sh: each broker's API versions",
        ),
        (
            "consumer-groups",
            "consumer_groups",
            "kafka-consumer-groups.sh: list, describe, delete groups; reset, delete offsets",
        ),
        ("configs", "configs", "kafka-configs.sh: describe and alter topic and broker configs"),
        ("log-dirs", "log_dirs", "kafka-log-dirs.sh: each broker's log dirs and partition sizes"),
    ):
        tool = sub.add_parser(
            name, help=f"{summary} (--help for options)", add_help=False, prefix_chars="\0"
        )
        tool.add_argument("args", nargs=argparse.REMAINDER)
        tool.set_defaults(func=_cmd_kafka_tool, tool_module=module)

    zk = sub.add_parser("zk", help="look into the metadata store: ls, get, tree")
    zk.add_argument("zk_command", choices=("ls", "get", "tree"), metavar="{ls,get,tree}")
    zk.add_argument("path", help="an absolute znode path, e.g. /brokers/topics")
    where = zk.add_mutually_exclusive_group()
    where.add_argument(
        "--zookeeper", metavar="ADDRESS", help="HOST:PORT[/chroot] or embedded://HOST:PORT"
    )
    where.add_argument(
        "--cluster-file",
        metavar="PATH",
        help="the cluster file of a running `kemu up` (default .kemu/cluster.json)",
    )
    zk.set_defaults(func=_cmd_zk)

    add_trace_parser(sub)  # kemu trace export|analyze|diff|replay (cluster.cli.trace)
    _add_chaos_parser(sub)  # kemu chaos
    _add_reassignment_parsers(sub)  # kemu reassign-partitions, kemu leader-election
    return parser


def _add_broker_run_parser(broker_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``kemu broker run``: one broker joining the cluster its ZooKeeper holds, as
    ``kafka-server-start.sh`` (docs/scale-out.md)."""
    text = "run one broker that joins the cluster its ZooKeeper holds (kafka-server-start.sh)"
    run = broker_sub.add_parser("run", help=text, description=text)
    run.add_argument("--id", type=int, required=True, help="broker.id")
    run.add_argument(
        "--zookeeper",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...][/chroot]",
        help="zookeeper.connect: the ensemble holding the cluster",
    )
    run.add_argument(
        "--listeners",
        required=True,
        metavar="PLAINTEXT://HOST:PORT",
        help="where the Kafka listener binds (listeners); its host also carries the"
        " broker's internal port",
    )
    run.add_argument(
        "--advertised-listeners",
        metavar="PLAINTEXT://HOST:PORT",
        help="what it registers and clients are told (advertised.listeners); default: the"
        " listener (port 0: the bound one)",
    )
    run.add_argument("--log-dir", required=True, help="log.dirs: the broker's log dir")
    run.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config by its Kafka name (repeatable)",
    )
    _add_log_options(run)
    run.set_defaults(func=_cmd_broker_run)


def main(argv: Sequence[str] | None = None) -> int:
    """The ``kemu`` command. Without ``argv`` it reads the process's own command line: it
    is the program, so it also sets the process's collector thresholds (a caller that
    passes ``argv``, such as a test, keeps its own; ``cluster.gc_settings``)."""
    if argv is None:
        configure_gc()
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(
        level=args.log_level,
        json=args.log_format == "json",
        broker_files=_runs_brokers(args),
    )
    try:
        # anyio's task groups wrap what fails in them: a user's error is the one inside
        with unwrap_kemu_error(BrokenPipeError):
            status: int = args.func(args)
    except BrokenPipeError:
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    except KemuError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    sys.exit(main())
