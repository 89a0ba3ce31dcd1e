#!/usr/bin/env bash
# Nsight Compute probe (device machine): details page, SASS source page with stall samples, and a few headline
# metrics per kernel, under $OUT/ncu/<tag>.{log,txt,sass.csv} (the .ncu-rep is dropped: it is large).
#   bash bench/ncu_probe.sh TAG KERNEL_REGEX KERNEL M N K [VARIANT]   one kernel
#   bash bench/ncu_probe.sh                                           the first probe's six kernels
export PYTHONPATH=. PYTHONUNBUFFERED=1
mkdir -p "$OUT/ncu"
probe() { tag=$1; shift; re=$1; shift
  timeout 100 ncu --clock-control none --set full --import-source no -k "regex:$re" -s 1 -c 1 -o "$OUT/ncu/$tag" \
    python3 bench/ncu_probe.py "$@" > "$OUT/ncu/$tag.log" 2>&1
  echo "ncu $tag rc=$?"
  ncu --import "$OUT/ncu/$tag.ncu-rep" --page details --print-units base > "$OUT/ncu/$tag.txt" 2>&1
  ncu --import "$OUT/ncu/$tag.ncu-rep" --page source --csv --print-source sass > "$OUT/ncu/$tag.sass.csv" 2>/dev/null \
    || echo "no source page"
  rm -f "$OUT/ncu/$tag.ncu-rep"
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|No Eligible|Warp Cycles Per Issued|Theoretical Occ|Executed Ipc Active" \
    "$OUT/ncu/$tag.txt" | head -14
}
if [[ $# -gt 0 ]]; then
  probe "$@"
  exit
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
probe w4gemv_m1 gemv_w4a16 w4a16_gemv 1 22016 4096
probe w4gemv_m4 gemv_w4a16 w4a16_gemv 4 22016 4096
probe tcw4_m16 tc_gemm_w4a16 tc_w4a16 16 22016 4096 v2
probe tcbf16_m16 tc_gemm_bf16 tc_bf16 16 22016 4096 v2
probe tcbf16_m128 tc_gemm_bf16 tc_bf16 128 22016 4096 v2
probe bf16gemv_down gemv_bf16 bf16_gemv 1 4096 11008
