#!/usr/bin/env bash
# A real S3-compatible server for kbgraph's tests: SeaweedFS (`weed server -s3`: master, volume,
# filer and S3 gateway in one process, ~120 MB), built from the Go module proxy and cached outside
# the checkout.
#
#   s3-server.sh build         build the weed binary once per SeaweedFS version (~5 minutes, needs Go):
#                              `go mod download` of the module (`go install` refuses it: it has replace
#                              directives), then `go build ./weed` inside a copy of its folder
#   s3-server.sh start         build if needed, start on free loopback ports from KBGRAPH_S3_PORT, wait
#                              until S3 answers a signed request, print `export ...` lines for the tests
#                              (eval "$(bash tests/s3_server/s3-server.sh start)")
#   s3-server.sh stop [--wipe] end it (SIGTERM, then SIGKILL after 20 s); --wipe also removes its data
#   s3-server.sh status        print the S3 URL and exit 0 if it answers, else exit 1
#
# The server knows two identities (tests only; it listens on 127.0.0.1): KBGRAPH_TEST_S3_KEY /
# KBGRAPH_TEST_S3_SECRET may do everything, KBGRAPH_TEST_S3_LIMITED_KEY / _SECRET may read, write
# and list but not create buckets (the tests of a refused bucket).
# Environment: KBGRAPH_S3_PORT (S3's port, default 8333; the master, volume and filer take the next
# free ports, each with its gRPC port 10000 above), KBGRAPH_S3_DIR (its data, pid and log; default
# tests/s3_server/build/run-PORT), KBGRAPH_CI_CACHE (where the binary is kept; default
# ~/.cache/kbgraph-ci), KBGRAPH_S3_START_TIMEOUT (s, 60).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# the SeaweedFS release the tests run on (its `weed version`: 30GB 4.53)
VERSION="v0.0.0-20261109003541-7506e5f91cd6"
MODULE="github.com/seaweedfs/seaweedfs"
CACHE="${KBGRAPH_CI_CACHE:-$HOME/.cache/kbgraph-ci}"
BIN="$CACHE/seaweedfs-$VERSION/weed"
PORT="${KBGRAPH_S3_PORT:-8333}"
RUN="${KBGRAPH_S3_DIR:-$HERE/build/run-$PORT}"
START_TIMEOUT="${KBGRAPH_S3_START_TIMEOUT:-60}"
KEY=kbgraph-test SECRET=kbgraph-test-secret
LIMITED_KEY=kbgraph-limited LIMITED_SECRET=kbgraph-limited-secret

log() { echo "s3-server: $*" >&2; }

go_command() {
    if command -v go >/dev/null; then echo go; elif [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go
    else log "Go is needed to build SeaweedFS once (https://go.dev/dl or the golang-go package)"; exit 1; fi
}

build() {
    [[ -x "$BIN" ]] && return
    local go work source
    go="$(go_command)"
    work="$(mktemp -d "${TMPDIR:-/tmp}/kbgraph-weed.XXXXXX")"
    log "building SeaweedFS $VERSION into $BIN (once; about 5 minutes)"
    source="$(cd "$work" && GOFLAGS=-mod=mod "$go" mod download -json "$MODULE@$VERSION" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -d "$source" ]] || { log "go mod download gave no module folder"; exit 1; }
    cp -r "$source" "$work/src"
    chmod -R u+w "$work/src"  # the module cache is read-only
    (cd "$work/src" && GOFLAGS=-mod=mod "$go" build -o "$work/weed" ./weed)
    mkdir -p "$(dirname "$BIN")"
    mv "$work/weed" "$BIN.$$" && mv "$BIN.$$" "$BIN"  # whole or not at all: another run may be waiting
    rm -rf "$work"
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# the first port from $1 up that is free, with its gRPC port (+10000) free too
free_pair() {
    local port="$1"
    while port_taken "$port" || port_taken $((port + 10000)); do port=$((port + 1)); done
    echo "$port"
}

signed_get() {  # a ListBuckets signed with the full identity: 200 once S3 serves
    curl -s -m 3 -o /dev/null -w '%{http_code}' --aws-sigv4 "aws:amz:us-east-1:s3" --user "$KEY:$SECRET" \
        "http://127.0.0.1:$PORT/" 2>/dev/null || true
}

identities() {
    cat <<JSON
{"identities": [
  {"name": "kbgraph-test", "credentials": [{"accessKey": "$KEY", "secretKey": "$SECRET"}],
   "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
  {"name": "kbgraph-limited", "credentials": [{"accessKey": "$LIMITED_KEY", "secretKey": "$LIMITED_SECRET"}],
   "actions": ["Read", "Write", "List"]}
]}
JSON
}

start() {
    build
    if [[ "$(signed_get)" == 200 ]]; then log "already running on $PORT"; exports; return; fi
    port_taken "$PORT" && { log "port $PORT is taken by something else (KBGRAPH_S3_PORT)"; exit 1; }
    port_taken $((PORT + 10000)) && { log "port $((PORT + 10000)) (S3's gRPC) is taken (KBGRAPH_S3_PORT)"; exit 1; }
    local master volume filer
    master="$(free_pair $((PORT + 1)))"
    volume="$(free_pair $((master + 1)))"
    filer="$(free_pair $((volume + 1)))"
    mkdir -p "$RUN/data"
    identities > "$RUN/s3.json"
    # 64 MB volumes, each bucket taking 7 of its own; a fixed number of slots: -volume.max=0 derives
    # them from the free disk, which on a machine 97% full left room for 7 buckets and failed the
    # first upload to a bucket a test created ("No writable volumes and no free volumes left")
    setsid "$BIN" server -dir="$RUN/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3 -s3.config="$RUN/s3.json" \
        -master.port="$master" -master.port.grpc=$((master + 10000)) -master.volumeSizeLimitMB=64 \
        -volume.port="$volume" -volume.port.grpc=$((volume + 10000)) -volume.max=256 \
        -filer.port="$filer" -filer.port.grpc=$((filer + 10000)) \
        -s3.port="$PORT" -s3.port.grpc=$((PORT + 10000)) -s3.port.iceberg=0 -s3.port.lance=0 \
        >"$RUN/weed.log" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    local waited=0
    until [[ "$(signed_get)" == 200 ]]; do
        if ! kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then log "SeaweedFS exited; its log:"; tail -n 20 "$RUN/weed.log" >&2; exit 1; fi
        if (( waited >= START_TIMEOUT * 5 )); then log "S3 did not answer within ${START_TIMEOUT}s ($RUN/weed.log)"; stop; exit 1; fi
        sleep 0.2; waited=$((waited + 1))
    done
    log "S3 on http://127.0.0.1:$PORT (data in $RUN)"
    exports
}

exports() {
    echo "export KBGRAPH_TEST_S3_URL=http://127.0.0.1:$PORT"
    echo "export KBGRAPH_TEST_S3_KEY=$KEY KBGRAPH_TEST_S3_SECRET=$SECRET"
    echo "export KBGRAPH_TEST_S3_LIMITED_KEY=$LIMITED_KEY KBGRAPH_TEST_S3_LIMITED_SECRET=$LIMITED_SECRET"
}

stop() {
    local pid
    if [[ -f "$RUN/pid" ]]; then
        pid="$(cat "$RUN/pid")"
        if kill "$pid" 2>/dev/null; then
            for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -9 "$pid" 2>/dev/null || true  # still shutting down after 20 s
        fi
        rm -f "$RUN/pid"
    fi
    if [[ "${1:-}" == "--wipe" ]]; then rm -rf "$RUN"; fi
}

case "${1:-}" in
    build) build ;;
    start) start ;;
    stop) shift; stop "${1:-}" ;;
    status) if [[ "$(signed_get)" == 200 ]]; then echo "http://127.0.0.1:$PORT"; else exit 1; fi ;;
    *) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac
