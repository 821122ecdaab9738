#!/usr/bin/env bash
# Fuzz everything in kemu that reads bytes from a socket (docs/fuzzing.md): the Kafka
# listener, a broker process's internal port, the store server, the control endpoint and
# the Prometheus endpoint, each on a fresh `kemu up` in a child process. Prints, per target, the inputs, inputs/s,
# crashes and the RSS of the server's process at the start and the end. Exit status 1 if a
# target crashed (its reproducer directory and the replay command are printed), 2 for bad
# options.
# Usage: scripts/fuzz.sh [--quick] [--inputs N] [--targets a,b] [--seed S] [--crash-dir DIR]
#        scripts/fuzz.sh --replay DIR
#   --quick        2,000 inputs per target (a few minutes) instead of 100,000
#   --inputs N     inputs per target
#   --targets a,b  some of kafka,internal,store,control,metrics (default: all five)
#   --seed S       the hypothesis seed (default 0); a run replays from its seed
#   --crash-dir D  where reproducers go (default .kemu/fuzz-crashes)
#   --replay DIR   run a saved reproducer again on a fresh server
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }

args=(--crash-dir .kemu/fuzz-crashes)
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) args+=(--inputs 2000); shift ;;
    --inputs|--targets|--seed|--crash-dir|--replay)
      [ $# -ge 2 ] || { echo "fuzz.sh: $1 needs a value" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

ensure_venv
pip_install -e ".[test]"  # hypothesis drives the inputs
export PYTHONHASHSEED=0
exec "$VENV/bin/python" -m cluster.fuzz "${args[@]}"
