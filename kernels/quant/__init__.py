"""Canonical quantizers and dequantizers of every scheme (quant, NumPy or CuPy) and the offline packers of weights
into the kernels' layouts: pack_w4 (W4A16 GEMVs), pack_tc (the W4A16 tensor-core GEMM), pack_q8 (8-bit TC GEMV).
Declares the W4 code layout, the formats, granularities and scale dtypes; no CUDA here (imported by the analysis)."""
