#!/usr/bin/env bash
# Development call for the wgmma kernels (device machine): the GPU tests, timings beside cuBLAS bf16 and the mma.sync kernels, tile alternatives, one Nsight Compute probe.
# Results under $OUT: tests.log, wg.csv, wg_tiles.csv, ncu.tgz.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
python3 -c "import cupy; print('cupy', cupy.__version__, 'nvrtc', cupy.cuda.nvrtc.getVersion())"
WGOPT=""
timeout 200 python3 -m pytest -m gpu -q -x tests/test_wgmma_gpu.py > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
mkdir -p $OUT/a $OUT/b
timeout 170 python3 bench/bench_tensorcore.py --out $OUT/a --kernels wg_bf16,wg_w8a8,wg_fp8,tc_bf16 \
  --batches 16,32,64,128,256 --samples 8 --wg-options "$WGOPT" > $OUT/a.log 2>&1; echo "bench rc=$?"
timeout 120 python3 bench/bench_tensorcore.py --out $OUT/b --kernels wg_bf16 --wg-tiles ${WG_TILES:-2x4x128,2x8x128,2x6x128,2x4x256,2x3x256} \
  --batches 16,64,128,256 --samples 8 --wg-options "$WGOPT" > $OUT/b.log 2>&1; echo "tiles rc=$?"
bash bench/ncu_probe.sh wgbf16_m256 wg_gemm wg_bf16 256 22016 4096
bash bench/ncu_probe.sh wgbf16_m16 wg_gemm wg_bf16 16 22016 4096
(cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu; cp a/bench_tensorcore.csv wg.csv; cp b/bench_tensorcore.csv wg_tiles.csv; rm -rf a b)
python3 - <<'PY'
import csv, os
for f in ("wg.csv", "wg_tiles.csv"):
    p = os.path.join(os.environ["OUT"], f)
    if not os.path.exists(p): print("missing", f); continue
    for r in csv.DictReader(open(p)):
        print(f"{r['N']}x{r['K']} M={r['M']:>3} {r['kernel']:12} {r['variant']:3} {r['tile']:22} {float(r['time_s'])*1e6:8.2f} us  x{float(r['speedup_vs_cublas_bf16']):.2f}")
PY
