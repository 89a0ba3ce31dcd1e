#!/usr/bin/env bash
# One device call (2026-12-02, third pass): the wgmma GPU tests first (a wg_* kernel whose float64 check fails is left
# out of the recording), then the H200 dataset (bench/record_h200.sh, EXTRA_SWEEPS=1, the other GPU tests inside),
# then, in the time left, the wgmma tile benchmarks of bench/dev_wgmma.sh packed as $OUT/dev.tgz.
#   WORKBENCH_GIT_COMMIT=<sha> bash bench/record_wg.sh
export PYTHONPATH=. PYTHONUNBUFFERED=1
DEV=$(mktemp -d)
python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_wgmma_gpu.py > "$DEV/wgmma-tests.log" 2>&1
EXC=""
for k in wg_bf16 wg_fp16 wg_w8a8 wg_fp8 wg_w4a16; do
  if grep -E "^FAILED .*(test_kernel_matches_float64_reference|test_refuses_bad_shapes)\[.*$k" "$DEV/wgmma-tests.log" \
      >/dev/null; then EXC="$EXC $k"; fi
done
echo "wgmma GPU tests: $(tail -1 "$DEV/wgmma-tests.log"); left out of the recording:${EXC:- none}"
EXCLUDE="$EXC" EXTRA_SWEEPS=1 GPU_TESTS="tests/test_gemv_gpu.py tests/test_tensorcore_gpu.py tests/test_profiler_gpu.py" \
  timeout 430 bash bench/record_h200.sh > "$DEV/record-stdout.log" 2>&1
echo "record rc=$? at ${SECONDS} s"; tail -25 "$DEV/record-stdout.log"
PACK_TO=$OUT
pack() { (cd "$DEV" && tar czf "$PACK_TO/dev.tgz.tmp" . && mv "$PACK_TO/dev.tgz.tmp" "$PACK_TO/dev.tgz"); }
pack
left=$((${DEADLINE:-540} - SECONDS))
if (( left > 30 )); then
  export -f pack; export DEV PACK_TO
  DEV_OUT="$DEV" SKIP_TESTS=1 AFTER_EACH=pack timeout "$left" bash bench/dev_wgmma.sh 2>&1 | tail -80
fi
pack
