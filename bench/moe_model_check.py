"""The roofline tiers of the grouped expert layers (models.moe.grouped_layers, uniform routing) against the grouped
kernels' H200 timings (bench/bench_moe.py's CSV; the one docs/moe.md quotes: `git show b775e5f:docs/moe-h200.csv >
moe-h200.csv`; no GPU needed).

    PYTHONPATH=. python3 bench/moe_model_check.py --csv moe-h200.csv [--tier floor]

Prints, per scheme and batch range, the median signed error (predicted - measured) / measured and the p90 of its
magnitude, over our tensor-core grouped kernels' points. The kernel tier has no grouped entry yet (docs/moe.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    import numpy as np
    import pandas as pd

    from models.hardware import load_calibrations
    from models.moe import grouped_layers
    from models.workloads import get_model

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True, help="bench/bench_moe.py's CSV (e.g. git show b775e5f:docs/moe-h200.csv)")
    ap.add_argument("--tier", default="floor", choices=("datasheet", "calibrated", "floor"))
    args = ap.parse_args()
    if not Path(args.csv).is_file():
        sys.exit(f"error: --csv {args.csv}: no such file (git show b775e5f:docs/moe-h200.csv > moe-h200.csv)")
    measured = pd.read_csv(args.csv)
    measured = measured[measured["kernel"].isin(["grouped_bf16_tc", "grouped_w4a16_tc"])]
    cals = load_calibrations()
    frames = []
    for model in measured["model"].unique():
        pred = grouped_layers(get_model(model), "h200-sxm", ["bf16", "w4a16"], sorted(measured["B"].unique()),
                              calibrations=cals)
        pred["layer"] = pred["layer"].str.removeprefix("expert_")
        frames.append(measured[measured["model"] == model].merge(
            pred, left_on=["layer", "scheme", "B"], right_on=["layer", "scheme", "batch"], suffixes=("", "_model")))
    j = pd.concat(frames, ignore_index=True)
    err = (j[f"time_{args.tier}_s"] - j["time_s"]) / j["time_s"]
    print(f"{args.tier} tier against {len(j)} measured points")
    print(f"{'scheme':6} {'batches':8} {'n':>3} {'median':>8} {'p90 |e|':>8}")
    for scheme in ("bf16", "w4a16"):
        for lo, hi in ((1, 16), (32, 256)):
            e = err[(j["scheme"] == scheme) & j["B"].between(lo, hi)]
            print(f"{scheme:6} {lo:>3}-{hi:<4} {len(e):>3} {100 * np.median(e):>7.1f}% "
                  f"{100 * np.quantile(np.abs(e), 0.9):>7.1f}%")


if __name__ == "__main__":
    main()
