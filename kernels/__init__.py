"""CUDA kernels (`*.cu`), their registry and launchers, NumPy quantizers and float64 references.

One subpackage per family, each .cu/.cuh beside the launcher that loads it: gemv/ (CUDA-core GEMVs, the chapter's
kernels, the W4A16 ladder), tcgemv/ (mma.sync GEMVs), tensorcore/ (mma.sync GEMMs), wgmma/ (sm_90a GEMMs), grouped/
(MoE), calib/ (the calibration microbenchmarks), quant/ (quantizers, packers) and toolchain/ (NVRTC, cubin cache,
compile check, driver calls). On top: the registry, the problems the kernels are run on (problems.py/.cu), launch
geometry shared by the GEMV families (launch), the library peers and the float64 references.

CuPy is imported lazily inside functions, so this package imports on a machine without a GPU.
"""
