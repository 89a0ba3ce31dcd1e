"""Device check of grouped_bf16_wg's launch defaults on MoE expert layers outside the catalogue (issue 33): layers that
no default was picked on, against the first configuration (128-byte k-tiles, 2 warpgroups) and torch._grouped_mm,
and the L2-cold read time of the touched experts' weights.

    PYTHONPATH=. python3 bench/moe_heldout.py [--batches 16,32,64,128,256] [--budget 0.03]

Layers (from each model's public config.json; not in data/workloads.toml, and tests/test_moe_heldout.py keeps them
out): Mixtral-8x22B (hidden 6144, expert 16384, 8 experts, top-2), DBRX (6144, 10752, 16, top-4), Qwen3-235B-A22B
(4096, 1536, 128, top-8), Qwen2-57B-A14B (3584, 2560, 64, top-8); gate+up fused (N = 2 x expert width, x gathered in
the kernel), down in routed order. Uniform routing, seed 0; timing: the profiler's loop (bench.bench_moe._measure).
Prints a row per (layer, B): read, first config, defaults, grouped_mm (µs), defaults ÷ first, grouped_mm ÷ defaults,
defaults ÷ read and the default config; every row to $OUT/moe_heldout.csv (or a temporary folder). sm_90 only.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# (model, layer, N, K, experts, top_k)
LAYERS = (("mixtral-8x22b", "gate_up", 32768, 6144, 8, 2), ("mixtral-8x22b", "down", 6144, 16384, 8, 2),
          ("dbrx", "gate_up", 21504, 6144, 16, 4), ("dbrx", "down", 6144, 10752, 16, 4),
          ("qwen3-235b-a22b", "gate_up", 3072, 4096, 128, 8), ("qwen3-235b-a22b", "down", 4096, 1536, 128, 8),
          ("qwen2-57b-a14b", "gate_up", 5120, 3584, 64, 8), ("qwen2-57b-a14b", "down", 3584, 2560, 64, 8))
FIRST = {"kt": 128, "wg": 2}  # the first launch configuration (5bd60d3's defaults) as overrides


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="16,32,64,128,256")
    ap.add_argument("--budget", type=float, default=0.03)
    args = ap.parse_args()
    import cupy as cp

    from bench.anchors import ReadLimit
    from bench.bench_moe import TorchPeer, _measure, read_time
    from kernels.grouped import grouped
    from workbench.measure.timing import CudaTimer, TimingConfig, measure

    batches = [int(b) for b in args.batches.split(",")]
    dev = cp.cuda.Device()
    l2 = int(cp.cuda.runtime.getDeviceProperties(dev.id)["l2CacheSize"])
    limit = ReadLimit(l2, int(dev.attributes["MultiProcessorCount"]))
    bw_1gb = (1 << 30) / limit(1 << 30)[0]
    cfg = TimingConfig(budget_s=args.budget)
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp()) / "moe_heldout.csv"
    cols = ["model", "layer", "B", "read_s", "first_s", "default_s", "grouped_mm_s", "config"]
    print(f"{'model':16} {'layer':7} {'B':>3} {'read':>8} {'first':>8} {'default':>8} {'gmm':>8} {'d/first':>7} "
          f"{'gmm/d':>7} {'d/read':>6}  default config")
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for model, layer, N, K, E, k in LAYERS:
            new = grouped.GroupedRunner("grouped_bf16_wg", E, k, "uniform", gather=layer == "gate_up")
            old = grouped.GroupedRunner("grouped_bf16_wg", E, k, "uniform", gather=layer == "gate_up", **FIRST)
            old._weights = new._weights  # one set of expert weights for both configurations and the peer
            peer = TorchPeer(new, "grouped_mm")
            for B in batches:
                t = {}
                for name, run in (("first", old), ("default", new), ("gmm", peer)):
                    try:
                        t[name] = _measure(run, B, N, K, l2, cfg, measure, CudaTimer).stats.median
                    except Exception as exc:  # noqa: BLE001 - one failed side is a NaN in the table, not a stop
                        print("  ", name, type(exc).__name__, str(exc)[:120])
                        t[name] = math.nan
                touched = new.make(B, N, K, seed=0, reference=False).arrays["routed"].touched
                tb = touched * grouped.expert_bytes("bf16", N, K)
                rd = read_time(limit, tb, bw_1gb)[0]
                conf = new.launch_config(B, N, K)
                w.writerow([model, layer, B, rd, t["first"], t["default"], t["gmm"], conf])
                print(f"{model:16} {layer:7} {B:>3} {rd * 1e6:8.1f} {t['first'] * 1e6:8.1f} {t['default'] * 1e6:8.1f} "
                      f"{t['gmm'] * 1e6:8.1f} {t['default'] / t['first']:7.3f} {t['gmm'] / t['default']:7.3f} "
                      f"{t['default'] / rd:6.2f}  {conf}", flush=True)
            new._weights.clear()
            cp.get_default_memory_pool().free_all_blocks()
    print(f"rows: {out}")


if __name__ == "__main__":
    main()
