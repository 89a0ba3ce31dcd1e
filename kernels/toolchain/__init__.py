"""The build toolchain every family uses: NVRTC through ctypes (nvrtc), the cubin disk cache and loading (build), the
CPU compile check of every .cu and launcher option set (compile_check), and driver calls CuPy lacks (cuda_driver).
Declares where CUDA sources live and how they are found (build.source_path, NVRTC_OPTIONS); ptx.cuh is shared PTX."""
