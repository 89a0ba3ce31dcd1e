"""CUDA kernels (`*.cu`), their registry and launchers, NumPy quantizers and float64 references.

CuPy is imported lazily inside functions, so this package imports on a machine without a GPU.
"""
