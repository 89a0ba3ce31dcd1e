"""Device benchmark of the tensor-core GEMVs' configurations (kernels/tcgemv/tc_gemv.py, tc_gemv_q8.py, tc_gemv_f16.py
and tc_gemv_w8a16.py `TABLE`), beside their peers.

    PYTHONPATH=. python3 bench/bench_tc_gemv.py [--kernel w4a16_tc_gemv] [--shapes 22016x4096,...]
        [--batches 1,4,8,16] [--budget 0.1]

For each shape and batch: the kernel (`w4a16_tc_gemv`, `fp8_tc_gemv`, `w8a8_tc_gemv`, `bf16_tc_gemv`,
`fp16_tc_gemv`, `w8a16_tc_gemv` or `w8a16_bf16_tc_gemv`) in every column of its table
(by row tiles per SM) and the variants below, and its peers (FAMILIES: our other kernels of the scheme
and the library kernel it is judged against), each float64-checked on its first input set and timed by the
profiler's loop (workbench.measure.timing.measure: L2-cold rotation, CUDA-graph replays), and each over the fastest
L2-cold read of its own bytes (bench/anchors.py ReadLimit). Prints, per point, the default and the three fastest
configurations; writes every row to $OUT/<kernel>_bench.csv (the temp directory without $OUT).
The tables in kernels/tcgemv/tc_gemv.py, tc_gemv_q8.py, tc_gemv_f16.py and docs/kernels-tc-gemv.md came from these rows
(H200).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.tcgemv import tc_gemv, tc_gemv_f16, tc_gemv_q8, tc_gemv_w8a16  # noqa: E402

SHAPES = ((22016, 4096), (4096, 11008), (4096, 4096), (28672, 8192))
CHECK_TOL = 2e-3


@dataclass(frozen=True)
class Family:
    module: ModuleType  # tc_gemv, tc_gemv_q8 or tc_gemv_f16: TABLE, M_MAX, choose_config, the runner class
    peers: tuple[str, ...]  # the last one is the anchor the kernel is printed against
    batches: tuple[int, ...]  # the default --batches
    # overrides tried on top of each batch bin's configurations (fields of the module's Config), by the bin's nt
    variants: dict[int, tuple[dict[str, Any], ...]]


_W4_VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {
    1: ({"warps": 8, "u": 2, "minb": 1}, {"warps": 8, "u": 3, "minb": 3}, {"warps": 16, "u": 2, "minb": 2},
        {"warps": 4, "u": 4, "minb": 8}),
    2: ({"tiles": 2, "u": 2, "warps": 8, "wscale": False}, {"wscale": True, "tiles": 4, "u": 1, "warps": 8},
        {"warps": 8, "u": 1, "tiles": 1, "minb": 1},
        {"wscale": True, "tiles": 2, "u": 2, "warps": 8}, {"wscale": True, "tiles": 8, "u": 1, "warps": 8}),
}
_Q8_VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {
    1: ({"warps": 8, "u": 4, "minb": 2}, {"warps": 8, "u": 2, "minb": 4}, {"warps": 16, "u": 2, "minb": 2}),
    2: ({"warps": 16, "u": 2, "minb": 2}, {"warps": 8, "u": 2, "minb": 2}, {"warps": 8, "u": 2, "tiles": 2, "minb": 1}),
}
_FP8_VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {  # the same and the e4m3 mma (no conversion to f16)
    1: _Q8_VARIANTS[1] + ({"f16": False}, {"f16": False, "warps": 8, "u": 4, "minb": 2}),
    2: _Q8_VARIANTS[2] + ({"f16": False}, {"f16": False, "warps": 16, "u": 1, "minb": 1}),
}
_F16_VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {  # a 16-bit chunk is 2 KB per warp and row tile
    1: ({"warps": 8, "u": 2, "minb": 2}, {"warps": 16, "u": 1, "minb": 2}, {"warps": 4, "u": 2, "minb": 4},
        {"warps": 8, "u": 1, "minb": 2}, {"warps": 8, "u": 3, "minb": 2}),
    2: ({"warps": 8, "u": 2, "minb": 2}, {"warps": 16, "u": 1, "minb": 2}, {"warps": 8, "u": 1, "tiles": 2, "minb": 2},
        {"warps": 4, "u": 2, "minb": 4}, {"warps": 8, "u": 2, "tiles": 2, "minb": 1}),
}
_W8A16_VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {  # a chunk is 1 KB per warp and row tile, as the 8-bit
    1: ({"warps": 8, "u": 2, "minb": 4}, {"warps": 8, "u": 4, "minb": 2}, {"warps": 16, "u": 2, "minb": 2},
        {"warps": 4, "u": 4, "minb": 8}),
    2: ({"warps": 16, "u": 2, "minb": 2}, {"warps": 8, "u": 2, "minb": 2}, {"warps": 8, "u": 2, "tiles": 2, "minb": 1},
        {"warps": 8, "u": 1, "tiles": 1, "minb": 4}, {"warps": 8, "u": 1, "tiles": 4, "minb": 1},
        {"warps": 4, "u": 1, "tiles": 4, "minb": 2}, {"warps": 8, "u": 1, "tiles": 3, "minb": 2},
        {"warps": 4, "u": 1, "tiles": 1, "minb": 4}, {"warps": 4, "u": 2, "tiles": 1, "minb": 4},
        {"warps": 4, "u": 1, "tiles": 2, "minb": 2}, {"warps": 8, "u": 1, "tiles": 2, "minb": 2},
        {"warps": 16, "u": 1, "tiles": 1, "minb": 2}),
    4: ({"tiles": 1, "warps": 8, "u": 1, "minb": 2}, {"tiles": 4, "warps": 8, "u": 1, "minb": 1},
        {"tiles": 2, "warps": 4, "u": 2, "minb": 2}, {"tiles": 2, "warps": 16, "u": 1, "minb": 1},
        {"tiles": 1, "warps": 4, "u": 1, "minb": 4}, {"tiles": 4, "warps": 4, "u": 1, "minb": 2},
        {"tiles": 1, "warps": 16, "u": 1, "minb": 1}),
    8: ({"tiles": 1, "warps": 8, "u": 1, "minb": 2}, {"tiles": 2, "warps": 4, "u": 1, "minb": 2},
        {"tiles": 4, "warps": 4, "u": 1, "minb": 1}, {"tiles": 2, "warps": 8, "u": 2, "minb": 1}),
}
FAMILIES: dict[str, Family] = {
    "w4a16_tc_gemv": Family(tc_gemv, ("w4a16_gemv", "wg_w4a16", "cublas_bf16"), (1, 4, 8, 16), _W4_VARIANTS),
    "fp8_tc_gemv": Family(tc_gemv_q8, ("fp8_gemv", "wg_fp8", "torch_fp8_scaled_mm"), (1, 2, 4, 8, 16),
                          _FP8_VARIANTS),
    "w8a8_tc_gemv": Family(tc_gemv_q8, ("w8a8_gemv", "wg_w8a8", "torch_int_mm"), (1, 2, 4, 8, 16), _Q8_VARIANTS),
    "bf16_tc_gemv": Family(tc_gemv_f16, ("bf16_gemv", "wg_bf16", "cublas_bf16"), (1, 2, 4, 8, 16), _F16_VARIANTS),
    "fp16_tc_gemv": Family(tc_gemv_f16, ("fp16_gemv", "wg_fp16", "cublas_fp16"), (1, 4, 16), _F16_VARIANTS),
    "w8a16_tc_gemv": Family(tc_gemv_w8a16, ("w8a16_gemv", "cublas_bf16"), (1, 4, 8, 16, 32, 64), _W8A16_VARIANTS),
    "w8a16_bf16_tc_gemv": Family(tc_gemv_w8a16, ("w8a16_gemv", "cublas_bf16"), (1, 4, 8, 16, 32, 64),
                                 _W8A16_VARIANTS),
}


def _choose(kernel: str, M: int, N: int = 0, sms: int = 132, **override: Any) -> Any:
    mod = FAMILIES[kernel].module
    if mod in (tc_gemv_q8, tc_gemv_f16, tc_gemv_w8a16):
        return mod.choose_config(M, N, sms, kernel, **override)
    return mod.choose_config(M, N, sms, **override)


def plan(shapes: tuple[tuple[int, int], ...], batches: tuple[int, ...],
         kernel: str = tc_gemv.NAME) -> list[tuple[str, dict[str, Any] | None, int, int, int]]:
    """(kernel, full config or None for a peer, N, K, M) per point, every config checked by choose_config."""
    fam = FAMILIES[kernel]
    cases: list[tuple[str, dict[str, Any] | None, int, int, int]] = []
    for N, K in shapes:
        for M in batches:
            cols = [c for _, c in next(cs for top, cs in fam.module.TABLE if M <= top)]
            configs = cols + [replace(cols[-1], **v) for v in fam.variants[cols[0].nt]]
            seen: list[dict[str, Any]] = []
            for c in configs:
                full = asdict(c)
                if full not in seen:
                    _choose(kernel, M, N, **full)  # refuses what cannot run
                    seen.append(full)
            peers = [p for p in fam.peers if M <= _m_max(p)]
            cases += [(kernel, c, N, K, M) for c in seen] + [(p, None, N, K, M) for p in peers]
    return cases


def _m_max(name: str) -> int:
    from kernels import registry

    return registry.get(name).m_max


def _runner(name: str, config: dict[str, Any] | None) -> Any:
    from kernels import registry

    if config is None:
        return registry.runner(name)
    if FAMILIES[name].module is tc_gemv_q8:
        return tc_gemv_q8.TcGemvQ8Runner(registry.get(name), config=config)
    if FAMILIES[name].module is tc_gemv_f16:
        return tc_gemv_f16.TcGemvF16Runner(registry.get(name), config=config)
    if FAMILIES[name].module is tc_gemv_w8a16:
        return tc_gemv_w8a16.TcGemvW8A16Runner(registry.get(name), config=config)
    return tc_gemv.TcGemvRunner(registry.get(name), config=config)


def run(cases: list[tuple[str, dict[str, Any] | None, int, int, int]], budget: float) -> list[dict[str, Any]]:
    import cupy as cp

    from bench.anchors import ReadLimit, _Recording
    from kernels.toolchain import build
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    dev = cp.cuda.Device()
    l2, sms = int(dev.attributes["L2CacheSize"]), int(dev.attributes["MultiProcessorCount"])
    jobs = {j for name, c, N, K, M in cases for j in getattr(_runner(name, c), "compile_jobs", lambda *a: [])(M, N, K)}
    t0 = time.time()
    n, failed = build.prewarm(jobs)
    print(f"compiled {n} modules in {time.time() - t0:.1f} s" + (f"; failed: {failed}" if failed else ""), flush=True)
    limit = ReadLimit(l2, sms)
    rows = []
    for name, c, N, K, M in cases:
        runner = _Recording(_runner(name, c))
        try:
            t = measure(runner, M, N, K, l2, CudaTimer(), TimingConfig(budget_s=budget))
        except Exception as exc:  # noqa: BLE001 - a configuration that cannot run is reported, the run goes on
            print(f"FAILED {name} {c} M={M} {N}x{K}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
            continue
        finally:
            cp.get_default_memory_pool().free_all_blocks()
        t_read, _ = limit(runner.nbytes)
        rows.append({"kernel": name, "config": "" if c is None else str(c), "N": N, "K": K, "M": M,
                     "time_s": t.stats.median, "p90_s": t.stats.p90, "rel_err": float(t.ref_error_rel),
                     "bytes_read": runner.nbytes, "read_limit_s": t_read, "x_read_limit": t.stats.median / t_read})
    return rows


def print_points(rows: list[dict[str, Any]], kernel: str = tc_gemv.NAME) -> None:
    peers = FAMILIES[kernel].peers
    for N, K, M in sorted({(r["N"], r["K"], r["M"]) for r in rows}):
        here = [r for r in rows if (r["N"], r["K"], r["M"]) == (N, K, M) and r["rel_err"] < CHECK_TOL]
        peer = {r["kernel"]: r["time_s"] for r in here if not r["config"]}
        anchor = peer.get(peers[-1], math.nan)
        mine = sorted((r for r in here if r["config"]), key=lambda r: r["time_s"])
        default = str(asdict(_choose(kernel, M, N, sms=_sms())))
        print(f"\n{N}x{K} M={M}: " + ", ".join(f"{p} {peer.get(p, math.nan) * 1e6:.2f} us" for p in peers))
        for r in [r for r in mine if r["config"] == default][:1] + [r for r in mine if r["config"] != default][:3]:
            tag = "default" if r["config"] == default else "       "
            print(f"  {tag} {r['time_s'] * 1e6:7.2f} us  {r['x_read_limit']:.2f}x read  {anchor / r['time_s']:.2f}x "
                  f"{peers[-1]}  {r['config']}")


def _sms() -> int:
    from kernels.launch import device_sms

    return device_sms()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the tensor-core GEMVs' configurations (run on the device)")
    ap.add_argument("--kernel", default=tc_gemv.NAME)
    ap.add_argument("--shapes", default=",".join(f"{n}x{k}" for n, k in SHAPES))
    ap.add_argument("--batches", default="")
    ap.add_argument("--budget", type=float, default=0.1, help="seconds of timing loop per point")
    args = ap.parse_args(argv)
    if args.kernel not in FAMILIES:
        print(f"bench_tc_gemv: --kernel takes one of {', '.join(FAMILIES)}, got {args.kernel!r}", file=sys.stderr)
        return 2
    fam = FAMILIES[args.kernel]
    try:
        shapes = tuple(tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(","))
        batches = tuple(int(m) for m in args.batches.split(",")) if args.batches else fam.batches
        if any(len(s) != 2 or min(s) < 1 for s in shapes) or any(not 1 <= m <= fam.module.M_MAX for m in batches):
            raise ValueError
    except ValueError:
        print(f"bench_tc_gemv: --shapes takes NxK,... and --batches M,... with 1 <= M <= {fam.module.M_MAX}",
              file=sys.stderr)
        return 2
    rows = run(plan(shapes, batches, args.kernel), args.budget)
    path = Path(os.environ.get("OUT") or tempfile.gettempdir()) / f"{args.kernel}_bench.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["kernel"])
        w.writeheader()
        w.writerows(rows)
    print_points(rows, args.kernel)
    print(f"\nrows: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
