#!/usr/bin/env bash
# README command 1: install kemu into .venv and run the live demo — a 3-broker cluster on
# the embedded store (`kemu up`), administered with `kemu topics` like kafka-topics.sh:
# a topic with automatic and one with manual replica assignment, described, partitions
# added, the znodes and the log directories the cluster wrote, records produced and
# consumed with the console tools, then one topic deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_venv
pip_install -e .
kemu="$VENV/bin/kemu"

work="$(mktemp -d "${TMPDIR:-/tmp}/kemu-demo.XXXXXX")"
cluster_file="$work/cluster.json"
cleanup() {
  if [ -n "${up_pid:-}" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -INT "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

run() { printf '\n$ kemu %s\n' "$*"; "$kemu" "$@"; }

printf '$ kemu up --brokers 3 --port 0 --log-dir %s/logs\n' "$work"
"$kemu" up --brokers 3 --port 0 --log-dir "$work/logs" --cluster-file "$cluster_file" &
up_pid=$!
for _ in $(seq 1 200); do   # up to 20 s for the readiness table
  [ -s "$cluster_file" ] && break
  kill -0 "$up_pid" 2>/dev/null || { echo "kemu up failed" >&2; exit 1; }
  sleep 0.1
done
[ -s "$cluster_file" ] || { echo "kemu up did not become ready" >&2; exit 1; }
store="$("$VENV/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["store"])' "$cluster_file")"
cf=(--cluster-file "$cluster_file")

run topics "${cf[@]}" --create --topic orders --partitions 3 --replication-factor 2
run topics "${cf[@]}" --create --topic audit.log --replica-assignment 0:1,1:2,2:0 --config retention.ms=3600000
run topics "${cf[@]}" --list
run topics "${cf[@]}" --describe
run topics "${cf[@]}" --alter --topic orders --partitions 6
run topics "${cf[@]}" --describe --topic orders
run topics --zookeeper "$store" --describe --topic audit.log
run zk "${cf[@]}" get /brokers/topics/orders
run zk "${cf[@]}" get /brokers/topics/orders/partitions/4/state
printf '\n$ ls %s/logs/broker-0\n' "$work"
ls "$work/logs/broker-0"
# Data: stdin lines as keyed records (acks=all: the followers have them before the answer),
# read back from the beginning, the partitions' end offsets, and the stored batch.
printf '\n$ printf '"'"'alice:1\\nbob:2\\ncarol:3\\n'"'"' | kemu console-producer %s --topic orders --property parse.key=true --property key.separator=: --producer-property acks=all\n' "${cf[*]}"
printf 'alice:1\nbob:2\ncarol:3\n' | "$kemu" console-producer "${cf[@]}" --topic orders \
  --property parse.key=true --property key.separator=: --producer-property acks=all
run console-consumer "${cf[@]}" --topic orders --from-beginning --max-messages 3 --timeout-ms 10000 \
  --property print.partition=true --property print.key=true
run get-offsets "${cf[@]}" --topic orders
for segment in "$work"/logs/broker-0/orders-*/00000000000000000000.log; do
  [ -s "$segment" ] && break  # a partition with a record
done
run dump-log --files "$segment" --print-data-log
# Deletion: the answer waits until the brokers dropped the topic; its log directories are
# renamed <topic>-<p>.<uuid>-delete at once and removed after log.segment.delete.delay.ms.
run topics "${cf[@]}" --delete --topic audit.log
run topics "${cf[@]}" --list
for _ in $(seq 1 100); do  # the controller removes the znodes right after the StopReplicas
  "$kemu" zk "${cf[@]}" ls /brokers/topics | grep -q '^audit.log$' || break
  sleep 0.1
done
run zk "${cf[@]}" ls /brokers/topics
printf '\n$ ls %s/logs/broker-0\n' "$work"
ls "$work/logs/broker-0"
printf '\n$ kill -INT <kemu up>\n'
kill -INT "$up_pid"
wait "$up_pid"
up_pid=""
