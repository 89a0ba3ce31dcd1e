"""Device benchmark of the tensor-core GEMM kernels beside cuBLAS bf16 (torch F.linear), in the same run.

Every point is timed by the profiler's loop (workbench.measure.timing.measure): checked against the float64 reference,
L2-cold (input sets rotating through >= 3x the L2 size), CUDA-graph replays of back-to-back launches between events,
median per launch. Bytes are what each kernel's device arrays hold (kernels.problems), FLOPs 2*M*N*K.

    PYTHONPATH=. python bench/bench_tensorcore.py --out $OUT [--shapes 22016x4096,4096x11008] [--batches 16,32]
        [--variants narrow,wide]   (default: the SELECT table's choice per M, reported as its variant name)
        [--grid rule,rule-slots,stream-k]   (wgmma kernels: models.kernel_terms.persistent_grid's grid with a split
            tile's pieces summed in a cluster where they can be (the default), the same grid summed through slots in
            global memory, and/or stream-K over every SM; docs/kernels-wgmma.md's sixth and seventh passes)
        [--wg-tiles=-,2x4x128,2x4x128xt,2x4x128xt2]   (wgmma kernels wg_*: warpgroups x stages x k-tile bytes
            forced at every M, "xt" = the TMA kernel, "xtN" = with N 64-channel blocks per warpgroup, "@BM" = batch
            rows per m-tile forced too (e.g. 1x8x128xt@128: 64-channel tiles, 128-row m-tiles), "-" = the default
            kernels.wgmma.wgmma.WG_TILES; note the "=": a list starting with "-") [--budget 0.2]
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from pathlib import Path

KERNELS = ("tc_bf16", "tc_w4a16", "tc_w8a8", "tc_fp8")


def _device_info():
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return name, int(props["l2CacheSize"]), int(props["multiProcessorCount"])


def _measure(runner, M: int, N: int, K: int, l2: int, budget_s: float):
    """The profiler's timing loop (workbench.measure.timing.measure): float64
    check, L2-cold rotation, CUDA graph replays."""
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    return measure(runner, M, N, K, l2, CudaTimer(), TimingConfig(budget_s=budget_s))


def bench_cublas(M: int, N: int, K: int, l2: int, budget_s: float):
    from kernels import registry

    return _measure(registry.runner("cublas_bf16"), M, N, K, l2, budget_s)


def bench_kernel(name: str, M: int, N: int, K: int, l2: int, budget_s: float, per_sm: int | None,
                 variant=None, grid: str = "rule") -> tuple:
    """variant: a tensorcore.VARIANTS name for tc_* kernels, a wgmma.WgTile (or None) for wg_* kernels; grid: one of
    wgmma.GRIDS (wg_* kernels)."""
    from kernels import registry
    from kernels.tensorcore import tensorcore
    from kernels.wgmma import wgmma

    spec = registry.get(name)
    if spec.runner == "kernels.wgmma.wgmma:make_runner":
        runner = wgmma.make_runner(spec, per_sm, variant, grid=grid)
    elif spec.runner == "kernels.wgmma.wg_w8a16:make_runner":
        from kernels.wgmma import wg_w8a16

        runner = wg_w8a16.make_runner(spec, per_sm, variant, grid=grid)
    else:
        runner = tensorcore.make_runner(spec, per_sm, variant)
    made = []  # the launch configs of the input sets (a wgmma grid may take a cluster the plain config lacks)
    make = runner.make

    def recording_make(*args, **kwargs):
        problem = make(*args, **kwargs)
        made.append(problem.tc_config)
        return problem

    runner.make = recording_make
    t = _measure(runner, M, N, K, l2, budget_s)
    return t, made[-1] if made else runner.config(M, N, K)


def _write_csv(out: Path, rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "bench_tensorcore.csv.tmp"
    with tmp.open("w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    tmp.replace(out / "bench_tensorcore.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--shapes", default="22016x4096,4096x11008")
    ap.add_argument("--batches", default="16,32,64,128,256")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--budget", type=float, default=0.2, help="seconds of timing loop per point")
    ap.add_argument("--per-sm", default="", help="comma list of CTAs-per-SM overrides to sweep (default: auto)")
    ap.add_argument("--variants", default="", help="comma list of tensorcore.VARIANTS to compare (default: SELECT)")
    ap.add_argument("--wg-tiles", default="", help="comma list of WGxSTAGESxKT tiles for wg_* kernels, '-' = default")
    ap.add_argument("--grid", default="rule", help="comma list of wgmma grids: rule (default), rule-slots, stream-k")
    args = ap.parse_args(argv)
    from kernels.wgmma import wgmma

    grids = [g for g in args.grid.split(",") if g]
    if not grids or any(g not in wgmma.GRIDS for g in grids):
        print(f"bench_tensorcore: --grid takes a comma list of {', '.join(wgmma.GRIDS)}, got {args.grid!r}",
              file=sys.stderr)
        return 2

    gpu, l2, sms = _device_info()
    print(f"# {gpu}: {sms} SMs, L2 {l2 / 2**20:.0f} MiB", flush=True)
    per_sms: list[int | None] = [int(v) for v in args.per_sm.split(",") if v] or [None]
    variants: list[str | None] = [v for v in args.variants.split(",") if v] or [None]
    wg_tiles = [None if t == "-" else wgmma.parse_tile(t) for t in args.wg_tiles.split(",") if t] or [None]
    rows = []
    for shape in args.shapes.split(","):
        N, K = (int(v) for v in shape.lower().split("x"))
        for M in (int(v) for v in args.batches.split(",")):
            t = bench_cublas(M, N, K, l2, args.budget)
            base = t.stats.median
            flops = 2.0 * M * N * K
            rows.append(dict(N=N, K=K, M=M, kernel="cublas_bf16", variant="", tile="", grid="", per_sm="", time_s=base,
                             p10_s=t.stats.p10, p90_s=t.stats.p90, sets=t.rotate_sets, bytes=t.bytes, flops=flops,
                             rel_err=t.ref_error_rel))
            for name in args.kernels.split(","):
                wg = name.startswith("wg_")
                options = wg_tiles if wg else variants
                for ps, var, grid in ((p, v, g) for p in per_sms for v in options for g in (grids if wg else [""])):
                    try:
                        t, cfg = bench_kernel(name, M, N, K, l2, args.budget, ps, var, grid or "rule")
                    except Exception as exc:  # a failing kernel is reported, the sweep goes on
                        print(f"FAILED {name} {var} M={M} {shape}: {type(exc).__name__}: {exc}", file=sys.stderr)
                        continue
                    tile = (f"{cfg.bm}x{cfg.m_tiles}/{cfg.bn}n/{cfg.threads}t/{cfg.stages}s/{cfg.kt}B"
                            + (f"/cl{cfg.cluster}" if cfg.cluster > 1 else ""))
                    rows.append(dict(N=N, K=K, M=M, kernel=name, variant=cfg.variant, tile=tile, grid=grid,
                                     per_sm=ps or "auto", time_s=t.stats.median, p10_s=t.stats.p10,
                                     p90_s=t.stats.p90, sets=t.rotate_sets, bytes=t.bytes, flops=flops,
                                     rel_err=t.ref_error_rel))
            for r in rows:
                if r["N"] == N and r["K"] == K and r["M"] == M:
                    r["speedup_vs_cublas_bf16"] = base / r["time_s"]
            _write_csv(Path(args.out), rows)  # after every point group: a run cut short keeps what it measured
            print(f"done {shape} M={M}", flush=True)

    print("\n| N×K | M | kernel | variant | tile | grid | CTAs/SM | µs | TFLOP/s | GB/s | × cuBLAS bf16 | rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['N']}×{r['K']} | {r['M']} | {r['kernel']} | {r['variant']} | {r['tile']} | {r['grid']} | "
              f"{r['per_sm']} | "
              f"{r['time_s'] * 1e6:.1f} | {r['flops'] / r['time_s'] / 1e12:.0f} | "
              f"{r['bytes'] / r['time_s'] / 1e9:.0f} | "
              f"{r['speedup_vs_cublas_bf16']:.2f} | {r['rel_err']:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
