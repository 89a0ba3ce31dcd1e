#!/usr/bin/env bash
# Nsight Compute probe of a few kernels (device machine): details and SASS source pages under $OUT.
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
which ncu; ncu --version | tail -1
run() { tag=$1; shift; re=$1; shift
  timeout 100 ncu --clock-control none --set full -k "regex:$re" -s 1 -c 1 -o $OUT/$tag python3 bench/ncu_probe.py "$@" > $OUT/$tag.log 2>&1
  echo "$tag rc=$?"
  ncu --import $OUT/$tag.ncu-rep --page details --print-units base > $OUT/$tag.txt 2>&1
  ncu --import $OUT/$tag.ncu-rep --page source --csv --print-source sass > $OUT/$tag.sass.csv 2>/dev/null || echo "no source page"
  grep -E "Duration|DRAM Throughput|Issue Slots Busy|Achieved Occupancy|Registers Per|No Eligible|Warp Cycles Per Issued|Theoretical Occ|Executed Ipc Active|Memory Throughput" $OUT/$tag.txt | head -14
}
run w4gemv_m1 gemv_w4a16 w4a16_gemv 1 22016 4096
run w4gemv_m4 gemv_w4a16 w4a16_gemv 4 22016 4096
run tcw4_m16 tc_gemm_w4a16 tc_w4a16 16 22016 4096 v2
run tcbf16_m16 tc_gemm_bf16 tc_bf16 16 22016 4096 v2
run tcbf16_m128 tc_gemm_bf16 tc_bf16 128 22016 4096 v2
run bf16gemv_down gemv_bf16 bf16_gemv 1 4096 11008
ls -la $OUT | head -30
