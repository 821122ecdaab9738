#!/usr/bin/env bash
# A local ZooKeeper server (the Debian `zookeeper` package, 3.8) on loopback, for tests and
# users of `kemu up --zookeeper 127.0.0.1:PORT`.
#
# Usage: scripts/zookeeper.sh start|stop|status|run|install [--port P] [--dir D]
#   start    start in the background; returns once `srvr` reports a Mode (idempotent)
#   stop     SIGTERM, then wait for the process to end (SIGKILL after 10 s)
#   status   print "running" or "stopped" with the port; exit 0 if running, 3 if not
#   run      run in the foreground (exec java; used by tests/support/zookeeper.py)
#   install  install the Debian package if /usr/share/java/zookeeper.jar is missing
# Options: --port P (default 2181), --dir D (instance directory, default <repo>/.zk):
#   D/zoo.cfg, D/data/ (dataDir), D/zookeeper.pid, D/zookeeper.log.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAVA_DIR=/usr/share/java
ZK_JAR="$JAVA_DIR/zookeeper.jar"
READY_TIMEOUT=20 # seconds for `start` to see the server serving
STOP_TIMEOUT=10  # seconds for `stop` to see the process gone before SIGKILL

usage() {
  sed -n '5,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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
DIR="$REPO_ROOT/.zk"
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [ $# -ge 2 ] || usage; PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#--port=}"; shift ;;
    --dir) [ $# -ge 2 ] || usage; DIR="$2"; shift 2 ;;
    --dir=*) DIR="${1#--dir=}"; shift ;;
    -h | --help) usage ;;
    *) echo "zookeeper.sh: unknown argument: $1" >&2; usage ;;
  esac
done
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || die "bad --port: $PORT"
DIR="$(realpath -m "$DIR")" # dataDir must be absolute
CFG="$DIR/zoo.cfg"
PID_FILE="$DIR/zookeeper.pid"
LOG_FILE="$DIR/zookeeper.log"

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
  cat >"$CFG" <<EOF
# Written by scripts/zookeeper.sh: a standalone server on loopback for kemu.
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

start() {
  if pid_alive; then
    if serving; then
      echo "zookeeper running (pid $(cat "$PID_FILE"), 127.0.0.1:$PORT)"
      return 0
    fi
    die "pid $(cat "$PID_FILE") from $PID_FILE is alive but 127.0.0.1:$PORT does not answer (see $LOG_FILE)"
  fi
  rm -f "$PID_FILE"
  install_zookeeper
  mkdir -p "$DIR"
  if serving; then
    die "something else already serves 127.0.0.1:$PORT"
  fi
  nohup "${BASH_SOURCE[0]}" run --port "$PORT" --dir "$DIR" >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
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
  echo "zookeeper started (pid $(cat "$PID_FILE"), 127.0.0.1:$PORT, dir $DIR)"
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

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  run) run ;;
  install) install_zookeeper ;;
  *) usage ;;
esac
