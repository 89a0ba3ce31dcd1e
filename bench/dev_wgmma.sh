#!/usr/bin/env bash
# Development call for the wgmma kernels (device machine): a TMA smoke probe, the GPU tests, timings beside cuBLAS bf16
# and the mma.sync kernels with tile alternatives (cp.async and TMA), two Nsight Compute probes.
# Results under $OUT: probe.txt, tests.log, wg.csv, wg_tiles.csv, ncu.tgz.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/probe.txt
import cupy
from kernels import registry, wgmma, reference
for name in ("wg_bf16", "wg_w8a8"):
    for M, N, K in ((16, 4096, 4096), (100, 4096, 11008), (256, 22016, 4096)):
        r = wgmma.make_runner(registry.get(name), tile=wgmma.WgTile(2, 4, 128, True, 2 if M <= 128 else 1))
        p = r.make(M, N, K, seed=3, reference=True)
        r.launch(p); cupy.cuda.runtime.deviceSynchronize()
        err = reference.rel_error(r.output(p), p.ref)
        print("probe tma", name, M, N, K, "rel_err %.3g" % err, "ok" if err < 6e-3 else "BAD", flush=True)
PY
timeout 200 python3 -m pytest -m gpu -q -x tests/test_wgmma_gpu.py > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
mkdir -p $OUT/a $OUT/b
timeout 230 python3 bench/bench_tensorcore.py --out $OUT/a --kernels wg_bf16 \
  --wg-tiles=${WG_TILES:--,2x4x128xt,2x6x128xt,2x4x128xt2,2x5x128xt2,2x6x128xt2} \
  --batches 16,32,64,128,256 --samples 8 > $OUT/a.log 2>&1; echo "bench rc=$?"
timeout 120 python3 bench/bench_tensorcore.py --out $OUT/b --kernels wg_w8a8,wg_fp8 --wg-tiles=-,2x6x128xt,2x4x128xt2,2x5x128xt2 \
  --batches 16,32,64,128 --samples 8 > $OUT/b.log 2>&1; echo "w8a8 rc=$?"
bash bench/ncu_probe.sh wgtma2_m128 wg_gemm wg_bf16 128 22016 4096 2x4x128xt2
(cd $OUT && tar czf ncu.tgz ncu && rm -rf ncu; cp a/bench_tensorcore.csv wg.csv; cp b/bench_tensorcore.csv wg_tiles.csv; rm -rf a b)
python3 - <<'PY'
import csv, os
for f in ("wg.csv", "wg_tiles.csv"):
    p = os.path.join(os.environ["OUT"], f)
    if not os.path.exists(p): print("missing", f); continue
    for r in csv.DictReader(open(p)):
        print(f"{r['N']}x{r['K']} M={r['M']:>3} {r['kernel']:12} {r['variant']:6} {r['tile']:22} {float(r['time_s'])*1e6:8.2f} us  x{float(r['speedup_vs_cublas_bf16']):.2f}")
PY
