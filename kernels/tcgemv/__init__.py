"""GEMV-class kernels on tensor cores (mma.sync, batch 1-16/32): W4A16 (tc_gemv), BF16/FP16 (tc_gemv_f16), FP8 and
W8A8 (tc_gemv_q8), W8A16 (tc_gemv_w8a16), each with its gemv_*_tc.cu source beside it and tc_gemv_common.cuh.
Each declares SPECS (KernelSpec with facts) and its TABLE of column configurations per batch bin."""
