#!/usr/bin/env bash
# The chaos campaign: every scenario in scenarios/ with every seed (1..50 by default), in
# deterministic mode (virtual clock, in-process cluster, embedded store; docs/chaos.md).
# Quiet: one line per scenario with its pass count, then every failed run with its
# problems and the command that reproduces it, then the totals, then where the campaign
# page is (OUT/campaign.html: every run's outcome, each scenario's run lengths). Exit status 1 if any run
# failed, 2 for bad input (an invalid scenario file, bad options). While the runs go, a
# progress line on stderr (runs done of all, failures so far, rate, time left), only when
# stderr is a terminal.
# Usage: scripts/chaos.sh [--real] [--seeds A..B] [--out DIR] [--jobs N] [--keep-passed] [--quiet] [SCENARIO.yaml...]
#   --real         the real-mode campaign instead: scenarios/real/*.yaml (one OS process
#                  per broker, SIGKILL, a throwaway real ZooKeeper per job), seeds 1..3
#   --seeds A..B   the seeds of every scenario (default 1..50)
#   --out DIR      where the run directories go (default .kemu/chaos-campaign)
#   --jobs N       kemu processes side by side, each on a share of the seeds (of the
#                  scenarios when there are fewer seeds than jobs)
#                  (default: the number of CPUs, in real mode too: its runs mostly wait
#                  out timeouts and sessions, a job uses about a third of a core)
#   --keep-passed  keep the run directories of passed runs too (by default only the
#                  failed runs' directories are kept)
#   --quiet        no progress line
#   SCENARIO.yaml  only these scenarios (default: every scenarios/*.yaml)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }

real=0
seeds=""
out=".kemu/chaos-campaign"
jobs=""
keep_passed=0
quiet=0
scenarios=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) [ $# -ge 2 ] || { echo "Error: --seeds needs A..B" >&2; exit 2; }; seeds="$2"; shift 2 ;;
    --seeds=*) seeds="${1#*=}"; shift ;;
    --out) [ $# -ge 2 ] || { echo "Error: --out needs a directory" >&2; exit 2; }; out="$2"; shift 2 ;;
    --out=*) out="${1#*=}"; shift ;;
    --jobs) [ $# -ge 2 ] || { echo "Error: --jobs needs a number" >&2; exit 2; }; jobs="$2"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    --keep-passed) keep_passed=1; shift ;;
    --quiet) quiet=1; shift ;;
    --real) real=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "Error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
mode=(--deterministic)
if [ "$real" -eq 1 ]; then
  mode=(--zookeeper)  # each scenario says mode: processes; a throwaway ZooKeeper per job
  [ -n "$seeds" ] || seeds="1..3"
  [ ${#scenarios[@]} -gt 0 ] || scenarios=(scenarios/real/*.yaml)
fi
[ -n "$seeds" ] || seeds="1..50"
[ -n "$jobs" ] || jobs="$(nproc 2>/dev/null || echo 1)"
if [ ${#scenarios[@]} -eq 0 ]; then
  scenarios=(scenarios/*.yaml)
fi
case "$jobs" in ''|*[!0-9]*|0) echo "Error: --jobs must be a positive number, not '$jobs'" >&2; exit 2 ;; esac
first="${seeds%%..*}"
last="${seeds##*..}"
by_seeds=0
if [[ "$first" =~ ^[0-9]+$ && "$last" =~ ^[0-9]+$ ]] && (( 10#$last - 10#$first + 1 >= jobs )); then
  by_seeds=1
  first=$(( 10#$first ))
  last=$(( 10#$last ))
elif [ "$jobs" -gt ${#scenarios[@]} ]; then
  jobs=${#scenarios[@]}
fi

work="$(mktemp -d)"
watcher=""
stop_watcher() {
  if [ -n "$watcher" ]; then
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    watcher=""
  fi
}
trap 'stop_watcher; rm -rf "$work"' EXIT
start=$SECONDS
# A few kemu processes (the runs are a fraction of a second each; an interpreter's
# start-up is not), each on every scenario with a contiguous share of the seeds: every job
# gets about as much work, where shares of the scenarios were uneven (the four group-*
# scenarios take two fifths of the deterministic campaign: one of two jobs had two thirds
# of the work). With fewer seeds than jobs, each job takes a contiguous share of the
# scenarios with every seed. Their per-run lines are summarised below, in scenario order.
per=$(( (${#scenarios[@]} + jobs - 1) / jobs ))
pids=()
for ((job = 0; job < jobs; job++)); do
  if [ "$by_seeds" -eq 1 ]; then
    share=("${scenarios[@]}")
    count=$(( last - first + 1 ))
    share_seeds="$(( first + job * count / jobs ))..$(( first + (job + 1) * count / jobs - 1 ))"
  else
    share=("${scenarios[@]:job*per:per}")
    share_seeds="$seeds"
  fi
  [ ${#share[@]} -gt 0 ] || break
  # stderr apart: a stray line there (a warning, a child's traceback) must not land in the
  # middle of a progress line, where the summary below would read it as a run's status.
  "$VENV/bin/kemu" --log-level CRITICAL chaos run "${share[@]}" \
    --seeds "$share_seeds" "${mode[@]}" --out "$out" >"$work/$job.log" 2>"$work/$job.err" &
  pids+=($!)
done
# The progress line (cluster/cli/progress.py) follows the jobs' logs; it clears itself.
if [ "$quiet" -eq 0 ] && [ -t 2 ] && [[ "$first" =~ ^[0-9]+$ && "$last" =~ ^[0-9]+$ ]]; then
  "$VENV/bin/python" -m cluster.cli.progress --total $(( ${#scenarios[@]} * (last - first + 1) )) \
    $(for ((job = 0; job < ${#pids[@]}; job++)); do echo "$work/$job.log"; done) &
  watcher=$!
fi
status=0
for ((job = 0; job < ${#pids[@]}; job++)); do
  code=0
  wait "${pids[job]}" || code=$?
  [ "$code" -le "$status" ] || status=$code
done
stop_watcher
if [ "$status" -ge 2 ]; then
  cat "$work"/*.err | grep -m1 '^Error' >&2 || cat "$work"/*.err "$work"/*.log >&2  # bad input
  exit "$status"
fi

# "[i/n] NAME seed=S ... STATUS (E events, Xs simulated in Ys (R:1))", then the failed
# runs' indented problem lines.
awk -v elapsed="$((SECONDS - start))" '
  /^\[[0-9]+\/[0-9]+\] / {
    name = $2; seed = $3
    rest = $0; sub(/^.* \.\.\. /, "", rest); split(rest, word, " ")
    if (!(name in runs)) order[++names] = name
    runs[name]++; total++
    if (match($0, /[0-9.]+s simulated in [0-9.]+s/)) {
      split(substr($0, RSTART, RLENGTH), t, "s simulated in ")
      simulated += t[1]; wall += t[2]
    }
    current = ""
    if (word[1] == "passed") { passed[name]++; all_passed++ }
    else { current = ++failures; failed[current] = name " " seed ": " rest }
    next
  }
  /^  / && current != "" { failed[current] = failed[current] "\n" $0; next }
  { current = "" }
  END {
    for (i = 1; i <= names; i++) {
      n = order[i]
      printf "%-48s %4d/%d passed%s\n", n, passed[n], runs[n], (passed[n] == runs[n] ? "" : "  FAILED")
    }
    if (failures) {
      printf "\nfailed runs:\n"
      for (i = 1; i <= failures; i++) printf "%s\n", failed[i]
    }
    ratio = wall > 0 ? sprintf(" (%.0f:1)", simulated / wall) : ""
    printf "\n%d scenario(s), %d run(s): %d passed, %d failed; %.0fs simulated in %.0fs of runs%s, %ds in all\n", \
      names, total, all_passed, total - all_passed, simulated, wall, ratio, elapsed
  }
' $(for ((job = 0; job < ${#pids[@]}; job++)); do echo "$work/$job.log"; done)

# Whatever the kemu processes (and the broker processes of real mode) wrote on stderr:
# nothing, normally; shown whole, since it is the only trace of, e.g., a task exception
# nobody retrieved.
for ((job = 0; job < ${#pids[@]}; job++)); do
  if [ -s "$work/$job.err" ]; then
    printf '\nstderr of the kemu process on its share of the scenarios (job %d):\n' "$job"
    cat "$work/$job.err"
  fi
done

# The campaign page (cluster/chaos/campaign.py) needs every run's result, passed runs'
# too: they are collected from the run directories before those go, the page written after
# (a cell links to a run's report only if its directory stayed).
"$VENV/bin/python" -m cluster.chaos.campaign collect "$out" --seeds "$seeds" "${scenarios[@]}" \
  >"$work/results.json"

# A passed run's directory is a few hundred kB of trace nobody will read: only the failed
# runs' directories stay (those the "reproduce" lines name), unless --keep-passed.
if [ "$keep_passed" -eq 0 ]; then
  find "$out" -mindepth 3 -maxdepth 3 -name summary.json \
    -exec grep -l '^  "status": "passed",$' {} + 2>/dev/null \
    | while read -r summary; do rm -rf "$(dirname "$summary")"; done || true
  find "$out" -mindepth 1 -maxdepth 1 -type d -empty -delete 2>/dev/null || true
fi
"$VENV/bin/python" -m cluster.chaos.campaign page "$out" "$work/results.json" \
  --wall-seconds "$((SECONDS - start))"
exit "$status"
