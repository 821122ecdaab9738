#!/usr/bin/env bash
# Benchmarks, side by side in one run (see cluster/bench/suite.py): rows [1] to [6], then the
# deterministic chaos campaign's simulated-to-wall ratio [7], 100 brokers / 100,000
# partitions in one process [8] (a few minutes so far), and the trace analysis + diff of a
# pair of 10M-event traces, Spark next to pandas [9] (about 15 minutes on 2 cores;
# --analysis-events 1000000 for a quick look), and confluent-kafka against kemu up and
# librdkafka's mock cluster [10] (produce MB/s, latency, a read from the start), and the
# bulk deletion of row [5]'s topics next to their creation [11], and the campaign as a Spark
# job on one and two executors of a loopback standalone cluster next to kemu chaos run in one
# and two processes [12] (--spark-campaign-seeds, default 2), and a controlled shutdown then
# a controller failover on 10 brokers holding 100,000 partitions [13]
# (--failover-topics, default 1000). Starts a throwaway local
# ZooKeeper for the store comparison and stops it afterwards.
# Usage: scripts/bench.sh [--ops N] [--store-ops N] [--repeat N] [--only ROWS]
#                         [--campaign-seeds N] [--scale-topics N] [--analysis-events N]
#                         [--data-messages N] [--spark-campaign-seeds N]
#                         [--failover-topics N] [--quiet]
# On a terminal the long rows ([7]-[11], [13]) draw their progress on stderr; --quiet: none.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_apt_packages zookeeper
ensure_venv
pip_install -e ".[test,spark]"  # row [9] runs Spark and pandas

port="${KEMU_BENCH_ZK_PORT:-21810}"
dir="$(mktemp -d)"
trap 'bash scripts/zookeeper.sh stop --port "$port" --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash scripts/zookeeper.sh start --port "$port" --dir "$dir" >/dev/null
"$VENV/bin/python" -m cluster.bench --zookeeper "127.0.0.1:$port" "$@"
