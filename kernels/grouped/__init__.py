"""Grouped GEMV-class kernels for MoE decode: every expert of one layer in one launch (grouped.py), on CUDA cores
(grouped_gemv.cu) or tensor cores (grouped_tc.cu, grouped_w4_tc.cu), which include the GEMV families' .cu files.
Declares KERNELS (scheme, source, tensor cores), entries, M bins, INCLUDED sources and FACTS; no registry kernels."""
