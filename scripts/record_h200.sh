#!/usr/bin/env bash
# Record the shipped H200 dataset on the device machine, in the repo root:
#   WORKBENCH_GIT_COMMIT=<sha> bash scripts/record_h200.sh          (full: ~5-8 min)
#   QUICK=1 bash scripts/record_h200.sh                             (small scale: every step, a few points)
#   EXCLUDE="tc_w4a16" ... leaves kernels out of both sweeps
#   EXTRA_SWEEPS=1 ... also the lm_head (32000x4096) and L2-hot sweeps, packed as extra.tgz
# Steps: GPU tests, calibrate, the default sweep (timed, with where the time goes), a second identical sweep to a
# scratch path (run-to-run difference), the independent-timer cross-check (bench/crosscheck_timer.py: every kernel
# family at M = 1, 16, 128, L2-cold and hot; its verdict table goes to summary.txt, every point to crosscheck.csv). Results go to $OUT (<= 8 files):
# dataset.tgz (data/calibration + data/measurements, to unpack in the repo root), record.log, crosscheck.csv,
# sweep2.parquet, summary.txt (also printed last).
set -uo pipefail
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/record-out}
mkdir -p "$OUT"
LOG="$OUT/record.log"
SUMMARY="$OUT/summary.txt"
SCRATCH=$(mktemp -d)
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
step() { echo; echo "=== $* ($(date +%T))"; }

if [[ "${QUICK:-0}" == "1" ]]; then
  TESTS=(tests/test_profiler_gpu.py)
  CAL_DIR="$SCRATCH/calibration"
  SWEEP=(--kernel gemv_fp32_ref --kernel fp16_gemv --kernel tc_fp16 --shape 4096x4096 --shape 22016x4096
         --batch 1 --batch 16 --batch 64)
  OUT1="$SCRATCH/measurements/sweep-cold.parquet"
  XCHECK=(--kernels fp16_gemv,tc_fp16,cublas_fp16 --batches 1,16)
else
  read -r -a TESTS <<<"${GPU_TESTS:-tests}"   # GPU_TESTS="a.py b.py" limits the test files
  CAL_DIR=data/calibration
  SWEEP=()
  OUT1=data/measurements/h200-sxm/sweep-cold.parquet
  XCHECK=()
fi
OUT2="$SCRATCH/sweep2.parquet"
EXC_ARGS=()
for k in ${EXCLUDE:-}; do EXC_ARGS+=(--exclude "$k"); done   # EXCLUDE="kernel_a kernel_b": leave broken kernels out
SWEEP+=("${EXC_ARGS[@]}")

{
  step "environment"
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -m workbench env

  step "compile the GPU tests' kernels (parallel NVRTC into kernels.toolchain.build's cubin cache)"
  python3 bench/bench_gemv.py --prewarm-only --prewarm-tests 2>&1 | tail -1

  step "GPU tests"
  t0=$SECONDS
  python3 -m pytest -m gpu -q -p no:cacheprovider "${TESTS[@]}" 2>&1 | tail -25
  note "gpu tests: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"

  step "calibrate"
  t0=$SECONDS
  python3 -m workbench calibrate --out "$CAL_DIR"
  note "calibrate: exit $? in $((SECONDS - t0)) s"

  step "sweep 1 (the dataset)"
  t0=$SECONDS
  python3 -m workbench profile "${SWEEP[@]}" --fresh --no-progress --out "$OUT1" --calibration-dir "$CAL_DIR"
  note "sweep 1: exit $? in $((SECONDS - t0)) s wall (process start, imports and NVRTC compile included)"

  step "sweep 2 (scratch, run-to-run)"
  t0=$SECONDS
  python3 -m workbench profile "${SWEEP[@]}" --fresh --no-progress --out "$OUT2" --calibration-dir "$CAL_DIR"
  note "sweep 2: exit $? in $((SECONDS - t0)) s wall (NVRTC cache warm)"
  python3 scripts/run_diff.py "$OUT1" "$OUT2" | tee -a "$SUMMARY"

  step "resume check: re-running sweep 1 measures nothing"
  python3 -m workbench profile "${SWEEP[@]}" --no-progress --out "$OUT1" --calibration-dir "$CAL_DIR" | tail -3

  step "independent timer: every kernel family at M = 1, 16, 128, L2-cold and hot (table last, every point in crosscheck.csv)"
  t0=$SECONDS
  python3 bench/crosscheck_timer.py "${XCHECK[@]}" --out "$OUT/crosscheck.csv" | grep -v "^skipped" | tail -20 | tee -a "$SUMMARY"
  note "crosscheck: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
} 2>&1 | tee "$LOG"

cp "$OUT2" "$OUT/sweep2.parquet" 2>/dev/null
if [[ "${QUICK:-0}" == "1" ]]; then
  tar czf "$OUT/dataset.tgz" -C "$SCRATCH" calibration measurements 2>/dev/null
else
  tar czf "$OUT/dataset.tgz" data/calibration data/measurements
fi
if [[ "${EXTRA_SWEEPS:-0}" == "1" && "${QUICK:-0}" != "1" ]]; then
  # the lm_head shape and the L2-hot sweep, packed apart so a cut-short call still returns dataset.tgz
  {
    step "lm_head 32000x4096, L2-cold"
    timeout 150 python3 -m workbench profile --shape 32000x4096 "${EXC_ARGS[@]}" --fresh --no-progress \
      --out data/measurements/h200-sxm/lm-head-cold.parquet --calibration-dir "$CAL_DIR"
    note "lm_head sweep: exit $?"
    step "default sweep, L2-hot"
    timeout 120 python3 -m workbench profile --hot "${EXC_ARGS[@]}" --fresh --no-progress \
      --out data/measurements/h200-sxm/sweep-hot.parquet --calibration-dir "$CAL_DIR"
    note "hot sweep: exit $?"
  } 2>&1 | tee -a "$LOG"
  tar czf "$OUT/extra.tgz" data/measurements/h200-sxm/lm-head-cold.parquet data/measurements/h200-sxm/sweep-hot.parquet
fi
echo
echo "=== summary"
python3 - "$OUT1" "$CAL_DIR" <<'PY' | tee -a "$SUMMARY"
import sys, json, glob
from workbench.storage.store import load_measurements
df = load_measurements(sys.argv[1])
for f in sorted(glob.glob(sys.argv[2] + "/*.json")):
    c = json.load(open(f))["ceilings"]
    print("calibration:", ", ".join(f"{k}={v:.3g}" for k, v in c.items() if isinstance(v, float)))
print(f"{len(df)} points, {df['kernel'].nunique()} kernels; throttled {int(df['throttled'].fillna(False).sum())}; "
      f"max spread {df['spread_rel'].max():.2%}; max ref error {df['ref_error_rel'].max():.2e}")
cols = ["kernel", "N", "K", "M", "time_median_s", "spread_rel", "ref_error_rel", "sm_clock_median_hz"]
t = df[df["M"].isin([1, 16, 128])][cols].copy()
t["us"] = (t.pop("time_median_s") * 1e6).round(2)
t["GBps"] = (df.loc[t.index, "bytes"] / df.loc[t.index, "time_median_s"] / 1e9).round(0)
print(t.sort_values(["kernel", "N", "K", "M"]).to_string(index=False, max_rows=400))
PY
