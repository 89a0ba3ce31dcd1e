"""`workbench calibrate`: measure this GPU's ceilings with our own micro-kernels (kernels/calib/calib.cu).

Read-only stream (16-byte loads, 2 GiB), copy, L2 read (a footprint of a quarter of the L2, looped), the launch floor
(empty kernel back to back, and replayed in a CUDA graph), FP32 FMA, mma.sync f16/bf16/s8 (and e4m3, emulated on
sm_90), plus cuBLAS fp16 matmul through CuPy as a cross-check; and the kernel-aware model's microbenchmarks
(workbench.measure.microbench): the L2-cold read curve (time against bytes and CTAs), the dequantization issue rates and
the library (torch/cuBLAS) tensor peaks per precision. Each ceiling is the median of back-to-back launches
between CUDA events, with NVML clocks sampled throughout; stored as data/calibration/<gpu>-<uuid8>.json.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from workbench.measure import microbench
from workbench.measure.environment import Environment, detect, require_gpu
from workbench.measure.nvml import NvmlSampler
from workbench.measure.timing import CudaTimer, summarize
from workbench.storage import store
from workbench.storage.schema import SCHEMA_VERSION

READ_BYTES = 2 << 30
COPY_BYTES = 1 << 30  # each of source and destination
MMA_FLOP = {"f16": 2 * 16 * 8 * 16, "bf16": 2 * 16 * 8 * 16, "s8": 2 * 16 * 8 * 32, "e4m3": 2 * 16 * 8 * 32}
CHAINS = 4  # independent mma chains per warp in calib.cu
FMA_CHAINS = 8
THREADS = 256


@dataclass(frozen=True)
class Ceiling:
    key: str
    value: float  # SI: bytes/s, s, FLOP/s
    spread_rel: float
    detail: str


def _time(timer: CudaTimer, fn: Callable[[], None], repeats: int = 15, warmup: int = 3) -> tuple[float, float]:
    """Median seconds per call of `fn` over back-to-back calls, and the relative spread."""
    for _ in range(warmup):
        fn()
    timer.synchronize()
    s = summarize(timer.elapsed(fn, repeats))
    return s.median, s.spread_rel


def _module(cc: int, log: Callable[[str], None]) -> tuple[Any, bool]:
    """The compiled calib.cu, with the e4m3 mma kernel where the GPU and this NVRTC accept it."""
    from kernels.toolchain.build import module

    if cc >= 89:
        try:
            mod = module("calib.cu", ("-DCALIB_FP8",))
            mod.get_function("mma_e4m3")
            return mod, True
        except Exception as exc:  # an NVRTC without e4m3 mma: calibrate the rest
            log(f"note: e4m3 mma.sync did not compile here ({type(exc).__name__}); fp8_mma_flops left out")
    return module("calib.cu"), False


def _stream_ceilings(mod: Any, env: Environment, timer: CudaTimer, rng: Any, usink: Any) -> list[Ceiling]:
    import cupy as cp

    out = []
    grid = (env.sm_count * 8,)
    buf = rng.integers(0, 2**31 - 1, size=READ_BYTES // 4, dtype=cp.int32)
    fn = mod.get_function("read_stream")
    n16 = np.uint64(READ_BYTES // 16)
    t, sp = _time(timer, lambda: fn(grid, (THREADS,), (buf, n16, usink)))
    how = f"{READ_BYTES / 2**30:.0f} GiB, grid {grid[0]}x{THREADS}"
    out.append(Ceiling("read_bytes_per_s", READ_BYTES / t, sp, how))

    src = buf[: COPY_BYTES // 4]
    dst = cp.empty_like(src)
    fn = mod.get_function("copy_stream")
    c16 = np.uint64(COPY_BYTES // 16)
    t, sp = _time(timer, lambda: fn(grid, (THREADS,), (src, dst, c16)))
    how = f"{COPY_BYTES / 2**30:.0f} GiB each way, read + written"
    out.append(Ceiling("copy_bytes_per_s", 2 * COPY_BYTES / t, sp, how))

    foot = (env.l2_bytes // 4) // 16 * 16
    small = dst[: foot // 4]
    fn = mod.get_function("l2_read")
    reps = 64
    args = (small, np.uint64(foot // 16), np.int32(reps), usink)
    t, sp = _time(timer, lambda: fn((env.sm_count * 4,), (512,), args))
    out.append(Ceiling("l2_bytes_per_s", foot * reps / t, sp, f"{foot / 1e6:.1f} MB footprint x {reps} passes"))
    return out


def _launch_ceilings(mod: Any, timer: CudaTimer) -> list[Ceiling]:
    empty = mod.get_function("empty_kernel")
    n = 1000

    def launches() -> None:
        for _ in range(n):
            empty((1,), (32,), ())

    t, sp = _time(timer, launches, repeats=7)
    out = [Ceiling("launch_floor_s", t / n, sp, f"{n} empty launches back to back")]
    replay = timer.capture(launches)
    t, sp = _time(timer, replay, repeats=7)
    out.append(Ceiling("graph_launch_floor_s", t / n, sp, f"{n} empty launches in one CUDA graph ({timer.method})"))
    return out


def _compute_ceilings(mod: Any, env: Environment, timer: CudaTimer, has_fp8: bool, sink: Any) -> list[Ceiling]:
    blocks = env.sm_count * 8
    threads = blocks * THREADS
    iters = 2048
    fn = mod.get_function("fma_fp32")
    t, sp = _time(timer, lambda: fn((blocks,), (THREADS,), (np.int32(iters), np.float32(1.5), sink)))
    flop = 2.0 * 2 * FMA_CHAINS * iters * threads  # 2 FMAs per chain per iteration
    out = [Ceiling("fp32_flops", flop / t, sp, f"{FMA_CHAINS} chains x {iters} iters")]
    warps = threads // 32
    for key, entry, kind in (("fp16_mma_flops", "mma_f16", "f16"), ("bf16_mma_flops", "mma_bf16", "bf16"),
                             ("int8_mma_ops", "mma_s8", "s8"), ("fp8_mma_flops", "mma_e4m3", "e4m3")):
        if kind == "e4m3" and not has_fp8:
            continue
        fn = mod.get_function(entry)
        t, sp = _time(timer, lambda fn=fn: fn((blocks,), (THREADS,), (np.int32(iters), np.uint32(7), sink)))
        flop = float(MMA_FLOP[kind]) * CHAINS * iters * warps
        out.append(Ceiling(key, flop / t, sp, f"mma.sync {kind}, {CHAINS} chains/warp, {warps} warps"))
    return out


def _cublas_ceiling(timer: CudaTimer, rng: Any, size: int = 8192) -> Ceiling:
    import cupy as cp

    a = rng.standard_normal((size, size), dtype=cp.float32).astype(cp.float16)
    b = rng.standard_normal((size, size), dtype=cp.float32).astype(cp.float16)
    c = cp.empty((size, size), dtype=cp.float16)
    t, sp = _time(timer, lambda: cp.matmul(a, b, out=c), repeats=10)
    return Ceiling("cublas_fp16_flops", 2.0 * size**3 / t, sp, f"cupy.matmul fp16 {size}^3, random normal")


def _cluster_residency(mod: Any, log: Callable[[str], None]) -> list[Ceiling]:
    """Clusters of 2..CLUSTER_PIECES_MAX CTAs resident at once with one CTA per SM (256 threads, 200 KB of dynamic
    shared memory, as the wgmma kernels), from the driver's occupancy calculator: the clustered split grid's limit
    (models.kernel_terms.cluster_pieces). Counts, not rates; only on GPUs with clusters (compute capability 9.0+)."""
    from kernels.toolchain.cuda_driver import max_active_clusters
    from models.kernel_terms import CLUSTER_PIECES_MAX, resident_clusters_key

    fn = mod.get_function("empty_kernel")
    smem = 200 * 1024
    fn.max_dynamic_shared_size_bytes = smem
    how = "cuOccupancyMaxActiveClusters, 256 threads and 200 KB per CTA"
    try:
        return [Ceiling(resident_clusters_key(c), float(max_active_clusters(fn, 256, smem, c)), 0.0, how)
                for c in range(2, CLUSTER_PIECES_MAX + 1)]
    except RuntimeError as exc:  # the model then takes SMs // size (GpuTerms.sources says "datasheet")
        log(f"note: cluster residency not measured ({exc})")
        return []


def _model_ceilings(mod: Any, has_fp8: bool, env: Environment, timer: CudaTimer, sink: Any,
                    log: Callable[[str], None]) -> list[Ceiling]:
    rates = microbench.dequant_rates(mod, mod if has_fp8 else None, env.sm_count, timer, sink, _time)
    rates.update(microbench.library_peaks(env.cc, log))
    return [Ceiling(k, v, sp, how) for k, (v, sp, how) in rates.items()]


def measure_read_curve(env: Environment, timer: CudaTimer, log: Callable[[str], None] = print) -> dict[str, list]:
    """The L2-cold read curve (workbench.measure.microbench.read_curve) as columns for the calibration JSON."""
    import cupy as cp

    mod, _ = _module(env.cc, log)
    pool = cp.random.default_rng(99).integers(0, 2**31 - 1, size=READ_BYTES // 4, dtype=cp.int32)
    usink = cp.zeros(4, dtype=cp.uint32)
    with timer:
        points = microbench.read_curve(mod, env.sm_count, env.l2_bytes, pool, timer, usink, _time)
    del pool
    cp.get_default_memory_pool().free_all_blocks()
    sizes, best, ctas = microbench.best_curve(points)
    for v, t, g in zip(sizes, best, ctas, strict=True):
        log(f"  read {v / 1e6:>10.3f} MB  {t * 1e6:8.2f} us  {v / t / 1e9:7.0f} GB/s  (grid {g})")
    return {"bytes": [p.bytes for p in points], "ctas": [p.ctas for p in points],
            "time_s": [p.time_s for p in points], "spread_rel": [p.spread_rel for p in points],
            "l2_cold": [p.l2_cold for p in points]}


def measure_ceilings(env: Environment, timer: CudaTimer, log: Callable[[str], None] = print) -> list[Ceiling]:
    """Every ceiling of CALIBRATION_CEILINGS that this GPU has, in SI units."""
    import cupy as cp

    mod, has_fp8 = _module(env.cc, log)
    sink = cp.zeros(4, dtype=cp.float32)
    usink = cp.zeros(4, dtype=cp.uint32)
    rng = cp.random.default_rng(1234)
    out: list[Ceiling] = []
    with timer:
        for group in (lambda: _stream_ceilings(mod, env, timer, rng, usink), lambda: _launch_ceilings(mod, timer),
                      lambda: _compute_ceilings(mod, env, timer, has_fp8, sink), lambda: [_cublas_ceiling(timer, rng)],
                      lambda: _model_ceilings(mod, has_fp8, env, timer, sink, log),
                      lambda: _cluster_residency(mod, log) if env.cc >= 90 else []):
            for c in group():
                out.append(c)
                log(f"  {c.key:<28} {c.value:.4g}  (spread {c.spread_rel:.2%}; {c.detail})")
            cp.get_default_memory_pool().free_all_blocks()
    return out


def _device_max_clock_hz() -> float:
    import cupy as cp

    return float(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["clockRate"]) * 1e3


def calibrate(out_dir: str | Path, env: Environment | None = None, log: Callable[[str], None] = print) -> Path:
    """Measure the ceilings and write the calibration JSON for this GPU; returns its path."""
    require_gpu()
    out_dir = Path(out_dir)
    store.check_writable(out_dir / ".probe.json")
    env = env or detect()
    timer = CudaTimer()
    log(f"calibrating {env.gpu_name} ({env.gpu_uuid}), cc {env.compute_capability}, {env.sm_count} SMs, "
        f"L2 {env.l2_bytes / 1e6:.0f} MB")
    sampler = NvmlSampler(uuid=env.gpu_uuid or None, interval_s=0.01)
    with sampler, sampler.window() as window:
        ceilings = measure_ceilings(env, timer, log)
        read_curve = measure_read_curve(env, timer, log)
    if sampler.warning:
        log(f"note: {sampler.warning}")
    clocks = window.summary
    sm_clock, source = clocks.sm_clock_median_hz, "nvml median during calibration"
    if not clocks.n_samples:  # no NVML: the device's rated maximum, so the model still has a clock
        sm_clock, source = _device_max_clock_hz(), "device maximum clock (no NVML)"
    values: dict[str, Any] = {c.key: c.value for c in ceilings}
    values["fp8_mma_emulated"] = env.cc == 90 and "fp8_mma_flops" in values
    doc = {
        "schema_version": SCHEMA_VERSION,
        "gpu_name": env.gpu_name,
        "gpu_key": env.gpu_key,
        "gpu_uuid": env.gpu_uuid,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "sm_clock_hz": sm_clock,
        "sm_clock_source": source,
        "sm_clock_min_hz": clocks.sm_clock_min_hz if clocks.n_samples else None,
        "mem_clock_hz": clocks.mem_clock_median_hz if clocks.n_samples else None,
        "power_median_w": clocks.power_median_w if clocks.n_samples else None,
        "clock_reasons": clocks.clock_reasons,
        "throttled": clocks.throttled,
        "environment": env.columns(),
        "ceilings": values,
        "details": {c.key: {"spread_rel": c.spread_rel, "how": c.detail} for c in ceilings},
        "read_curve": read_curve,
    }
    path = store.write_calibration(out_dir, doc)
    log(f"wrote {path} (SM clock {clocks.sm_clock_median_hz / 1e6:.0f} MHz median, {clocks.n_samples} NVML samples)")
    return path
