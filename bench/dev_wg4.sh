#!/usr/bin/env bash
# Development calls (2026-12-02, fourth pass on issue 7). Everything under $OUT; a short table last.
#   bash bench/dev_wg4.sh tiles   float64 checks of the new tiles, then timings beside cuBLAS bf16 of (a) wg_w4a16 with
#                                 two warpgroups sharing a 128-channel block (WGxSx256xt1) against the shipped tiles and
#                                 tc_w4a16, (b) 4-warpgroup (256-channel) tiles of the byte GEMMs, which halve the
#                                 activation reads per weight byte, (c) Nsight Compute's launch facts of cuBLAS's kernel
#   bash bench/dev_wg4.sh parts   leave-one-part-out timings (-DWG_SKIP_MMA / _W / _FIXUP / _DEQUANT, wrong results on
#                                 purpose) of wg_bf16 and wg_w4a16, more W4A16 stage counts, Nsight Compute of ours
#                                 (W4_TILES=- times the default tiles, SKIP_W4ST=1 and NCU=0 leave the extras out)
#   bash bench/dev_wg4.sh slots   the wgmma and mma.sync GPU tests, then the tiles again (split tiles through slots)
#   bash bench/dev_wg4.sh owner   the wgmma GPU tests, then the default tiles (the k0 = 0 piece as the waiting owner)
export PYTHONPATH=. PYTHONUNBUFFERED=1
left() { echo $(( ${DEADLINE:-560} - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
bench() { tag=$1; lim=$2; shift 2; mkdir -p $OUT/$tag
  (( $(left) < 40 )) && { echo "$tag skipped (time)"; return; }
  (( lim > $(left) - 20 )) && lim=$(( $(left) - 20 ))
  timeout $lim python3 bench/bench_tensorcore.py "$@" --out $OUT/$tag > $OUT/$tag.log 2>&1
  echo "$tag rc=$? at ${SECONDS}s"; cp $OUT/$tag/bench_tensorcore.csv $OUT/$tag.csv 2>/dev/null; rm -rf $OUT/$tag; }
table() { python3 - "$@" <<'PY'
import csv, os, sys
for f in sys.argv[1:]:
    p = os.path.join(os.environ["OUT"], f + ".csv")
    if not os.path.exists(p): print("missing", f); continue
    for r in csv.DictReader(open(p)):
        print(f"{f:8} {r['N']}x{r['K']} M={r['M']:>3} {r['kernel']:11} {r['variant']:6} {r['tile']:26} "
              f"{float(r['time_s'])*1e6:7.2f} us x{float(r['speedup_vs_cublas_bf16']):.2f}")
PY
}
if [[ "${1:-tiles}" == "slots" ]]; then  # the split-tile fix-up through per-CTA slots: the wgmma and mma.sync tests,
  # then timings
  timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_wgmma_gpu.py tests/test_tensorcore_gpu.py \
    > $OUT/tests.log 2>&1
  echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.log)"; grep -E "^FAILED" $OUT/tests.log | head -20
  bench w4s 90 --kernels wg_w4a16,tc_w4a16 --batches 1,16,32,64,128,256 --samples 6 \
    --wg-tiles=-,2x6x256xt1,2x4x256xt1,2x3x256xt1
  bench b16s 90 --kernels wg_bf16,tc_bf16 --batches 16,32,64,128,256 --samples 6 --wg-tiles=-,2x4x128xt,4x4x128xt
  bench b8s 90 --kernels wg_w8a8,wg_fp8,tc_w8a8 --batches 16,32,64,128,256 --samples 6 --wg-tiles=-,2x4x128xt
  table w4s b16s b8s
  exit 0
fi
if [[ "${1:-tiles}" == "owner" ]]; then  # the fix-up with the k0 = 0 piece as the waiting owner: wgmma tests, timings
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_wgmma_gpu.py > $OUT/tests.log 2>&1
  echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.log)"; grep -E "^FAILED" $OUT/tests.log | head -20
  bench own 120 --kernels wg_bf16,wg_w8a8,wg_w4a16 --batches 16,32,64,128,256 --samples 6
  table own
  exit 0
fi
if [[ "${1:-tiles}" == "parts" ]]; then
  for opt in none WG_SKIP_MMA WG_SKIP_W WG_SKIP_FIXUP WG_SKIP_DEQUANT; do
    o=$([[ $opt == none ]] && echo "" || echo "-D$opt")
    bench w4-$opt 60 --kernels wg_w4a16 --batches 16,64,128 --samples 6 --wg-tiles=${W4_TILES:-2x6x256xt1,2x4x256xt1} \
      --wg-options="$o"
    [[ $opt == WG_SKIP_DEQUANT ]] || bench bf16-$opt 60 --kernels wg_bf16 --batches 16,64,128 --samples 6 \
      --wg-options="$o"
  done
  [[ -n "${SKIP_W4ST:-}" ]] || bench w4st 60 --kernels wg_w4a16 --batches 16,32,128 --samples 6 --wg-tiles=2x5x256xt1,2x7x256xt1,2x3x256xt1
  if [[ "${NCU:-1}" == "1" ]]; then
    (( $(left) > 80 )) && bash bench/ncu_probe.sh wgbf16_m128 wg_gemm wg_bf16 128 22016 4096
    (( $(left) > 80 )) && bash bench/ncu_probe.sh wgw4_m16 wg_gemm_w4a16 wg_w4a16 16 22016 4096 2x6x256xt1
  fi
  table w4-none w4-WG_SKIP_MMA w4-WG_SKIP_W w4-WG_SKIP_FIXUP w4-WG_SKIP_DEQUANT bf16-none bf16-WG_SKIP_MMA \
    bf16-WG_SKIP_W bf16-WG_SKIP_FIXUP w4st
  mkdir -p $OUT/ncu; (cd $OUT && tar czf parts.tgz *.csv *.log ncu 2>/dev/null && rm -rf *.csv *.log ncu)
  exit 0
fi
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_wgmma_gpu.py -k "w4a16 or other_tiles" \
  > $OUT/tests.log 2>&1; echo "tests rc=$? at ${SECONDS}s: $(tail -1 $OUT/tests.log)"
bench w4 150 --kernels wg_w4a16,tc_w4a16 --batches 16,32,64,128 --samples 6 \
  --wg-tiles=-,2x6x256xt1,2x8x256xt1,2x4x256xt1,4x4x256xt1
bench bf16 150 --kernels wg_bf16 --batches 16,32,64,128,256 --samples 6 \
  --wg-tiles=-,4x4x128xt,4x6x256xt,4x4x128,4x3x256xt
bench bytes8 90 --kernels wg_w8a8,wg_fp8 --batches 32,64,128,256 --samples 6 --wg-tiles=-,4x4x128xt,4x6x256xt
if (( $(left) > 70 )); then
  timeout 60 ncu --clock-control none --section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
    -k "regex:gemm|xmma|sm90" -s 1 -c 1 python3 bench/ncu_probe.py cublas_bf16 128 22016 4096 > $OUT/ncu-cublas.txt 2>&1
  echo "ncu rc=$?"; grep -E "^  [a-z_0-9]+.*\(|Grid Size|Block Size|Cluster Size|Registers|Shared Memory Config|Dynamic Shared|Duration|DRAM Through|L2 Cache Through|Compute \(SM\)" $OUT/ncu-cublas.txt | head -30
fi
table w4 bf16 bytes8
