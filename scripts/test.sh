#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine (Debian's chromium for the browser test, the package
# with its test extras), then runs ruff and the whole suite on the CPU. GPU tests (marker `gpu`) skip without a GPU.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test,cluster]'

python3 -m ruff check .
set +e
python3 -m pytest -n "${PYTEST_WORKERS:-2}" "$@"   # 2 workers: the CI machine has 2 cores
rc=$?
set -e
if [ "$rc" = 5 ]; then
    echo "error: no tests collected" >&2
fi
exit "$rc"
