"""Microbenchmarks behind the kernel-aware model's terms, run by `workbench calibrate` (kernels/calib/calib.cu).

- read curve: the fastest L2-cold read of V bytes (4 KiB .. 1 GiB, 16-byte loads) for grids of 1, 2, 4 and 8 CTAs
  per SM, each launch of a CUDA graph reading its own slice of a 2 GiB buffer (slices rotate over >= 3x the L2 where
  the buffer allows). Its small-V end is the fixed cost of a kernel that reads anything (graph launch, first-byte
  latency, drain); its large-V slope the bandwidth a streaming kernel reaches.
- dequantization issue rates: weights per second of the int4 (0x6400 magic), int8 (PRMT magic) and e4m3 (hardware
  cvt) conversion work of a GEMV at batch 1, each multiplied into half2 accumulators, with no memory traffic.
- library tensor peaks: 8192^3 matmuls through torch (bf16 mm, fp8 `_scaled_mm`, int8 `_int_mm`): the rate a
  production wgmma kernel reaches, the ceiling of our wgmma kernels and of the cuBLAS peers.
Every result is SI (bytes, seconds, per second). CuPy and torch are imported inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

READ_CURVE_BYTES = tuple(1 << k for k in range(12, 31))  # 4 KiB .. 1 GiB
READ_CURVE_CTAS_PER_SM = (1, 2, 4, 8)
READ_THREADS = 256
MAX_SLICES = 256  # launches per captured graph
DQ_ITERS = 4096
WEIGHTS_PER_ITER = {"w4": 8 * 8, "w8": 8 * 4, "e4m3": 8 * 4}  # weights one thread converts per loop iteration
LIB_SIZE = 8192


@dataclass(frozen=True)
class CurvePoint:
    bytes: int
    ctas: int
    time_s: float
    spread_rel: float
    l2_cold: bool


def slices_for(nbytes: int, l2_bytes: int, pool_bytes: int) -> int:
    """How many distinct slices of `nbytes` one graph rotates through: >= 3x the L2 where the pool and MAX_SLICES
    allow, at least one."""
    want = math.ceil(3 * l2_bytes / nbytes) + 1
    return max(1, min(want, pool_bytes // nbytes, MAX_SLICES))


def read_curve(mod: Any, sm_count: int, l2_bytes: int, pool: Any, timer: Any, usink: Any,
               time_fn: Callable[..., tuple[float, float]], sizes: tuple[int, ...] = READ_CURVE_BYTES
               ) -> list[CurvePoint]:
    """Seconds per launch of the read kernel for every (bytes, grid) of sizes x READ_CURVE_CTAS_PER_SM (sizes are
    multiples of 16 bytes: READ_CURVE_BYTES for the calibration, a kernel's own bytes for bench/anchors.py)."""
    fn = mod.get_function("read_stream")
    pool_bytes = int(pool.nbytes)
    words = pool.view(np.uint32) if pool.dtype != np.uint32 else pool
    out = []
    for nbytes in sizes:
        if nbytes > pool_bytes:
            continue
        n = slices_for(nbytes, l2_bytes, pool_bytes)
        step = (pool_bytes // n) // 16 * 16  # spread the slices over the whole pool
        views = [words[(k * step) // 4:(k * step + nbytes) // 4] for k in range(n)]
        n16 = np.uint64(nbytes // 16)
        for per_sm in READ_CURVE_CTAS_PER_SM:
            grid = (sm_count * per_sm,)

            def launches(views=views, grid=grid, n16=n16) -> None:
                for v in views:
                    fn(grid, (READ_THREADS,), (v, n16, usink))

            replay = timer.capture(launches)
            t, sp = time_fn(timer, replay, repeats=7, warmup=2)
            out.append(CurvePoint(nbytes, grid[0], t / n, sp, n * nbytes >= 3 * l2_bytes))
    return out


def best_curve(points: list[CurvePoint]) -> tuple[list[float], list[float], list[int]]:
    """(bytes, fastest seconds, its grid) per size: what the model interpolates."""
    by_size: dict[int, CurvePoint] = {}
    for p in points:
        if p.bytes not in by_size or p.time_s < by_size[p.bytes].time_s:
            by_size[p.bytes] = p
    sizes = sorted(by_size)
    return [float(s) for s in sizes], [by_size[s].time_s for s in sizes], [by_size[s].ctas for s in sizes]


def dequant_rates(mod: Any, mod_fp8: Any, sm_count: int, timer: Any, sink: Any,
                  time_fn: Callable[..., tuple[float, float]]) -> dict[str, tuple[float, float, str]]:
    """Weights per second of each conversion microbenchmark: {key: (rate, spread, how)}."""
    blocks, threads = sm_count * 8, READ_THREADS
    out = {}
    for kind, entry, m in (("w4", "dq_w4", mod), ("w8", "dq_w8", mod), ("e4m3", "dq_e4m3", mod_fp8)):
        if m is None:
            continue
        fn = m.get_function(entry)
        args = (np.int32(DQ_ITERS), np.uint32(7), sink)
        t, sp = time_fn(timer, lambda fn=fn, args=args: fn((blocks,), (threads,), args))
        weights = float(WEIGHTS_PER_ITER[kind]) * DQ_ITERS * blocks * threads
        out[f"dequant_{kind}_weights_per_s"] = (weights / t, sp, f"{entry}: {blocks}x{threads} threads x "
                                                f"{DQ_ITERS} iterations, half2 accumulation")
    return out


def _torch_time(fn: Callable[[], Any], repeats: int = 10, warmup: int = 3) -> tuple[float, float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
    events[0].record()
    for i in range(repeats):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    t = np.array([a.elapsed_time(b) * 1e-3 for a, b in zip(events, events[1:], strict=False)])
    med = float(np.median(t))
    return med, float((np.percentile(t, 90) - np.percentile(t, 10)) / med)


def library_peaks(cc: int, log: Callable[[str], None]) -> dict[str, tuple[float, float, str]]:
    """Achieved FLOP/s of torch's 8192^3 matmuls (cuBLAS / cuBLASLt): {key: (rate, spread, how)}; {} without torch."""
    try:
        import torch
    except ImportError:
        log("note: torch not installed; library tensor peaks left out")
        return {}
    n = LIB_SIZE
    flop = 2.0 * n**3
    g = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    out = {}
    t, sp = _torch_time(lambda: torch.mm(a, b))
    out["library_bf16_flops"] = (flop / t, sp, f"torch.mm bf16 {n}^3")
    if cc >= 89 and hasattr(torch, "_scaled_mm"):
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t().contiguous()
        one = torch.ones((), device="cuda")
        t, sp = _torch_time(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        out["library_fp8_flops"] = (flop / t, sp, f"torch._scaled_mm e4m3 {n}^3, bf16 out")
    ai = torch.randint(-64, 64, (n, n), device="cuda", dtype=torch.int8, generator=g)
    bi = torch.randint(-64, 64, (n, n), device="cuda", dtype=torch.int8, generator=g)
    t, sp = _torch_time(lambda: torch._int_mm(ai, bi.t()))
    out["library_int8_ops"] = (flop / t, sp, f"torch._int_mm int8 {n}^3, int32 out")
    return out  # the operands are freed with this frame
