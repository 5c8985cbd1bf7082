#!/bin/bash
# Prepare RAGFlow v0.22.1's own HTTP-API and Python-SDK test suites to run against kbgraph-web.
# usage: setup.sh <dir> [ragflow git dir]   (default: clones github.com/infiniflow/ragflow at v0.22.1)
# RAGFlow's tests stay outside this repository; only the session conftest is adapted: instead of
# registering a RAGFlow user and a ZHIPU-AI key, the API key comes from $RAGFLOW_API_KEY
# (`kbgraph-web apikey create --tenant <t>`).
set -euo pipefail
dir=${1:?target directory}
src=${2:-}
mkdir -p "$dir"
if [ -z "$src" ]; then
  git clone -q --depth 1 --branch v0.22.1 https://github.com/infiniflow/ragflow "$dir/ragflow-src"
  src="$dir/ragflow-src"
fi
git -C "$src" archive v0.22.1 test/testcases | tar -x -C "$dir"
cases="$dir/test/testcases"
python3 - "$cases/conftest.py" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
text = text.replace("from configs import EMAIL, HOST_ADDRESS, PASSWORD, VERSION, ZHIPU_AI_API_KEY",
                    "import os\nfrom configs import HOST_ADDRESS, VERSION")
text = text[:text.index("def register():")] + '''
@pytest.fixture(scope="session")
def auth():
    return os.environ["RAGFLOW_API_KEY"]


@pytest.fixture(scope="session")
def token(auth):
    return auth
'''
open(path, "w").write(text)
PY
printf '[pytest]\nmarkers =\n    p1: high priority\n    p2: medium priority\n    p3: low priority\n' > "$cases/pytest.ini"
python3 -m venv "$dir/.venv"
"$dir/.venv/bin/pip" install -q "hypothesis>=6.132.0" "openpyxl>=3.1.5" "pillow>=10.4.0" "pytest>=8.3.5" \
  "python-docx>=1.1.2" "python-pptx>=1.0.2" "reportlab>=4.4.1" "requests>=2.32.2" "requests-toolbelt>=1.0.0" \
  ragflow-sdk==0.22.1 pytest-timeout
echo "ready: $cases"
