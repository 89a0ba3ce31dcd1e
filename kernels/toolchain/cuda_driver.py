"""The CUDA driver calls the wgmma runners need that CuPy does not offer, through ctypes: TMA tensor maps
(cuTensorMapEncodeTiled) and the residency of thread-block clusters (cuOccupancyMaxActiveClusters). Imported by
kernels.wgmma.wgmma and workbench.measure.calibrate; libcuda is opened on first use only."""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _libcuda() -> Any:
    import ctypes

    return ctypes.CDLL("libcuda.so.1")


def max_active_clusters(fn: Any, threads: int, smem_bytes: int, size: int) -> int:
    """How many clusters of `size` CTAs of fn (a CuPy RawKernel launched with `threads` per block and `smem_bytes` of
    dynamic shared memory) can be resident at once on this device (cuOccupancyMaxActiveClusters with a
    cluster-dimension launch attribute, via ctypes)."""
    import ctypes

    class Attribute(ctypes.Structure):  # CUlaunchAttribute: id, padding, a 64-byte value union
        _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]

    class LaunchConfig(ctypes.Structure):
        _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                    ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(Attribute)), ("num_attrs", ctypes.c_uint)]

    attr = Attribute(4, b"", (ctypes.c_uint * 16)(size, 1, 1))  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    conf = LaunchConfig((ctypes.c_uint * 3)(size, 1, 1), (ctypes.c_uint * 3)(threads, 1, 1), smem_bytes, None,
                        ctypes.pointer(attr), 1)
    n = ctypes.c_int()
    ptr = fn.kernel.ptr  # the CUfunction of a CuPy RawKernel
    rc = _libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(n), ctypes.c_void_p(ptr), ctypes.byref(conf))
    if rc:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed with CUresult {rc} (clusters of {size})")
    return n.value


def tma_map(ptr: int, rows: int, k_bytes: int, box_rows: int) -> bytes:
    """The 128-byte CUtensorMap of a rows x k_bytes row-major byte matrix at device address ptr: boxes of 128 bytes x
    box_rows rows, 128-byte swizzle, zeros outside the matrix (cuTensorMapEncodeTiled of the driver, via ctypes)."""
    import ctypes

    lib = _libcuda()
    buf = ctypes.create_string_buffer(128 + 64)
    base = ctypes.addressof(buf)
    off = (-base) % 64  # the map must be 64-byte aligned
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    rc = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(base + off), ctypes.c_int(0), u32(2), ctypes.c_void_p(ptr),  # UINT8, rank 2
        (u64 * 2)(k_bytes, rows), (u64 * 1)(k_bytes), (u32 * 2)(128, box_rows), (u32 * 2)(1, 1),
        ctypes.c_int(0), ctypes.c_int(3), ctypes.c_int(2), ctypes.c_int(0))  # no interleave, 128B swizzle, L2 128B
    if rc:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {rc} ({rows}x{k_bytes} bytes, box {box_rows})")
    return buf.raw[off:off + 128]
