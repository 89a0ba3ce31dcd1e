"""The roofline tiers of the grouped expert layers (models.moe.grouped_layers, uniform routing) against the grouped
kernels' H200 timings (bench/bench_moe.py's CSV; the one docs/moe.md quotes: `git show b775e5f:docs/moe-h200.csv >
moe-h200.csv`; no GPU needed).

    PYTHONPATH=. python3 bench/moe_model_check.py --csv moe-h200.csv [--tier floor|kernel]
    PYTHONPATH=. python3 bench/moe_model_check.py --csv data/measurements/h200-sxm/moe-cold.parquet --tier kernel

Prints, per scheme and batch range, the median signed error (predicted - measured) / measured and the p90 of its
magnitude, over our tensor-core grouped kernels' points. `--tier kernel`: the grouped kernels' tier
(models.moe_kernel) leave-one-model-out: each model's points predicted by parameters fitted on the other three only,
then the median and p90 of |error| per held-out model and over all points. A `.parquet` file is read as the
profiler's MoE rows (`workbench profile --moe`): every kernel and routing they hold, each priced with its own seed.
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
    ap.add_argument("--tier", default="floor", choices=("datasheet", "calibrated", "floor", "kernel"))
    ap.add_argument("--expected", action="store_true", help="--tier kernel: price the routing model's expected "
                    "load instead of the routing each point ran (drawn with seed 0)")
    args = ap.parse_args()
    if not Path(args.csv).is_file():
        sys.exit(f"error: --csv {args.csv}: no such file (git show b775e5f:docs/moe-h200.csv > moe-h200.csv)")
    measured = profiler_rows(pd.read_parquet(args.csv)) if args.csv.endswith(".parquet") else pd.read_csv(args.csv)
    if not args.csv.endswith(".parquet"):
        measured = measured[measured["kernel"].isin(["grouped_bf16_tc", "grouped_w4a16_tc"])]
    cals = load_calibrations()
    if args.tier == "kernel":
        return kernel_lomo(measured, cals, args.expected)
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


def profiler_rows(df):
    """The profiler's MoE rows in the bench CSV's columns (model, layer, B, E, time_s), keeping their seeds."""
    parts = df["layer"].str.split("/", n=1, expand=True)
    return df.assign(model=parts[0], layer=parts[1].str.removeprefix("expert_"), B=df["M"], E=df["experts"],
                     time_s=df["time_median_s"])


def kernel_lomo(measured, cals, expected: bool) -> None:
    import numpy as np
    import pandas as pd

    from workbench.analysis.moe_tier import leave_one_model_out

    rows = pd.DataFrame({"gpu": "h200-sxm", "model": measured["model"], "kernel": measured["kernel"],
                         "batch": measured["B"], "N": measured["N"], "K": measured["K"], "experts": measured["E"],
                         "top_k": measured["top_k"], "routing": measured["routing"], "time_s": measured["time_s"]})
    if not expected:  # price the routing that ran (the bench drew every routing with seed 0)
        rows["routing_seed"] = measured["routing_seed"] if "routing_seed" in measured else 0
    got = leave_one_model_out(rows, cals)
    e = got["error"].abs()
    what = "expected routing" if expected else "the routing each point ran"
    print(f"kernel tier, leave-one-model-out, {len(got)} points ({what}; fitted on the other models' points only)")
    print(f"{'kernel':18} {'held out':14} {'n':>3} {'median |e|':>10} {'p90 |e|':>8} {'median e':>9}")
    for (kernel, held), g in got.groupby(["kernel", "held_out"]):
        a = g["error"]
        print(f"{kernel:18} {held:14} {len(g):>3} {100 * a.abs().median():>9.1f}% "
              f"{100 * np.quantile(a.abs(), 0.9):>7.1f}% {100 * a.median():>8.1f}%")
    for kernel, g in got.groupby("kernel"):
        print(f"{kernel:18} {'all':14} {len(g):>3} {100 * g['error'].abs().median():>9.1f}% "
              f"{100 * np.quantile(g['error'].abs(), 0.9):>7.1f}%")
    print(f"{'every kernel':18} {'all':14} {len(got):>3} {100 * e.median():>9.1f}% {100 * np.quantile(e, 0.9):>7.1f}%")


if __name__ == "__main__":
    main()
