#!/usr/bin/env bash
# Elasticsearch for kbgraph's tests and benchmarks, assembled from Maven Central artifacts: one node,
# or a cluster of N nodes on this machine.
#
#   es-node.sh start                  one node (a single-node cluster) on KBGRAPH_ES_PORT: resolve +
#                                     compile (cached), start on its existing data if any, wait for
#                                     GET /, print the URL
#   es-node.sh stop [--wipe]          end that node; --wipe also removes its data
#   es-node.sh status                 print the URL and exit 0 if it answers, else exit 1
#
#   es-node.sh cluster-start [N]      N nodes (default 3) forming one cluster: HTTP on KBGRAPH_ES_PORT,
#                                     +1, ...; transport on KBGRAPH_ES_TRANSPORT_PORT (default
#                                     KBGRAPH_ES_PORT+100), +1, ...; waits for every node to join and
#                                     the cluster to be green, prints the URLs comma-separated (the
#                                     form KBGRAPH_ES_URL takes)
#   es-node.sh cluster-stop [--wipe]  end every node of that cluster; --wipe also removes their data
#   es-node.sh cluster-status         print the cluster's health line; exit 1 if no node answers
#   es-node.sh node-kill I            kill -9 node I of the cluster (a crash: no shutdown at all)
#   es-node.sh node-stop I            stop node I gracefully (SIGTERM)
#   es-node.sh node-start I           start node I again on its existing data; it rejoins the cluster
#
# Environment: KBGRAPH_ES_PORT (default 9200), KBGRAPH_ES_HEAP (default 512m; 400m per cluster node),
# KBGRAPH_ES_PROFILE (test: SerialGC and the reduced JIT, the fastest start, the default; deploy:
# G1 and the full JIT, as a deployment runs it), KBGRAPH_ES_JAVA (default: java on PATH; 8.18 runs
# on Java 17; on Java 21 or later Lucene's vector API is enabled, as Elasticsearch's launcher does
# on its bundled JDK), KBGRAPH_ES_JAVA_OPTS (more JVM flags), KBGRAPH_ES_START_TIMEOUT (s, 120).
# Everything it builds or writes lives in tests/es_node/build/ (gitignored): the resolved classpath
# and compiled glue (reused while pom.xml and src/ are unchanged), per single node run-PORT/ and per
# cluster cluster-PORT/node-I/ (pid, log, path.home with the data).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD="$HERE/build"
PORT="${KBGRAPH_ES_PORT:-9200}"
JAVA="${KBGRAPH_ES_JAVA:-java}"
PROFILE="${KBGRAPH_ES_PROFILE:-test}"
START_TIMEOUT="${KBGRAPH_ES_START_TIMEOUT:-120}"

log() { echo "es-node: $*" >&2; }

answers() { curl -fsS -m 2 "$1/" >/dev/null 2>&1; }

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
    rm -rf "$BUILD/classes.new" && mkdir -p "$BUILD/classes.new"
    javac -nowarn -encoding UTF-8 -d "$BUILD/classes.new" -cp "$(cat "$BUILD/classpath.txt")" \
        $(find "$HERE/src" -name '*.java')
    # swapped in whole: a node started from the old classes keeps reading them until it ends
    rm -rf "$BUILD/classes" && mv "$BUILD/classes.new" "$BUILD/classes"
    echo "$want" > "$stamp"
}

java_feature() {  # the Java runtime's feature version (17, 25...)
    "$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p' | head -1
}

# Lucene's vector API (SIMD dot products for kNN), as Elasticsearch's own launcher enables it on a
# runtime of Java 21 or later (its bundled JDK): the incubator module, and Lucene told that this
# runtime's version is one it may use it on (Lucene 9.12 otherwise refuses Java 23 and later)
vector_api_flags() {
    local feature
    feature="$(java_feature)"
    if [[ "$feature" =~ ^[0-9]+$ ]] && (( feature >= 21 )); then
        echo "--add-modules=jdk.incubator.vector -Dorg.apache.lucene.vectorization.upperJavaFeatureVersion=$feature"
    fi
}

jvm_flags() {
    local heap="$1"
    case "$PROFILE" in
        test) echo "-Xms$heap -Xmx$heap -XX:+UseSerialGC -XX:TieredStopAtLevel=1" ;;
        deploy) echo "-Xms$heap -Xmx$heap -XX:+UseG1GC" ;;
        *) log "KBGRAPH_ES_PROFILE must be test or deploy, not '$PROFILE'"; exit 2 ;;
    esac
    vector_api_flags
    echo "${KBGRAPH_ES_JAVA_OPTS:-}"
}

pid_of() {  # the pid recorded in $1, if that process still runs
    [[ -f "$1" ]] || return 1
    local pid
    pid="$(cat "$1")"
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

# launch DIR HTTP_PORT HEAP [SETTING=VALUE ...]: a node whose path.home is DIR/home (kept across
# starts: a node started again finds its data), its pid in DIR/node.pid, its output in DIR/node.log
launch() {
    local dir="$1" port="$2" heap="$3"
    shift 3
    mkdir -p "$dir/home"
    # setsid: the node outlives this script and is not killed by the caller's Ctrl-C
    # shellcheck disable=SC2046
    # search.worker_threads_enabled=false: kNN searches walk a shard's segments one after the other.
    # Walked side by side (8.13 on), the segments share the best hits found so far, so which ones a
    # search returns depends on its threads' timing: the same question gave another page now and
    # then (docs/cluster.md, "The same answer every time")
    setsid "$JAVA" $(jvm_flags "$heap") \
        -Djava.awt.headless=true -Dfile.encoding=UTF-8 -Dlog4j2.formatMsgNoLookups=true \
        -cp "$BUILD/classes:$(cat "$BUILD/classpath.txt")" kbgraph.esnode.Main "$dir/home" "$port" \
        search.worker_threads_enabled=false "$@" \
        >>"$dir/node.log" 2>&1 < /dev/null &
    echo $! > "$dir/node.pid"
}

# wait_answering DIR URL: until URL answers GET /, or fail with the node's last log lines
wait_answering() {
    local dir="$1" url="$2" waited=0
    until answers "$url"; do
        if ! pid_of "$dir/node.pid" >/dev/null; then
            log "the node exited during start; last lines of $dir/node.log:"
            tail -n 40 "$dir/node.log" >&2
            return 1
        fi
        if (( waited >= START_TIMEOUT )); then
            log "no answer from $url after ${START_TIMEOUT}s; last lines of $dir/node.log:"
            tail -n 40 "$dir/node.log" >&2
            return 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "$url answers after ~${waited}s (pid $(cat "$dir/node.pid"), log $dir/node.log)"
}

# end DIR: SIGTERM (or SIGKILL with "kill") the node recorded in DIR and wait until it is gone
end_node() {
    local dir="$1" signal="${2:-TERM}" pid
    if ! pid="$(pid_of "$dir/node.pid")"; then
        return 0
    fi
    kill "-$signal" "$pid"
    for _ in $(seq 30); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid did not stop in 30s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
    fi
    log "stopped pid $pid ($signal)"
}

# ------------------------------------------------------------------------------ one node

SINGLE="$BUILD/run-$PORT"
SINGLE_URL="http://127.0.0.1:$PORT"

start() {
    if pid_of "$SINGLE/node.pid" >/dev/null && answers "$SINGLE_URL"; then
        log "already running"
        echo "$SINGLE_URL"
        return
    fi
    if answers "$SINGLE_URL"; then
        log "something else already answers on $SINGLE_URL; set KBGRAPH_ES_PORT to another port"
        exit 1
    fi
    build
    launch "$SINGLE" "$PORT" "${KBGRAPH_ES_HEAP:-512m}" transport.port=0
    if ! wait_answering "$SINGLE" "$SINGLE_URL"; then
        end_node "$SINGLE" KILL
        exit 1
    fi
    echo "$SINGLE_URL"
}

stop() {
    end_node "$SINGLE"
    if [[ "${1:-}" == "--wipe" ]]; then
        rm -rf "$SINGLE"
    fi
}

status() {
    if answers "$SINGLE_URL"; then
        echo "$SINGLE_URL"
    else
        log "no node answers on $SINGLE_URL"
        exit 1
    fi
}

# ------------------------------------------------------------------------------ a cluster

CLUSTER="$BUILD/cluster-$PORT"

cluster_size() {
    [[ -f "$CLUSTER/size" ]] || { log "no cluster was started on port $PORT (es-node.sh cluster-start)"; exit 1; }
    cat "$CLUSTER/size"
}

transport_base() { echo "${KBGRAPH_ES_TRANSPORT_PORT:-$((PORT + 100))}"; }

node_url() { echo "http://127.0.0.1:$((PORT + $1))"; }

cluster_urls() {
    local n i urls=()
    n="$(cluster_size)"
    for ((i = 0; i < n; i++)); do urls+=("$(node_url "$i")"); done
    (IFS=,; echo "${urls[*]}")
}

# start_cluster_node I N: node I of N with the cluster's discovery settings (the initial master
# nodes only matter the first time the cluster forms; a node with data already knows its cluster)
start_cluster_node() {
    local i="$1" n="$2" t seeds=() masters=() j
    t="$(transport_base)"
    for ((j = 0; j < n; j++)); do
        seeds+=("127.0.0.1:$((t + j))")
        masters+=("es-node-$j")
    done
    launch "$CLUSTER/node-$i" "$((PORT + i))" "${KBGRAPH_ES_HEAP:-400m}" \
        "node.name=es-node-$i" "cluster.name=kbgraph-cluster-$PORT" "transport.port=$((t + i))" \
        "discovery.seed_hosts=$(IFS=,; echo "${seeds[*]}")" \
        "cluster.initial_master_nodes=$(IFS=,; echo "${masters[*]}")"
}

health() { curl -fsS -m 5 "$1/_cluster/health?$2" 2>/dev/null; }

cluster_start() {
    local n="${1:-3}" i url
    if [[ -f "$CLUSTER/size" ]] && answers "$(node_url 0)"; then
        log "a cluster already runs on port $PORT"
        cluster_urls
        return
    fi
    for ((i = 0; i < n; i++)); do
        if answers "$(node_url "$i")"; then
            log "something else already answers on $(node_url "$i"); set KBGRAPH_ES_PORT to another port"
            exit 1
        fi
    done
    build
    mkdir -p "$CLUSTER"
    echo "$n" > "$CLUSTER/size"
    for ((i = 0; i < n; i++)); do start_cluster_node "$i" "$n"; done
    for ((i = 0; i < n; i++)); do
        wait_answering "$CLUSTER/node-$i" "$(node_url "$i")" || { cluster_stop; exit 1; }
    done
    url="$(node_url 0)"
    if ! health "$url" "wait_for_nodes=$n&wait_for_status=green&timeout=${START_TIMEOUT}s" >/dev/null; then
        log "the $n nodes did not form a green cluster in ${START_TIMEOUT}s: $(health "$url" "" || true)"
        cluster_stop
        exit 1
    fi
    log "cluster of $n nodes is green"
    cluster_urls
}

cluster_stop() {
    local n i
    [[ -f "$CLUSTER/size" ]] || { log "no cluster on port $PORT"; return 0; }
    n="$(cat "$CLUSTER/size")"
    for ((i = 0; i < n; i++)); do end_node "$CLUSTER/node-$i"; done
    if [[ "${1:-}" == "--wipe" ]]; then
        rm -rf "$CLUSTER"
    fi
}

cluster_status() {
    local n i
    n="$(cluster_size)"
    for ((i = 0; i < n; i++)); do
        if health "$(node_url "$i")" "" ; then
            echo
            return 0
        fi
    done
    log "no node of the cluster on port $PORT answers"
    exit 1
}

node_index() {
    local n
    n="$(cluster_size)"
    [[ "${1:-}" =~ ^[0-9]+$ ]] && (( $1 < n )) || { log "node index must be 0..$((n - 1)), not '${1:-}'"; exit 2; }
    echo "$1"
}

node_start() {
    local i n
    i="$(node_index "${1:-}")"
    n="$(cluster_size)"
    if pid_of "$CLUSTER/node-$i/node.pid" >/dev/null; then
        log "node $i already runs"
    else
        build
        start_cluster_node "$i" "$n"
    fi
    wait_answering "$CLUSTER/node-$i" "$(node_url "$i")"
    node_url "$i"
}

case "${1:-}" in
    start) start ;;
    stop) stop "${2:-}" ;;
    status) status ;;
    cluster-start) cluster_start "${2:-3}" ;;
    cluster-stop) cluster_stop "${2:-}" ;;
    cluster-status) cluster_status ;;
    node-kill) end_node "$CLUSTER/node-$(node_index "${2:-}")" KILL ;;
    node-stop) end_node "$CLUSTER/node-$(node_index "${2:-}")" ;;
    node-start) node_start "${2:-}" ;;
    *) echo "usage: $0 start|stop [--wipe]|status|cluster-start [N]|cluster-stop [--wipe]|cluster-status|node-kill I|node-stop I|node-start I" >&2; exit 2 ;;
esac
