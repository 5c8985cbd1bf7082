#!/bin/bash
# usage: run.sh <dir> <test_http_api|test_sdk_api> <junit.xml> [pytest args]
# HOST_ADDRESS (default http://127.0.0.1:9380) and RAGFLOW_API_KEY must be set. All levels (p1-p3);
# each case may take 120 s at most, fixtures included.
dir=${1:?}; suite=${2:?}; junit=${3:?}; shift 3
cd "$dir/test/testcases"
export HOST_ADDRESS=${HOST_ADDRESS:-http://127.0.0.1:9380} ZHIPU_AI_API_KEY=unused
exec "$dir/.venv/bin/python" -m pytest "$suite" --level p3 -p no:cacheprovider --timeout 120 -q -rfE \
  --junitxml="$junit" "$@"
