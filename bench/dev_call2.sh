#!/usr/bin/env bash
# Second development call: all tensor-core GPU tests, GEMV w4a16/bf16/fp16 geometry variants at M = 1-2, the
# tensor-core variants again after the single-fence epilogue. Results under $OUT.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
python3 bench/prewarm_tc.py 2>&1 | tail -1
timeout 150 python3 -m pytest -m gpu -q tests/test_tensorcore_gpu.py > $OUT/tests.log 2>&1; echo "tests rc=$?"
tail -3 $OUT/tests.log
timeout 200 python3 bench/bench_gemv.py --kernels w4a16_gemv,bf16_gemv,fp16_gemv --batches 1,2 > $OUT/gemv.log 2>&1
echo "gemv rc=$?"; grep -E "read ceiling|best config" -A12 $OUT/gemv.log | head -30
grep -E "^  w4a16_gemv .*M=1 " $OUT/gemv.log
mkdir -p $OUT/tc
timeout 150 python3 bench/bench_tensorcore.py --out $OUT/tc --kernels tc_w4a16,tc_bf16,tc_w8a8 --variants v2,v3,v4 \
  --batches 16,32,64 --samples 8 > $OUT/tc.log 2>&1; echo "tc rc=$?"
grep "^|" $OUT/tc.log | cut -d'|' -f2-6,9,12
