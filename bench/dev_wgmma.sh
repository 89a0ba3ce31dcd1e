#!/usr/bin/env bash
# Development call for the wgmma kernels (device machine): a smoke probe of every wg kernel, the GPU tests, timings
# beside cuBLAS bf16 and the mma.sync kernels with tile alternatives (cp.async, TMA, 2 blocks per warpgroup; w4a16).
# Results under $OUT: probe.txt, tests.log, bf16.csv, bytes8.csv, w4.csv (+ .log of each).
# DEV_OUT=dir writes there instead of $OUT; SKIP_TESTS=1 skips the probe and the tests (bench/record_wg.sh ran them);
# AFTER_EACH=command runs after each benchmark (record_wg.sh packs what is there, so a call cut short keeps it).
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${DEV_OUT:-$OUT}
mkdir -p "$OUT"
if [[ "${SKIP_TESTS:-0}" != "1" ]]; then
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
timeout 90 python3 - <<'PY' 2>&1 | tee $OUT/probe.txt
import cupy
from kernels import registry, wgmma, reference
for name in ("wg_w4a16", "wg_bf16"):
    for M, N, K in ((16, 4096, 4096), (32, 4096, 11008), (100, 4096, 11008), (256, 22016, 4096)):
        try:
            r = wgmma.make_runner(registry.get(name), tile=None if name == "wg_w4a16" else wgmma.WgTile(2, 4, 128, True, 2 if M <= 128 else 1))
            p = r.make(M, N, K, seed=3, reference=True)
            r.launch(p); cupy.cuda.runtime.deviceSynchronize()
            err = reference.rel_error(r.output(p), p.ref)
            print("probe", name, M, N, K, "rel_err %.3g" % err, "ok" if err < 6e-3 else "BAD", flush=True)
        except Exception as e:
            print("probe", name, M, N, K, "ERROR", type(e).__name__, str(e)[:400], flush=True)
PY
timeout 240 python3 -m pytest -m gpu -q tests/test_wgmma_gpu.py > $OUT/tests.log 2>&1; echo "tests rc=$?"; grep -E "passed|failed|Error" $OUT/tests.log | tail -8
fi
bench() { tag=$1; shift; mkdir -p $OUT/$tag
  timeout "$@" --out $OUT/$tag > $OUT/$tag.log 2>&1; echo "$tag rc=$?"
  cp $OUT/$tag/bench_tensorcore.csv $OUT/$tag.csv 2>/dev/null; rm -rf $OUT/$tag
  if [[ -n "${AFTER_EACH:-}" ]]; then eval "$AFTER_EACH"; fi; }
bench w4 150 python3 bench/bench_tensorcore.py --kernels wg_w4a16,tc_w4a16 --batches 16,32,64,128 --samples 6 \
  --wg-tiles=-,2x8x256xt2,1x6x256xt2
bench bf16 170 python3 bench/bench_tensorcore.py --kernels wg_bf16,tc_bf16 --batches 16,32,64,128,256 --samples 6 \
  --wg-tiles=-,2x4x128xt,2x4x128xt2,2x5x128xt2
bench bytes8 110 python3 bench/bench_tensorcore.py --kernels wg_w8a8,wg_fp8 --batches 16,32,64,128 --samples 6 \
  --wg-tiles=-,2x4x128xt2,2x5x128xt2
bench w4m64 60 python3 -c "import sys; sys.path.insert(0, 'bench'); import kernels.wgmma as w; del w.W4_TILES[128]; \
import bench_tensorcore as b; sys.exit(b.main(sys.argv[1:]))" --kernels wg_w4a16 --batches 128 --samples 6
python3 - <<'PY'
import csv, os
for f in ("w4.csv", "w4m64.csv", "bf16.csv", "bytes8.csv"):
    p = os.path.join(os.environ["OUT"], f)
    if not os.path.exists(p): print("missing", f); continue
    for r in csv.DictReader(open(p)):
        print(f"{r['N']}x{r['K']} M={r['M']:>3} {r['kernel']:10} {r['variant']:6} {r['tile']:22} {float(r['time_s'])*1e6:7.2f} us x{float(r['speedup_vs_cublas_bf16']):.2f}")
PY
