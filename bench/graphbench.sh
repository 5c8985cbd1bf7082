#!/usr/bin/env bash
# graphbench.sh: kbgraph's row beside LightRAG, nano-graphrag and GraphRAG (issue 6), one command.
#
# Starts graphbench's scripted server (fakellm, zero latency) on a free port, builds the Christmas
# Carol corpora (1x and 5x, as graphbench's RESULTS.md did), runs bench/graphbench_kbgraph.py on
# each after one untimed warm-up, and prints graphbench's table with kbgraph's runs next to the
# peers' stored reports (graphbench/results/carol-1x, carol-5x).
#
# usage: bench/graphbench.sh [--repeat N] [--out DIR] [--no-warmup] [--concurrency N] [--live "PEER ..."]
#                            [--latency-ms MS] [--corpora "carol-1x carol-5x musique-100"]
#   --live    also run these peers now, each run right after kbgraph's (graphbench's run_peer.py
#             and the venvs of its setup_peers.sh): the comparison then comes from one run on one
#             machine, which matters on a machine whose speed drifts; other peers stay stored
#   --latency-ms  fakellm answers every request after this long (800: a hosted model; 0 default)
#   --corpora the corpora to run, in order (default "carol-1x carol-5x"); musique-100 is the first
#             100 MuSiQue passages of musique-kag-train100, one file each (title, newline, text)
#   PYTHON    interpreter with kbgraph installed (default: python3)
#   GRAPHBENCH_DIR  the graphbench kit (fakellm, run_peer.py, stored peer results); required
#   GRAPHBENCH_HOME where setup_peers.sh put the peers' venvs (default: ~/.cache/graphbench)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GB="${GRAPHBENCH_DIR:?set GRAPHBENCH_DIR to the graphbench kit (fakellm.py, run_peer.py, results/)}"
PY="${PYTHON:-python3}"
BOOK="$GB/../../data/christmas-carol/book.txt"
PEERS_HOME="${GRAPHBENCH_HOME:-$HOME/.cache/graphbench}"
MUSIQUE="$GB/../../data/musique-kag-train100/corpus.jsonl"
REPEAT=3 OUT="" WARMUP=1 EXTRA=() LIVE=() LATENCY=0 CORPORA=(carol-1x carol-5x)
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) REPEAT="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --no-warmup) WARMUP=0; shift ;;
    --concurrency) EXTRA+=(--concurrency "$2"); shift 2 ;;
    --live) read -r -a LIVE <<< "$2"; shift 2 ;;
    --latency-ms) LATENCY="$2"; shift 2 ;;
    --corpora) read -r -a CORPORA <<< "$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-$(mktemp -d /tmp/kbgraph-graphbench-XXXXXX)}"
mkdir -p "$OUT"
for peer in "${LIVE[@]}"; do
  [ -x "$PEERS_HOME/venvs/$peer/bin/python" ] || {
    echo "no venv for $peer under $PEERS_HOME/venvs: run $GB/setup_peers.sh $peer first" >&2; exit 2; }
done

# corpora in their own directory: kbgraph indexes every supported file it finds there
python3 "$GB/make_corpus.py" "$BOOK" "$OUT/corpus/carol-1x" 2>/dev/null
python3 "$GB/make_corpus.py" "$BOOK" "$OUT/corpus/carol-5x" --copies 5 2>/dev/null
python3 "$GB/make_corpus.py" "$BOOK" "$OUT/corpus/warmup" --max-chars 8000 2>/dev/null
if [[ " ${CORPORA[*]} " == *" musique-100 "* ]]; then
  python3 - "$MUSIQUE" "$OUT/corpus/musique-100" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
with open(sys.argv[1], encoding="utf-8") as lines:
    for _, line in zip(range(100), lines):
        row = json.loads(line)
        (out / f"{row['id']}.txt").write_text(f"{row['title']}\n{row['text']}\n", encoding="utf-8")
PY
fi

rm -f "$OUT/fakellm.port"  # a reused --out dir: the wait below must see this server's port, not an old one
python3 "$GB/fakellm.py" --port 0 --latency-ms "$LATENCY" --port-file "$OUT/fakellm.port" --log "$OUT/fakellm.jsonl" \
        >"$OUT/fakellm.out" 2>&1 &
FAKE_PID=$!
cleanup() { kill "$FAKE_PID" 2>/dev/null || true; wait "$FAKE_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 100); do [ -s "$OUT/fakellm.port" ] && break; sleep 0.1; done
[ -s "$OUT/fakellm.port" ] || { echo "fakellm did not start" >&2; cat "$OUT/fakellm.out" >&2; exit 1; }
BASE="http://127.0.0.1:$(cat "$OUT/fakellm.port")/v1"

run() {  # corpus-dir report.json
  "$PY" "$ROOT/bench/graphbench_kbgraph.py" --corpus "$1" --base-url "$BASE" --api-key fake \
        --queries "$GB/queries.txt" --out "$2" "${EXTRA[@]}" >/dev/null 2>"${2%.json}.stderr" \
    || echo "[graphbench] kbgraph run $2 reported errors" >&2
}
run_peer() {  # peer corpus-dir report.json
  python3 "$GB/run_peer.py" --peer "$1" --python "$PEERS_HOME/venvs/$1/bin/python" --corpus "$2" \
          --base-url "$BASE" --queries "$GB/queries.txt" --out "$3" >/dev/null 2>"${3%.json}.stderr" \
    || echo "[graphbench] $1 run $3 reported errors" >&2
}
if [ "$WARMUP" = 1 ]; then
  run "$OUT/corpus/warmup" "$OUT/warmup.json"
  for peer in "${LIVE[@]}"; do run_peer "$peer" "$OUT/corpus/warmup" "$OUT/warmup.$peer.json"; done
fi
load() { cut -d' ' -f1-3 /proc/loadavg; }
for label in "${CORPORA[@]}"; do
  mkdir -p "$OUT/$label"
  for k in $(seq 1 "$REPEAT"); do
    echo "[graphbench] kbgraph on $label, run $k/$REPEAT (load $(load))" >&2
    run "$OUT/corpus/$label" "$OUT/$label/kbgraph.run$k.json"
    echo "kbgraph $label run$k load-after $(load)" >>"$OUT/load.txt"
    for peer in "${LIVE[@]}"; do
      echo "[graphbench] $peer on $label, run $k/$REPEAT (live, load $(load))" >&2
      run_peer "$peer" "$OUT/corpus/$label" "$OUT/$label/$peer.run$k.json"
      echo "$peer $label run$k load-after $(load)" >>"$OUT/load.txt"
    done
  done
done

stored_reports() {  # label: the stored reports of the peers not run live (measured at 0 ms)
  [ "$LATENCY" = 0 ] || return 0
  for f in "$GB/results/$1"/*.json; do
    [ -e "$f" ] || continue
    peer="$(basename "$f")"; peer="${peer%%.run*}"
    [[ " ${LIVE[*]} " == *" $peer "* ]] || echo "$f"
  done
}

{
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM," \
       "$(uname -sr); $("$PY" -c 'import platform;print("Python", platform.python_version())');" \
       "kbgraph $("$PY" -c 'from importlib.metadata import version;print(version("kbgraph"))');" \
       "openai $("$PY" -c 'from importlib.metadata import version;print(version("openai"))');" \
       "date $(date -u +%Y-%m-%dT%H:%MZ); fakellm latency $LATENCY ms; load average now $(load);" \
       "peers run now: ${LIVE[*]:-none}; other peers: stored graphbench results"
  for label in "${CORPORA[@]}"; do
    echo
    echo "### $label"
    echo
    # shellcheck disable=SC2046
    python3 "$GB/table.py" "$OUT/$label"/*.run*.json $(stored_reports "$label")
  done
} | tee "$OUT/table.md"
echo "[graphbench] reports and table in $OUT" >&2
