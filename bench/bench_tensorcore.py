"""Device benchmark of the tensor-core GEMM kernels beside cuBLAS bf16 (torch F.linear), in the same run.

L2-cold: each point rotates through input sets whose weights total >= 3x the L2 size (read from the device).
Launch-gap-free: every sample replays a CUDA graph of back-to-back launches over the rotated sets, timed between two
events; the per-launch time is the median over >= 10 samples. Bytes and FLOPs come from models.schemes.traffic
(w4a16 with the kernel's fp16 zero point, fp8 with per-channel / per-token scales).

    PYTHONPATH=. python bench/bench_tensorcore.py --out $OUT [--shapes 22016x4096,4096x11008] [--batches 16,32]
        [--variants v1,v2]   (default: the SELECT table's choice per M, reported as its variant name)
        [--wg-tiles=-,2x4x128,2x4x128xt,2x4x128xt2]   (wgmma kernels wg_*: warpgroups x stages x k-tile bytes
            forced at every M, "xt" = the TMA kernel, "xtN" = with N 64-channel blocks per warpgroup, "-" = the
            default kernels.wgmma.WG_TILES; note the "=": a list starting with "-") [--wg-options -DFOO]
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
from pathlib import Path

SCHEME_PARAMS = {"w4a16": {"zero": "fp16"}, "fp8": {"granularity": "per_channel"}}
KERNELS = ("tc_bf16", "tc_w4a16", "tc_w8a8", "tc_fp8")


def _device_info():
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return name, int(props["l2CacheSize"]), int(props["multiProcessorCount"])


def _time_graph(launch_all, samples: int, launches: int) -> list[float]:
    """Capture launch_all() (which enqueues `launches` kernels) in a CuPy graph; per-launch time of each replay."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        launch_all()  # warm-up (module load, first-touch)
        stream.synchronize()
        stream.begin_capture()
        launch_all()
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        times = []
        for _ in range(samples):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e-3 / launches)
    return times


def _time_torch(fns, samples: int, reps: int) -> list[float]:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            for f in fns:
                f()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3 / (reps * len(fns)))
    return times


def _n_sets(set_bytes: int, l2: int) -> int:
    return max(2, math.ceil(3 * l2 / max(set_bytes, 1)))


def _reps(est_s: float, launches: int) -> int:
    """Repeat the rotation so one replay lasts >= ~1 ms."""
    return max(1, math.ceil(1e-3 / max(est_s * launches, 1e-7)))


def bench_cublas(M: int, N: int, K: int, l2: int, samples: int) -> list[float]:
    import torch
    import torch.nn.functional as F

    w_bytes = N * K * 2
    sets = _n_sets(w_bytes, l2)
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N)
    xs = [torch.randn(M, K, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(sets)]
    ws = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=g) * 0.05 for _ in range(sets)]
    fns = [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws, strict=True)]
    reps = _reps(w_bytes / 4e12, sets)
    return _time_torch(fns, samples, reps)


def bench_kernel(name: str, M: int, N: int, K: int, l2: int, samples: int, per_sm: int | None,
                 variant=None, wg_options: tuple[str, ...] = ()) -> tuple:
    """variant: a tensorcore.VARIANTS name for tc_* kernels, a wgmma.WgTile (or None) for wg_* kernels."""
    from kernels import registry, tensorcore, wgmma

    spec = registry.get(name)
    if spec.runner == "kernels.wgmma:make_runner":
        runner = wgmma.make_runner(spec, per_sm, variant, wg_options)
    else:
        runner = tensorcore.make_runner(spec, per_sm, variant)
    runner.check(M, N, K)
    first = runner.make(M, N, K, seed=1, reference=False)
    problems = [first] + [runner.make(M, N, K, seed=2 + i, reference=False)
                          for i in range(_n_sets(first.nbytes, l2) - 1)]

    def launch_all(reps: int) -> None:
        for _ in range(reps):
            for p in problems:
                runner.launch(p)

    reps = _reps(first.nbytes / 3e12, len(problems))
    times = _time_graph(lambda: launch_all(reps), samples, reps * len(problems))
    return times, first.tc_launch, len(problems), first.tc_config


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
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--per-sm", default="", help="comma list of CTAs-per-SM overrides to sweep (default: auto)")
    ap.add_argument("--variants", default="", help="comma list of tensorcore.VARIANTS to compare (default: SELECT)")
    ap.add_argument("--wg-tiles", default="", help="comma list of WGxSTAGESxKT tiles for wg_* kernels, '-' = default")
    ap.add_argument("--wg-options", default="", help="space-separated NVRTC options for the wg_* kernels")
    args = ap.parse_args(argv)

    from kernels import registry
    from models.schemes import get_scheme, traffic

    gpu, l2, sms = _device_info()
    print(f"# {gpu}: {sms} SMs, L2 {l2 / 2**20:.0f} MiB", flush=True)
    per_sms: list[int | None] = [int(v) for v in args.per_sm.split(",") if v] or [None]
    variants: list[str | None] = [v for v in args.variants.split(",") if v] or [None]
    from kernels import wgmma

    wg_tiles = [None if t == "-" else wgmma.parse_tile(t) for t in args.wg_tiles.split(",") if t] or [None]
    wg_options = tuple(args.wg_options.split())
    rows = []
    for shape in args.shapes.split(","):
        N, K = (int(v) for v in shape.lower().split("x"))
        for M in (int(v) for v in args.batches.split(",")):
            t = bench_cublas(M, N, K, l2, args.samples)
            base = statistics.median(t)
            tr = traffic("bf16", M, N, K)
            rows.append(dict(N=N, K=K, M=M, kernel="cublas_bf16", variant="", tile="", per_sm="", grid="",
                             time_s=base,
                             p10_s=sorted(t)[len(t) // 10], p90_s=sorted(t)[-1 - len(t) // 10], sets=0,
                             bytes=tr.bytes, flops=tr.flops))
            for name in args.kernels.split(","):
                scheme = registry.get(name).scheme
                tr = traffic(get_scheme(scheme, **SCHEME_PARAMS.get(scheme, {})), M, N, K)
                options = wg_tiles if name.startswith("wg_") else variants
                for ps, var in ((p, v) for p in per_sms for v in options):
                    try:
                        t, launch, sets, cfg = bench_kernel(name, M, N, K, l2, args.samples, ps, var, wg_options)
                    except Exception as exc:  # a failing kernel is reported, the sweep goes on
                        print(f"FAILED {name} {var} M={M} {shape}: {type(exc).__name__}: {exc}", file=sys.stderr)
                        continue
                    st = sorted(t)
                    tile = f"{cfg.bm}x{cfg.m_tiles}/{cfg.bn}n/{cfg.threads}t/{cfg.stages}s/{cfg.kt}B"
                    rows.append(dict(N=N, K=K, M=M, kernel=name, variant=cfg.variant, tile=tile,
                                     per_sm=ps or "auto", grid=f"{launch[0]}",
                                     time_s=statistics.median(t), p10_s=st[len(st) // 10],
                                     p90_s=st[-1 - len(st) // 10], sets=sets, bytes=tr.bytes, flops=tr.flops))
            for r in rows:
                if r["N"] == N and r["K"] == K and r["M"] == M:
                    r["speedup_vs_cublas_bf16"] = base / r["time_s"]
            _write_csv(Path(args.out), rows)  # after every point group: a run cut short keeps what it measured
            print(f"done {shape} M={M}", flush=True)

    print("\n| N×K | M | kernel | variant | tile | CTAs/SM | grid | µs | TFLOP/s | GB/s | × cuBLAS bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['N']}×{r['K']} | {r['M']} | {r['kernel']} | {r['variant']} | {r['tile']} | {r['per_sm']} | "
              f"{r['grid']} | "
              f"{r['time_s'] * 1e6:.1f} | {r['flops'] / r['time_s'] / 1e12:.0f} | "
              f"{r['bytes'] / r['time_s'] / 1e9:.0f} | "
              f"{r['speedup_vs_cublas_bf16']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
