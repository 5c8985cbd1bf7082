#!/usr/bin/env bash
# A single-node Elasticsearch for kbgraph's tests, assembled from Maven Central artifacts.
#
#   tests/es_node/es-node.sh start    resolve + compile (cached), start, wait for GET /, print the URL
#   tests/es_node/es-node.sh stop     end the node started by `start` and remove its scratch data
#   tests/es_node/es-node.sh status   print the URL and exit 0 if it answers, else exit 1
#
# Environment: KBGRAPH_ES_PORT (default 9200), KBGRAPH_ES_HEAP (default 512m),
# KBGRAPH_ES_JAVA (default: java on PATH; 8.18 runs on Java 17), KBGRAPH_ES_START_TIMEOUT (s, 120).
# Everything it builds or writes lives in tests/es_node/build/ (gitignored): the resolved
# classpath and compiled glue (reused while pom.xml and src/ are unchanged) and, per port, the
# node's pid, log and scratch path.home.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
PORT="${KBGRAPH_ES_PORT:-9200}"
HEAP="${KBGRAPH_ES_HEAP:-512m}"
JAVA="${KBGRAPH_ES_JAVA:-java}"
START_TIMEOUT="${KBGRAPH_ES_START_TIMEOUT:-120}"
URL="http://127.0.0.1:$PORT"
RUN="$BUILD/run-$PORT"
PIDFILE="$RUN/node.pid"
LOG="$RUN/node.log"

log() { echo "es-node: $*" >&2; }

answers() { curl -fsS -m 2 "$URL/" >/dev/null 2>&1; }

# a fingerprint of everything the compiled glue depends on: rebuild when any of it changes
fingerprint() { cat "$HERE/pom.xml" $(find "$HERE/src" -name '*.java' | sort) | sha256sum | cut -d' ' -f1; }

build() {
    local stamp="$BUILD/classes.stamp" want
    want="$(fingerprint)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -s "$BUILD/classpath.txt" ]]; then
        return
    fi
    log "resolving the Elasticsearch classpath with Maven (first run downloads ~100 MB)"
    mkdir -p "$BUILD"
    mvn -q -B -Dstyle.color=never -f "$HERE/pom.xml" dependency:build-classpath -Dmdep.outputFile="$BUILD/classpath.txt" >&2
    rm -rf "$BUILD/classes" && mkdir -p "$BUILD/classes"
    javac -nowarn -encoding UTF-8 -d "$BUILD/classes" -cp "$(cat "$BUILD/classpath.txt")" \
        $(find "$HERE/src" -name '*.java')
    echo "$want" > "$stamp"
}

running_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(cat "$PIDFILE")"
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

start() {
    if running_pid >/dev/null && answers; then
        log "already running"
        echo "$URL"
        return
    fi
    if answers; then
        log "something else already answers on $URL; set KBGRAPH_ES_PORT to another port"
        exit 1
    fi
    build
    rm -rf "$RUN" && mkdir -p "$RUN/home"
    # setsid: the node outlives this script and is not killed by the caller's Ctrl-C
    setsid "$JAVA" -Xms"$HEAP" -Xmx"$HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Djava.awt.headless=true -Dfile.encoding=UTF-8 -Dlog4j2.formatMsgNoLookups=true \
        -cp "$BUILD/classes:$(cat "$BUILD/classpath.txt")" kbgraph.esnode.Main "$RUN/home" "$PORT" \
        >"$LOG" 2>&1 < /dev/null &
    echo $! > "$PIDFILE"
    local waited=0
    until answers; do
        if ! running_pid >/dev/null; then
            log "the node exited during start; last lines of $LOG:"
            tail -n 40 "$LOG" >&2
            exit 1
        fi
        if (( waited >= START_TIMEOUT )); then
            log "no answer from $URL after ${START_TIMEOUT}s; last lines of $LOG:"
            tail -n 40 "$LOG" >&2
            stop
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "started in ~${waited}s (pid $(cat "$PIDFILE"), log $LOG)"
    echo "$URL"
}

stop() {
    local pid
    if pid="$(running_pid)"; then
        kill -TERM "$pid"
        for _ in $(seq 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "the node did not stop in 30s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped (pid $pid)"
    else
        log "not running"
    fi
    rm -rf "$RUN"
}

status() {
    if answers; then
        echo "$URL"
    else
        log "no node answers on $URL"
        exit 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
