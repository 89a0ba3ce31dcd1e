"""Run-to-run difference of two sweeps of the same spec: per-point |t2 - t1| / t1 of the median times.

Usage: PYTHONPATH=. python3 scripts/run_diff.py FIRST.parquet SECOND.parquet  (exit 1 if the median difference > 1%)
"""

from __future__ import annotations

import sys

from workbench.storage.store import POINT_KEY, load_measurements

KEY = list(POINT_KEY)  # the same GPU in both runs: the point key as the store defines it


def main(first: str, second: str) -> int:
    a = load_measurements(first)[KEY + ["time_median_s"]]
    b = load_measurements(second)[KEY + ["time_median_s"]]
    both = a.merge(b, on=KEY, suffixes=("_1", "_2"))
    if both.empty:
        print("run-to-run: no common points")
        return 1
    rel = (both["time_median_s_2"] - both["time_median_s_1"]).abs() / both["time_median_s_1"]
    both["rel"] = rel
    print(f"run-to-run over {len(both)} common points: median {rel.median():.3%}, p90 {rel.quantile(0.9):.3%}, "
          f"max {rel.max():.2%}")
    worst = both.sort_values("rel", ascending=False).head(5)
    for r in worst.itertuples(index=False):
        print(f"  {r.kernel:<16} {r.N}x{r.K} M={r.M:<4} {r.time_median_s_1 * 1e6:9.2f} µs vs "
              f"{r.time_median_s_2 * 1e6:9.2f} µs ({r.rel:.2%})")
    return 0 if rel.median() <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
