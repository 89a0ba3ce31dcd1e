#!/usr/bin/env bash
# The wheel as a user gets it: build it, install it WITHOUT extras in a fresh venv, and from a folder outside the
# checkout run every subcommand's --help plus gpus, predict, model-check, export, recommend, validate, kernel-facts
# and the dashboard's first page. A command may exit 0, 1 or 2 (2: one line of bad input, e.g. "no measured
# dataset"); a "Traceback" in its output, another exit code, a file written into site-packages or a top-level module
# other than the project's packages fails the check. CI runs it after the test suite (.ci/run).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip_q=(-q --disable-pip-version-check)

t0=$(date +%s)
# the working tree as a fresh clone has it (tracked and new files, nothing git ignores: no build/, no .venv/)
mkdir -p "$work/src"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) \
    | tar -xf - -C "$work/src"
python3 -m pip wheel "${pip_q[@]}" --no-deps -w "$work/dist" "$work/src"
if ! python3 -m venv "$work/venv" 2>/dev/null; then  # a Debian python3 without python3-venv
    python3 -m pip install "${pip_q[@]}" virtualenv && python3 -m virtualenv -q "$work/venv"
fi
"$work/venv/bin/python" -m pip install "${pip_q[@]}" "$work/dist"/*.whl
echo "wheel built and installed without extras in $(( $(date +%s) - t0 )) s"

bin="$work/venv/bin"
site="$("$bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
top="$(cat "$site"/roofline_workbench-*.dist-info/top_level.txt | sort | tr '\n' ' ')"
if [ "$top" != "kernels models workbench workbench_data " ]; then
    echo "FAIL: top-level modules of the wheel: $top(expected kernels models workbench workbench_data)"
    exit 1
fi
mkdir -p "$work/elsewhere"
cd "$work/elsewhere"
touch "$work/before"
failed=0

check() {  # check EXPECTED_CODES COMMAND...: run it, fail on a traceback or an exit code outside EXPECTED_CODES
    local codes="$1"
    shift
    local rc=0
    "$@" >"$work/out" 2>&1 || rc=$?
    if grep -q "Traceback" "$work/out" || [[ " $codes " != *" $rc "* ]]; then
        echo "FAIL (exit $rc, expected $codes): ${*#"$bin/"}"
        tail -20 "$work/out" | sed 's/^/    /'
        failed=1
    else
        echo "ok   (exit $rc): ${*#"$bin/"}  $(grep -m1 '^error:' "$work/out" || true)"
    fi
}

wb="$bin/workbench"
check "0" "$wb" --help
commands="$("$bin/python" -c 'from workbench.interfaces.cli import click_command; print(*sorted(click_command().commands))')"
for c in $commands; do
    check "0" "$wb" "$c" --help
done
check "0" "$wb" gpus
check "0" "$wb" schemes
check "0" "$wb" predict
check "0" "$wb" predict --model llama-2-7b --gpu h200-sxm --tier kernel --batch 1,16
# a GPU never calibrated: its terms transferred from the reference calibration the catalogue ships
check "0" "$wb" predict --tier kernel --gpu a100-sxm-80gb --kernel cublas_bf16,trtllm_wo_int4 --batch 1 --csv "$work/k.csv"
if ! grep -q ",transferred," "$work/k.csv"; then
    echo "FAIL: predict --tier kernel on a100-sxm-80gb did not transfer its GPU terms (kernel_terms_source)"
    failed=1
fi
check "0" "$wb" model-check --by-gpu --data-dir "$repo/data"
check "2" "$wb" predict --tier calibrated  # no dataset: one line naming --data-dir and WORKBENCH_DATA
check "0" "$wb" predict --tier calibrated --gpu h200-sxm --data-dir "$repo/data"
check "0" "$wb" model-check --data-dir "$repo/data"
check "2" "$wb" export "$work/comparison.csv"  # no dataset
check "0" "$wb" export "$work/comparison.csv" --data "$repo/data"
WORKBENCH_DATA="$repo/data" check "0" "$wb" export "$work/speedups.csv" --table speedups
check "2" "$wb" recommend
check "0" "$wb" recommend --data-dir "$repo/data"
check "0 1" "$wb" validate --data-dir "$repo/data"
check "0 1" "$wb" kernel-facts --check
check "0" "$wb" stale --all --data-dir "$repo/data"  # no git here: rows without a fingerprint read "unknown"
# the installed kernels' code fingerprints are the checkout's: rows profiled from either compare as the same code
prints='from kernels import fingerprint, registry
from kernels.grouped.grouped import KERNELS
print(sorted((n, fingerprint.of_kernel(n)) for n in [s.name for s in registry.specs()] + list(KERNELS)))'
checkout_prints="$(cd "$repo" && python3 -c "$prints")"
installed_prints="$("$bin/python" -c "$prints" 2>&1 || true)"
if [ "$installed_prints" != "$checkout_prints" ] || [[ "$checkout_prints" == *None* ]]; then
    echo "FAIL: the installed kernels' code fingerprints differ from the checkout's (or one is missing)"
    failed=1
else
    echo "ok   : the installed kernels' code fingerprints are the checkout's"
fi
check "2" "$wb" kernel-facts  # the installed catalogue is read-only: refused in one line
check "0" "$wb" kernel-facts --out "$work/kernel-facts.json"
check "0" "$bin/python" -c "
from workbench.interfaces.dashboard.factory import create_app
client = create_app('$repo/data').server.test_client()
for url in ('/', '/assets/style.css', '/assets/plotly-workbench.min.js', '/assets/regenerator-runtime.js'):
    assert client.get(url).status_code == 200, url
"
written="$(find "$site" -newer "$work/before" -type f -not -path '*/__pycache__/*' | head -5)"
if [ -n "$written" ]; then
    echo "FAIL: the commands wrote into site-packages: $written"
    failed=1
fi
echo "wheel check: $([ "$failed" = 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - t0 )) s"
exit "$failed"
