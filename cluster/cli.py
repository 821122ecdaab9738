"""The ``kemu`` command line.

Every failure a user can cause ends as one clear line on stderr and a non-zero exit, never
a traceback: ``KemuError`` and ``UsageError`` are caught here, once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from cluster.logging import configure_logging
from protocol.errors import KemuError


class UsageError(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


def _cmd_demo(args: argparse.Namespace) -> int:
    from cluster.demo import run_demo

    return run_demo(brokers=args.brokers, seed=args.seed, virtual=args.virtual)


def _cmd_trace_export(args: argparse.Namespace) -> int:
    from cluster.trace import export_parquet

    src = Path(args.trace)
    if not src.is_file():
        raise UsageError(f"trace file {src} does not exist")
    rows = export_parquet(src, args.output)
    print(f"wrote {rows} events to {args.output}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kemu", description="Emulate a ZooKeeper-mode Apache Kafka control plane."
    )
    parser.add_argument("--log-level", default="WARNING", help="stderr log level (default WARNING)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="a live smoke demo of the runtime, network and store")
    demo.add_argument("--brokers", type=int, default=3, help="number of broker nodes (default 3)")
    demo.add_argument("--seed", type=int, default=1, help="seed of the run (default 1)")
    demo.add_argument(
        "--virtual", action="store_true", help="run on the virtual clock (deterministic)"
    )
    demo.set_defaults(func=_cmd_demo)

    trace = sub.add_parser("trace", help="work with trace files")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True, metavar="ACTION")
    export = trace_sub.add_parser("export", help="export a JSONL trace to Parquet")
    export.add_argument("trace", help="the JSONL trace file")
    export.add_argument("output", help="the Parquet file to write")
    export.set_defaults(func=_cmd_trace_export)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(level=args.log_level.upper())
    try:
        status: int = args.func(args)
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
