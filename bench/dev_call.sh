#!/usr/bin/env bash
# One development call on the device: compile, check the changed tensor-core kernels, time the variants, profile.
# Results under $OUT: tc_w4.csv, tc_bytes.csv, ncu.tgz, tests.log.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
python3 bench/prewarm_tc.py 2>&1 | tail -2
timeout 200 python3 -m pytest -m gpu -q -x tests/test_tensorcore_gpu.py -k "${TEST_K:-tc_w4a16 or tc_bf16}" \
  > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
mkdir -p $OUT/w4 $OUT/bytes
timeout 220 python3 bench/bench_tensorcore.py --out $OUT/w4 --kernels tc_w4a16 --variants ${W4_VARIANTS:-v2,v3,v4} \
  --batches ${W4_BATCHES:-1,4,16,32,64,128} --samples 8 > $OUT/w4.log 2>&1; echo "w4 rc=$?"
timeout 200 python3 bench/bench_tensorcore.py --out $OUT/bytes --kernels ${BYTE_KERNELS:-tc_bf16,tc_w8a8} \
  --variants v1,v2,v3 --batches 16,32,64,128,256 --samples 8 > $OUT/bytes.log 2>&1; echo "bytes rc=$?"
for t in "tcw4_m16_v3 tc_gemm_w4a16 tc_w4a16 16 22016 4096 v3" "tcw4_m16_v4 tc_gemm_w4a16 tc_w4a16 16 22016 4096 v4" \
         "tcw4_m16_v2 tc_gemm_w4a16 tc_w4a16 16 22016 4096 v2" "w4gemv_m1 gemv_w4a16 w4a16_gemv 1 22016 4096" \
         "tcbf16_m16_v3 tc_gemm_bf16 tc_bf16 16 22016 4096 v3"; do
  bash bench/ncu_probe.sh $t  # word-split on purpose: TAG REGEX KERNEL M N K VARIANT
done
(cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu && cp w4/bench_tensorcore.csv tc_w4.csv; cp bytes/bench_tensorcore.csv tc_bytes.csv; rm -rf w4/*.csv bytes/*.csv)
python3 - <<'PY'
import csv, os
for f in ("tc_w4.csv", "tc_bytes.csv"):
    p = os.path.join(os.environ["OUT"], f)
    if not os.path.exists(p): print("missing", f); continue
    for r in csv.DictReader(open(p)):
        print(f"{r['N']}x{r['K']} M={r['M']:>3} {r['kernel']:12} {r['variant']:3} {r['tile']:22} {float(r['time_s'])*1e6:8.2f} us  x{float(r['speedup_vs_cublas_bf16']):.2f}")
PY
