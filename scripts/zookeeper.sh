#!/usr/bin/env bash
# A local ZooKeeper server or ensemble (the Debian `zookeeper` package, 3.8) on loopback,
# for tests and users of `kemu up --zookeeper` and `kemu broker run --zookeeper`.
#
# Usage: scripts/zookeeper.sh start|stop|status|run|install [--port P] [--dir D]
#            [--ensemble N [--server K] [--quorum-port Q] [--election-port E]]
#   start    start in the background; returns once `srvr` reports a Mode (idempotent)
#   stop     SIGTERM, then wait for the process to end (SIGKILL after 10 s)
#   status   print "running" or "stopped" with the port; exit 0 if running, 3 if not
#   run      run in the foreground (exec java; used by tests/support/zookeeper.py)
#   install  install the Debian package if /usr/share/java/zookeeper.jar is missing
# Options: --port P (default 2181), --dir D (instance directory, default <repo>/.zk):
#   D/zoo.cfg, D/data/ (dataDir), D/zookeeper.pid, D/zookeeper.log. stop and status
#   without --port act on the port D's zoo.cfg says (each server's own in an ensemble).
# --ensemble N (3, 5, 7 ...): N servers on 127.0.0.1; server K (1..N) serves clients on
#   P+K-1, talks to the leader on Q+K-1 and elects on E+K-1 (defaults 2888, 3888), in
#   D/server.K/ (zoo.cfg with every server.K line, data/myid). start, stop and status act
#   on every server, or on server K alone with --server K; run needs --server K.
#   Clients connect to 127.0.0.1:P,127.0.0.1:P+1,... (start prints the string).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAVA_DIR=/usr/share/java
ZK_JAR="$JAVA_DIR/zookeeper.jar"
READY_TIMEOUT=20 # seconds for `start` to see the server serving
STOP_TIMEOUT=10  # seconds for `stop` to see the process gone before SIGKILL

usage() {
  sed -n '5,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() {
  echo "zookeeper.sh: $*" >&2
  exit 1
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

cmd="${1:-}"
[ -n "$cmd" ] || usage
shift
PORT=2181
PORT_GIVEN=0
DIR="$REPO_ROOT/.zk"
ENSEMBLE=0 # 0: a standalone server
SERVER=0   # 0: every server of the ensemble
QUORUM_PORT=2888
ELECTION_PORT=3888
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [ $# -ge 2 ] || usage; PORT="$2"; PORT_GIVEN=1; shift 2 ;;
    --port=*) PORT="${1#--port=}"; PORT_GIVEN=1; shift ;;
    --dir) [ $# -ge 2 ] || usage; DIR="$2"; shift 2 ;;
    --dir=*) DIR="${1#--dir=}"; shift ;;
    --ensemble) [ $# -ge 2 ] || usage; ENSEMBLE="$2"; shift 2 ;;
    --ensemble=*) ENSEMBLE="${1#--ensemble=}"; shift ;;
    --server) [ $# -ge 2 ] || usage; SERVER="$2"; shift 2 ;;
    --server=*) SERVER="${1#--server=}"; shift ;;
    --quorum-port) [ $# -ge 2 ] || usage; QUORUM_PORT="$2"; shift 2 ;;
    --quorum-port=*) QUORUM_PORT="${1#--quorum-port=}"; shift ;;
    --election-port) [ $# -ge 2 ] || usage; ELECTION_PORT="$2"; shift 2 ;;
    --election-port=*) ELECTION_PORT="${1#--election-port=}"; shift ;;
    -h | --help) usage ;;
    *) echo "zookeeper.sh: unknown argument: $1" >&2; usage ;;
  esac
done
is_port() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ]; }
is_port "$PORT" || die "bad --port: $PORT"
[[ "$ENSEMBLE" =~ ^[0-9]+$ ]] || die "bad --ensemble: $ENSEMBLE"
[[ "$SERVER" =~ ^[0-9]+$ ]] || die "bad --server: $SERVER"
if [ "$ENSEMBLE" -ne 0 ]; then
  # An even ensemble survives no more failures than the odd one below it; one server is
  # the standalone mode (no --ensemble).
  [ "$ENSEMBLE" -ge 3 ] && [ $((ENSEMBLE % 2)) -eq 1 ] || die "--ensemble $ENSEMBLE: an ensemble is 3, 5, 7 ... servers"
  [ "$SERVER" -le "$ENSEMBLE" ] || die "--server $SERVER: the ensemble has servers 1 to $ENSEMBLE"
  for base in "$PORT" "$QUORUM_PORT" "$ELECTION_PORT"; do
    is_port "$base" && is_port $((base + ENSEMBLE - 1)) || die "ports $base to $((base + ENSEMBLE - 1)) are not all TCP ports"
  done
else
  [ "$SERVER" -eq 0 ] || die "--server needs --ensemble"
fi
DIR="$(realpath -m "$DIR")" # dataDir must be absolute
BASE_DIR="$DIR"
BASE_PORT="$PORT"

# Point PORT, DIR, CFG, PID_FILE and LOG_FILE at server $1 of the ensemble (0: standalone).
member() {
  if [ "$1" -eq 0 ]; then
    PORT="$BASE_PORT"
    DIR="$BASE_DIR"
  else
    PORT=$((BASE_PORT + $1 - 1))
    DIR="$BASE_DIR/server.$1"
  fi
  CFG="$DIR/zoo.cfg"
  PID_FILE="$DIR/zookeeper.pid"
  LOG_FILE="$DIR/zookeeper.log"
  # stop and status without --port: the port the instance was started on.
  if [ "$PORT_GIVEN" -eq 0 ] && { [ "$cmd" = stop ] || [ "$cmd" = status ]; } && [ -f "$CFG" ]; then
    local configured
    configured="$(sed -n 's/^clientPort=//p' "$CFG" | head -n 1)"
    if is_port "$configured"; then PORT="$configured"; fi
  fi
}
member "$SERVER"

install_zookeeper() {
  if [ ! -f "$ZK_JAR" ]; then
    echo "zookeeper.sh: $ZK_JAR missing: installing the Debian zookeeper package" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >&2
    [ -f "$ZK_JAR" ] || die "the zookeeper package did not install $ZK_JAR"
  fi
  command -v java >/dev/null || die "java not found (the zookeeper package should pull it in)"
}

write_config() {
  mkdir -p "$DIR/data"  # also creates $DIR
  local what="a standalone server"
  [ "$SERVER" -eq 0 ] || what="server $SERVER of an ensemble of $ENSEMBLE"
  cat >"$CFG" <<EOF
# Written by scripts/zookeeper.sh: $what on loopback for kemu.
clientPort=$PORT
clientPortAddress=127.0.0.1
dataDir=$DIR/data
# 2 ticks = 1 s is the smallest session timeout; Kafka's 18 s default must fit under the max.
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
# no admin web server on :8080; only the four-letter words kemu and aiozk use
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
# the default (60 per IP) silently hangs the 61st client of a test run
maxClientCnxns=0
# a local, disposable server: no fsync per write (about twice as fast)
forceSync=no
EOF
  if [ "$SERVER" -ne 0 ]; then
    # The quorum: ticks a follower may take to connect and sync with the leader (initLimit)
    # and to stay in sync (syncLimit); server.K=host:quorum port:election port.
    {
      echo "initLimit=20"
      echo "syncLimit=10"
      local k
      for k in $(seq 1 "$ENSEMBLE"); do
        echo "server.$k=127.0.0.1:$((QUORUM_PORT + k - 1)):$((ELECTION_PORT + k - 1))"
      done
    } >>"$CFG"
    echo "$SERVER" >"$DIR/data/myid"
  fi
}

# A process that has exited but is not reaped yet (a zombie) counts as gone.
proc_alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [[ "$state" != Z* ]]
}

pid_alive() { [ -f "$PID_FILE" ] && proc_alive "$(cat "$PID_FILE")"; }

# Prints the server's `srvr` reply, or nothing if it does not answer within a second.
srvr() {
  timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT && printf srvr >&3 && cat <&3" 2>/dev/null || true
}

serving() { srvr | grep -q '^Mode:'; }

run() {
  install_zookeeper
  write_config
  # QuorumPeerMain with a config file (the short ZooKeeperServerMain PORT DIR form would
  # listen on every interface); the jar's manifest names its other dependencies.
  exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -cp "$ZK_JAR:$JAVA_DIR/slf4j-simple.jar" \
    -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat="yyyy-MM-dd'T'HH:mm:ss.SSS" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$CFG"
}

# The arguments that make `run` run this server (the one `member` points at).
run_args() {
  if [ "$SERVER" -eq 0 ]; then
    echo --port "$PORT" --dir "$DIR"
  else
    echo --port "$BASE_PORT" --dir "$BASE_DIR" --ensemble "$ENSEMBLE" --server "$SERVER" \
      --quorum-port "$QUORUM_PORT" --election-port "$ELECTION_PORT"
  fi
}

# Start the server in the background (nothing if it is running); `await_serving` waits.
launch() {
  if pid_alive; then
    serving && return 0
    # an ensemble member waits for its quorum: `await_serving` tells
    [ "$SERVER" -ne 0 ] && return 0
    die "pid $(cat "$PID_FILE") from $PID_FILE is alive but 127.0.0.1:$PORT does not answer (see $LOG_FILE)"
  fi
  rm -f "$PID_FILE"
  mkdir -p "$DIR"
  if serving; then
    die "something else already serves 127.0.0.1:$PORT"
  fi
  # shellcheck disable=SC2046 # run_args's words are split on purpose
  nohup "${BASH_SOURCE[0]}" run $(run_args) >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
}

await_serving() {
  local deadline=$((SECONDS + READY_TIMEOUT))
  until serving; do
    if ! pid_alive; then
      tail -n 20 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      die "zookeeper exited during start-up (log: $LOG_FILE)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 20 "$LOG_FILE" >&2 || true
      die "zookeeper did not serve on 127.0.0.1:$PORT within ${READY_TIMEOUT}s (log: $LOG_FILE)"
    fi
    sleep 0.05
  done
  echo "zookeeper running (pid $(cat "$PID_FILE"), 127.0.0.1:$PORT, dir $DIR)"
}

start() {
  install_zookeeper
  launch
  await_serving
}

stop() {
  if ! pid_alive; then
    rm -f "$PID_FILE"
    echo "zookeeper stopped (127.0.0.1:$PORT)"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while proc_alive "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "zookeeper.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.05
  done
  rm -f "$PID_FILE"
  echo "zookeeper stopped (127.0.0.1:$PORT)"
}

status() {
  if pid_alive && serving; then
    echo "zookeeper running (pid $(cat "$PID_FILE"), 127.0.0.1:$PORT)"
    return 0
  fi
  echo "zookeeper stopped (127.0.0.1:$PORT)"
  return 3
}

# The servers a command acts on: the standalone one (0), server K, or every one.
servers() {
  if [ "$ENSEMBLE" -eq 0 ] || [ "$SERVER" -ne 0 ]; then
    echo "$SERVER"
  else
    seq 1 "$ENSEMBLE"
  fi
}

# Every server's client address: the connection string clients are given.
connect_string() {
  local k hosts=""
  for k in $(seq 1 "$ENSEMBLE"); do
    hosts="$hosts${hosts:+,}127.0.0.1:$((BASE_PORT + k - 1))"
  done
  echo "$hosts"
}

each() {
  local k status=0
  for k in $(servers); do
    member "$k"
    SERVER="$k" "$@" || status=$?
  done
  return "$status"
}

case "$cmd" in
  start)
    if [ "$ENSEMBLE" -eq 0 ]; then
      start
    else
      # Every server first: a server serves only once a quorum of them is up.
      install_zookeeper
      each launch
      each await_serving
      echo "zookeeper ensemble: $(connect_string)"
    fi
    ;;
  stop) each stop ;;
  status) each status ;;
  run)
    [ "$ENSEMBLE" -eq 0 ] || [ "$SERVER" -ne 0 ] || die "run --ensemble needs --server K"
    run
    ;;
  install) install_zookeeper ;;
  *) usage ;;
esac
