"""Device benchmark of the tensor-core W4A16 GEMV's configurations (kernels/tc_gemv.py `TABLE`), beside its peers.

    PYTHONPATH=. python3 bench/bench_tc_gemv.py [--shapes 22016x4096,...] [--batches 1,4,8,16] [--budget 0.1]

For each shape and batch: `w4a16_tc_gemv` in both columns of the table ("few" and "many" row tiles per SM) and the
VARIANTS below, `w4a16_gemv`, `wg_w4a16` (the wgmma GEMM) and cuBLAS bf16, each float64-checked on its first input set
and timed by the profiler's loop (workbench.measure.timing.measure: L2-cold rotation, CUDA-graph replays), and each
over the fastest L2-cold read of its own bytes (bench/anchors.py ReadLimit). Prints, per point, the default and the
three fastest configurations; writes every row to $OUT/tc_gemv_bench.csv (the temp directory without $OUT).
The table in kernels/tc_gemv.py and docs/kernels-tc-gemv.md came from these rows (2026-12-03, H200).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels import tc_gemv  # noqa: E402

SHAPES = ((22016, 4096), (4096, 11008), (4096, 4096), (28672, 8192))
BATCHES = (1, 4, 8, 16)
PEERS = ("w4a16_gemv", "wg_w4a16", "cublas_bf16")
CHECK_TOL = 2e-3
# Overrides tried on top of each batch bin's configurations (fields of tc_gemv.Config); nt follows M.
VARIANTS: dict[int, tuple[dict[str, Any], ...]] = {
    1: ({"warps": 8, "u": 2, "minb": 1}, {"warps": 8, "u": 3, "minb": 3}, {"warps": 16, "u": 2, "minb": 2},
        {"warps": 4, "u": 4, "minb": 8}),
    2: ({"tiles": 2, "u": 2, "warps": 8, "wscale": False}, {"wscale": True, "tiles": 4, "u": 1, "warps": 8},
        {"wscale": True, "tiles": 2, "u": 2, "warps": 8}, {"wscale": True, "tiles": 8, "u": 1, "warps": 8}),
}


def plan(shapes: tuple[tuple[int, int], ...], batches: tuple[int, ...]) -> list[tuple[str, dict[str, Any] | None,
                                                                                      int, int, int]]:
    """(kernel, full tc_gemv config or None for a peer, N, K, M) per point, every config checked by choose_config."""
    cases: list[tuple[str, dict[str, Any] | None, int, int, int]] = []
    for N, K in shapes:
        for M in batches:
            few, many = next((f, m) for top, f, m in tc_gemv.TABLE if M <= top)
            configs = [few, many] + [replace(many, **v) for v in VARIANTS[few.nt]]
            seen: list[dict[str, Any]] = []
            for c in configs:
                full = asdict(c)
                if full not in seen:
                    tc_gemv.choose_config(M, N, **full)  # refuses what cannot run
                    seen.append(full)
            cases += [(tc_gemv.NAME, c, N, K, M) for c in seen] + [(p, None, N, K, M) for p in PEERS]
    return cases


def _runner(name: str, config: dict[str, Any] | None) -> Any:
    from kernels import registry

    if config is None:
        return registry.runner(name)
    return tc_gemv.TcGemvRunner(registry.get(name), config=config)


def run(cases: list[tuple[str, dict[str, Any] | None, int, int, int]], budget: float) -> list[dict[str, Any]]:
    import cupy as cp

    from bench.anchors import ReadLimit, _Recording
    from kernels import build
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


def print_points(rows: list[dict[str, Any]]) -> None:
    for N, K, M in sorted({(r["N"], r["K"], r["M"]) for r in rows}):
        here = [r for r in rows if (r["N"], r["K"], r["M"]) == (N, K, M) and r["rel_err"] < CHECK_TOL]
        peer = {r["kernel"]: r["time_s"] for r in here if not r["config"]}
        cub = peer.get("cublas_bf16", math.nan)
        mine = sorted((r for r in here if r["config"]), key=lambda r: r["time_s"])
        default = str(asdict(tc_gemv.choose_config(M, N, sms=_sms())))
        gv, wg = (peer.get(k, math.nan) * 1e6 for k in ("w4a16_gemv", "wg_w4a16"))
        print(f"\n{N}x{K} M={M}: cuBLAS bf16 {cub * 1e6:.2f} us, w4a16_gemv {gv:.2f}, wg_w4a16 {wg:.2f}")
        for r in [r for r in mine if r["config"] == default][:1] + [r for r in mine if r["config"] != default][:3]:
            tag = "default" if r["config"] == default else "       "
            print(f"  {tag} {r['time_s'] * 1e6:7.2f} us  {r['x_read_limit']:.2f}x read  {cub / r['time_s']:.2f}x cuBLAS"
                  f"  {r['config']}")


def _sms() -> int:
    from kernels.launch import device_sms

    return device_sms()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the tensor-core W4A16 GEMV's configurations (run on the device)")
    ap.add_argument("--shapes", default=",".join(f"{n}x{k}" for n, k in SHAPES))
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--budget", type=float, default=0.1, help="seconds of timing loop per point")
    args = ap.parse_args(argv)
    try:
        shapes = tuple(tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(","))
        batches = tuple(int(m) for m in args.batches.split(","))
        if any(len(s) != 2 or min(s) < 1 for s in shapes) or any(not 1 <= m <= tc_gemv.M_MAX for m in batches):
            raise ValueError
    except ValueError:
        print(f"bench_tc_gemv: --shapes takes NxK,... and --batches M,... with 1 <= M <= {tc_gemv.M_MAX}",
              file=sys.stderr)
        return 2
    rows = run(plan(shapes, batches), args.budget)
    path = Path(os.environ.get("OUT") or tempfile.gettempdir()) / "tc_gemv_bench.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["kernel"])
        w.writeheader()
        w.writerows(rows)
    print_points(rows)
    print(f"\nrows: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
