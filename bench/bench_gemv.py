"""Device benchmark of the GEMV-class kernels beside cuBLAS and torch's kernels, in one run.

    PYTHONPATH=. python bench/bench_gemv.py [--quick] [--no-variants]

Every kernel is timed by the profiler's loop (workbench.measure.timing.measure): checked against the float64 reference
(rel err = ||y - ref|| / ||ref||), L2-cold (input sets rotating through >= 3x the L2 size read from the device),
launch-gap-free (CUDA-graph replays of back-to-back launches between events; a peer that cannot be captured is timed
as eager launches, marked "events"). A read-only stream kernel measures the read ceiling in the same run. Bytes are
what each kernel's device arrays hold (kernels.problems).
Writes $OUT/gemv_bench.csv (every row, config variants too) when $OUT is set.

    PYTHONPATH=. python bench/bench_gemv.py --prewarm-only --prewarm-tests
compiles, in parallel, every kernel configuration the GPU tests use (run it before `pytest -m gpu` on a fresh
machine, or the tests compile them one by one).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kernels import registry  # noqa: E402
from kernels.gemv import gemv  # noqa: E402

SHAPES = ((22016, 4096), (4096, 11008))
READ_SRC = r"""
extern "C" __global__ void read_stream(const uint4* __restrict__ p, long long n, unsigned* sink) {
    unsigned acc = 0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += step) {
        uint4 v = __ldg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}
"""


def read_ceiling() -> float:
    """Bytes per second of a read-only stream over 4 GiB, timed by the profiler's loop (workbench.measure.timing)."""
    import cupy as cp

    from workbench.measure.timing import CudaTimer, TimingConfig, time_loop

    nbytes = 4 << 30
    buf = cp.ones(nbytes // 4, dtype=cp.int32)
    sink = cp.zeros(1, cp.uint32)
    k = cp.RawKernel(READ_SRC, "read_stream")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    n16 = np.int64(nbytes // 16)
    timer = CudaTimer()
    with timer:
        k((sms * 8,), (256,), (buf, n16, sink))
        samples = time_loop(timer, lambda: [k((sms * 8,), (256,), (buf, n16, sink)) for _ in range(4)], 4,
                            TimingConfig(budget_s=0.5, batch=3))
    return nbytes / float(np.median(samples))


def prewarm(jobs: set[tuple[str, str, tuple[str, ...]]]) -> None:
    """Compile every (source, entry, options) in parallel processes into kernels.toolchain.build's cubin cache."""
    from kernels.toolchain import build

    t0 = time.time()
    arch = build.device_arch()
    n, failed = build.prewarm((src, entry, arch, opts) for src, entry, opts in jobs)
    print(f"compiled {n} modules in {time.time() - t0:.1f} s" + (f"; failed: {failed}" if failed else ""), flush=True)


def test_jobs() -> set[tuple[str, str, tuple[str, ...]]]:
    """(source, entry, options) of every config the GPU tests compile (tests/test_gemv_gpu.py, every tensor-core
    variant of tests/test_tensorcore_gpu.py), to compile them in parallel first."""
    from kernels.tensorcore import tensorcore

    jobs = {(s.source, f"{s.entry}_m{min(v.byte_tiles)}", v.options) for s in tensorcore.SPECS
            for v in tensorcore.VARIANTS.values()}
    shapes = ((37, 256), (101, 640), (1029, 4224), (22016, 4096), (4096, 11008), (203, 2560))
    extra = ({}, {"xreg": False, "u": 2, "rw": 2, "warps": 4}, {"xreg": True, "u": 1, "rw": 4},
             {"xreg": False, "u": 4, "rw": 1, "warps": 8})
    for name, d in gemv.DEFS.items():
        for M in (1, 2, 3, 4, 5, 8, 16):
            for N, K in shapes:
                for cfg in extra if d.elems and (N, K) == (203, 2560) else ({},):
                    if K % d.k_multiple == 0:
                        jobs.add((d.source, d.entry, gemv.choose_config(name, M, N, K, **cfg).options()))
    return jobs


def variants(name: str, M: int, N: int, K: int) -> list[dict[str, Any]]:
    d = gemv.DEFS[name]
    out: list[dict[str, Any]] = [{}]
    if d.elems == 0:
        return out
    chunks = K // d.elems
    for u, rw in ((1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (4, 1)):
        w = -(-chunks // (32 * u))
        if w <= 32 and gemv._x_regs_per_chunk(d) * gemv.mb_for(M) * u <= 96:
            out.append({"xreg": True, "u": u, "rw": rw, "warps": w})
    for u, rw, warps in ((2, 2, 4), (1, 4, 4), (2, 4, 4), (1, 8, 4)):
        out.append({"xreg": False, "u": u, "rw": rw, "warps": warps})
    for u, rw in ((1, 4), (1, 8)):  # the next step's loads in flight during this one; one block per tile
        out.append({"xreg": False, "u": u, "rw": rw, "warps": 4, "prefetch": True})
        out.append({"xreg": False, "u": u, "rw": rw, "warps": 4, "persistent": False})
    if name == "w4a16_gemv":  # warps that own whole rows (no block barrier) and more loads in flight per lane
        for u, rw, warps in ((4, 2, 1), (4, 4, 1), (2, 2, 2), (2, 4, 2), (4, 1, 1)):
            out.append({"xreg": False, "u": u, "rw": rw, "warps": warps})
    return out


def run_case(name: str, M: int, N: int, K: int, l2: int, cfg: dict[str, Any] | None = None) -> dict[str, Any]:
    import cupy as cp

    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    spec = registry.get(name)
    runner: Any = gemv.GemvRunner(spec, config=cfg) if spec.backend == "nvrtc" else registry.runner(name)
    t = measure(runner, M, N, K, l2, CudaTimer(), TimingConfig(budget_s=0.2))
    used = gemv.choose_config(name, M, N, K, **(cfg or {})) if spec.backend == "nvrtc" else None
    row = {"kernel": name, "scheme": spec.scheme, "role": spec.role, "N": N, "K": K, "M": M,
           "time_s": t.stats.median, "timing": t.method, "sets": t.rotate_sets, "rel_err": t.ref_error_rel,
           "config": "" if used is None else str(asdict(used)), "variant": bool(cfg), "bytes": t.bytes}
    cp.get_default_memory_pool().free_all_blocks()
    return row


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="M=1 and 16 only")
    ap.add_argument("--no-variants", action="store_true", help="default configs only")
    ap.add_argument("--batches", default="1,4,8,16")
    ap.add_argument("--kernels", default="", help="comma list: only these kernels (and cublas_bf16)")
    ap.add_argument("--prewarm-only", action="store_true", help="compile, then exit")
    ap.add_argument("--prewarm-tests", action="store_true", help="also compile the configs the GPU tests use")
    args = ap.parse_args()
    batches = [1, 16] if args.quick else [int(b) for b in args.batches.split(",")]
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    l2 = int(dev.attributes["L2CacheSize"])
    print(f"{props['name'].decode()} cc {dev.compute_capability} SMs {dev.attributes['MultiProcessorCount']} "
          f"L2 {l2 / 1e6:.0f} MB, CuPy {cp.__version__}", flush=True)
    cc = int(dev.compute_capability)
    mine = [s.name for s in gemv.SPECS if s.min_cc <= cc]
    peers = ["cublas_bf16", "cublas_fp16", "torch_int4_tinygemm", "torch_fp8_scaled_mm", "torch_int_mm"]
    if args.kernels:
        only = set(args.kernels.split(","))
        mine, peers = [k for k in mine if k in only], ["cublas_bf16"]
    cases: list[tuple[str, int, int, int, dict[str, Any] | None]] = []
    for N, K in SHAPES:
        for M in batches:
            for name in mine:
                cases.append((name, M, N, K, None))
                tuned = name not in ("gemv_fp32_ref", "gemv_w4_ref", "fp32_gemv")
                if not args.no_variants and tuned and (M == 1 or (M == 16 and N == SHAPES[0][0])):
                    cases += [(name, M, N, K, v) for v in variants(name, M, N, K)[1:]]
            cases += [(p, M, N, K, None) for p in peers]
    jobs = set()
    for name, M, N, K, v in cases:
        if name in gemv.DEFS:
            d = gemv.DEFS[name]
            jobs.add((d.source, d.entry, gemv.choose_config(name, M, N, K, **(v or {})).options()))
    if args.prewarm_tests:
        jobs |= test_jobs()
    prewarm(jobs)
    if args.prewarm_only:
        return 0
    ceiling = read_ceiling()
    print(f"read ceiling: {ceiling / 1e12:.3f} TB/s", flush=True)
    rows = []
    for name, M, N, K, v in cases:
        try:
            row = run_case(name, M, N, K, l2, v)
        except Exception as exc:  # noqa: BLE001 - a failing peer or config is reported, the run goes on
            print(f"FAILED {name} M={M} {N}x{K} {v}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        row["ceiling_Bps"] = ceiling
        rows.append(row)
        print(f"  {name} {N}x{K} M={M} {row['time_s'] * 1e6:.2f} us err {row['rel_err']:.1e} {v or ''}", flush=True)
    base = {(r["N"], r["K"], r["M"]): r["time_s"] for r in rows if r["kernel"] == "cublas_bf16"}
    for r in rows:
        r["gbps"] = r["bytes"] / r["time_s"] / 1e9
        r["pct_ceiling"] = 100 * r["bytes"] / r["time_s"] / ceiling
        b = base.get((r["N"], r["K"], r["M"]))
        r["speedup_vs_cublas_bf16"] = b / r["time_s"] if b else float("nan")
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / "gemv_bench.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print_tables(rows)
    return 0


def print_tables(rows: list[dict[str, Any]]) -> None:
    best: dict[tuple[str, int, int, int], dict[str, Any]] = {}
    for r in rows:
        if r["variant"] and r["rel_err"] < 1e-2:
            key = (r["kernel"], r["N"], r["K"], r["M"])
            if key not in best or r["time_s"] < best[key]["time_s"]:
                best[key] = r
    print("\nbest config variant (M=1, 16):")
    for (k, N, K, M), r in sorted(best.items()):
        print(f"  {k:14s} {N}x{K} M={M:2d} {r['time_s'] * 1e6:8.2f} us  {r['config']}")
    print(f"\n{'kernel':20s} {'N x K':11s} {'M':>3s} {'us':>8s} {'GB/s':>7s} {'%ceil':>6s} {'vs bf16':>7s} "
          f"{'rel err':>8s} timing")
    for r in rows:
        if r["variant"]:
            continue
        print(f"{r['kernel']:20s} {r['N']}x{r['K']:<6d} {r['M']:3d} {r['time_s'] * 1e6:8.2f} {r['gbps']:7.0f} "
              f"{r['pct_ceiling']:6.1f} {r['speedup_vs_cublas_bf16']:7.2f} {r['rel_err']:8.1e} {r['timing']}")


if __name__ == "__main__":
    raise SystemExit(main())
