"""The worst points of a `workbench model-check --csv` table with their grids (models/parallelism.py): kernel, M bin,
n-tiles per CTA, CTAs, the busiest SM's load, the stretch of the per-SM terms and waves on the point's GPU, so that
a tail can be read against the parallelism (no GPU needed).

    workbench model-check --csv check.csv
    PYTHONPATH=. python3 bench/tail_points.py check.csv [--view LOSO] [--gpu h100-sxm] [--top 30]

Views: "in sample", "LOSO" (its column time_kernel_loso_s), "holdout", "GPU held out". Prints one row per point,
worst |predicted / measured - 1| first, then the median and p90 of |error| by the busiest SM's load (1: the grid fills
the GPU or is not declared).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import numpy as np
    import pandas as pd

    from models.hardware import get_gpu
    from models.parallelism import grid_ctas, idle_stretch, sm_load, waves
    from workbench.analysis.kernel_tier import kernel_facts

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", type=Path)
    ap.add_argument("--view", default="LOSO")
    ap.add_argument("--gpu", default=None, help="only this GPU's points")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    if not a.csv.is_file():
        sys.exit(f"{a.csv}: no such file; write one with `workbench model-check --csv FILE`")
    d = pd.read_csv(a.csv)
    d = d[d["view"] == a.view]
    if a.gpu:
        d = d[d["gpu_key"] == a.gpu]
    if d.empty:
        sys.exit(f"no points of view {a.view!r}{f' on {a.gpu}' if a.gpu else ''} in {a.csv}")
    col = "time_kernel_loso_s" if a.view == "LOSO" else "time_kernel_s"
    d = d.assign(error=d[col] / d["time_measured_s"] - 1.0)
    facts = kernel_facts()
    grid = []
    for gpu, kernel, M, N in zip(d["gpu_key"], d["kernel"], d["M"], d["N"], strict=True):
        f, sms = facts.get(kernel), get_gpu(gpu).sms
        if f is None:
            grid.append((np.nan, np.nan, np.nan, 1.0, 1.0, np.nan))
            continue
        m, n = np.array([M]), np.array([N])
        grid.append((float(f.tile_rows(m, n)[0]), float(f.tiles_per_cta(m, n, sms)[0]),
                     float(grid_ctas(f, m, n, sms)[0]), float(sm_load(f, m, n, sms)[0]),
                     float(idle_stretch(f, m, n, sms)[0]), float(waves(f, m, n, sms)[0])))
    d[["m_bin", "tiles_cta", "ctas", "sm_load", "stretch", "waves"]] = grid
    worst = d.reindex(d["error"].abs().sort_values(ascending=False).index).head(a.top)
    cols = ["gpu_key", "scheme", "kernel", "N", "K", "M", "m_bin", "time_measured_s", "error", "tiles_cta", "ctas",
            "sm_load", "stretch", "waves"]
    print(worst[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    bins = pd.cut(d["sm_load"], [0.99, 1.01, 1.1, 1.5, np.inf], labels=["1", "1-1.1", "1.1-1.5", ">1.5"])
    print("\n|error| by the busiest SM's load:")
    print(d.groupby(bins, observed=True)["error"].agg(
        n="size", median=lambda e: float(np.median(np.abs(e))), p90=lambda e: float(np.percentile(np.abs(e), 90)),
        signed=lambda e: float(np.median(e))).to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
