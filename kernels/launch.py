"""Launch helpers shared by the GEMV-class kernel families (kernels/gemv.py, ladder.py, tc_gemv.py): a bound launch,
the device's SM count, and how many blocks of a compiled kernel fit on one SM.
CuPy is imported inside functions only.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass
class Launch:
    """One kernel launch with its arrays and geometry bound: calling it enqueues the kernel on the current stream (no
    allocation, CUDA-graph capturable)."""

    func: Any
    grid: int
    block: int
    args: tuple[Any, ...]
    shared_mem: int = 0  # dynamic shared memory bytes

    def __call__(self) -> None:
        self.func((self.grid,), (self.block,), self.args, shared_mem=self.shared_mem)


def device_sms() -> int:
    """SMs of the current device."""
    import cupy

    return _sms(cupy.cuda.Device().id)


@cache
def _sms(device_id: int) -> int:
    """SMs of a device, read once (Device.attributes queries every attribute on each use)."""
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def resident_blocks(func: Any, threads: int) -> int:
    """Blocks of `threads` threads of a compiled kernel that fit on one SM by registers and threads (>= 1)."""
    regs = max(int(func.num_regs), 1)
    regs_per_warp = -(-regs * 32 // 256) * 256
    warps = -(-threads // 32)
    return max(1, min(32, 2048 // threads, (65536 // regs_per_warp) // warps))
