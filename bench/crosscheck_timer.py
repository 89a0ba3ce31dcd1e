"""Independent-timer check: the profiler's time vs torch CUDA events over a torch CUDA graph, same launches.

For each point: the profiler's `measure` (graph of back-to-back launches rotating >= 3x L2, CuPy events), then the
same kernel, the same rotation of input sets and the same launch count captured into a `torch.cuda.CUDAGraph` and
timed with `torch.cuda.Event` around each replay. Prints both medians and their ratio; exits 1 if any point differs by
more than 3%.  Usage (on the GPU machine): PYTHONPATH=. python3 bench/crosscheck_timer.py [--out results.csv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

TOLERANCE = 0.03
# (kernel, N, K, M): the first five that are registered and supported are used (at least five are needed)
CANDIDATES = [
    ("gemv_fp32_ref", 4096, 4096, 1),
    ("w4a16_gemv", 22016, 4096, 4),
    ("tc_fp16", 22016, 4096, 64),
    ("cublas_bf16", 4096, 4096, 1),
    ("fp16_gemv", 12288, 4096, 1),
    ("w8a16_gemv", 4096, 11008, 8),
    ("tc_bf16", 4096, 4096, 128),
    ("gemv_w4_ref", 22016, 4096, 1),
    ("bf16_gemv", 4096, 4096, 16),
]


def torch_time(runner, sets, lps: int, replays: int = 30) -> float:
    """Median seconds per launch: torch events around replays of a torch CUDA graph of `lps` launches."""
    import cupy
    import torch

    warnings.filterwarnings("ignore", category=DeprecationWarning)  # cupy.cuda.ExternalStream
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    cupy.cuda.Device().synchronize()
    with torch.cuda.stream(stream), cupy.cuda.ExternalStream(stream.cuda_stream):
        for i in range(len(sets)):  # warm-up on the capture stream
            runner.launch(sets[i])
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for i in range(lps):
                runner.launch(sets[i % len(sets)])
    times = []
    with torch.cuda.stream(stream):
        for _ in range(3):
            graph.replay()
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            graph.replay()
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3 / lps)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--points", type=int, default=7)
    args = parser.parse_args()

    from kernels import registry
    from workbench.environment import detect
    from workbench.timing import CudaTimer, TimingConfig, measure

    env = detect()
    names = {s.name for s in registry.specs()}
    chosen = [c for c in CANDIDATES if c[0] in names and registry.get(c[0]).supports(c[3], env.cc)][: args.points]
    cfg = TimingConfig(budget_s=0.3)
    rows = []
    for name, N, K, M in chosen:
        try:
            runner = registry.runner(name)
            timer = CudaTimer()
            ours = measure(runner, M, N, K, env.l2_bytes, timer, cfg)
            sets = [runner.make(M, N, K, seed=100 + i, reference=False) for i in range(ours.rotate_sets)]
            theirs = torch_time(runner, sets, ours.launches_per_sample)
            del sets
        except Exception as exc:  # report and go on: the check needs >= 5 points, not every kernel
            print(f"skipped {name}: {type(exc).__name__}: {exc}".splitlines()[0])
            continue
        ratio = ours.stats.median / theirs
        rows.append((name, N, K, M, ours.stats.median, theirs, ratio, ours.method))
    print(f"{'kernel':<16} {'N x K':>12} {'M':>4} {'profiler µs':>12} {'torch graph µs':>15} {'ratio':>7} timer")
    for name, N, K, M, a, b, r, method in rows:
        print(f"{name:<16} {f'{N}x{K}':>12} {M:>4} {a * 1e6:12.2f} {b * 1e6:15.2f} {r:7.3f} {method}")
    worst = max((abs(r - 1) for *_, r, _m in rows), default=float("nan"))
    ok = len(rows) >= 5 and worst <= TOLERANCE
    print(f"crosscheck: {len(rows)} points, worst |ratio - 1| = {worst:.2%} (tolerance {TOLERANCE:.0%}): "
          f"{'PASS' if ok else 'FAIL'}")
    if args.out:
        import pandas as pd

        cols = ["kernel", "N", "K", "M", "profiler_s", "torch_graph_s", "ratio", "timer"]
        pd.DataFrame(rows, columns=cols).to_csv(args.out, index=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
