"""Measured and predicted speedups over a baseline kernel, and the crossover batch, with a noise-aware tie rule.

Public API (stable):

- `resolve_side(comparison, name, *, ours_only=False) -> DataFrame` — the rows a name stands for: a kernel name
  gives that kernel's points; a scheme name gives the fastest measured kernel of the scheme at each point
  (`compare.best_per_scheme`), among our kernels only when `ours_only` (role != "peer").
- `speedups(comparison, baseline="cublas_bf16", *, kernels=None) -> DataFrame` — one row per (gpu_key, N, K, mode,
  kernel, M) where the baseline was measured at the same point.
- `pair_speedups(comparison, a, b, *, ours_only=False) -> DataFrame` — the same table for side a over side b.
- `crossovers(speedup_table) -> DataFrame` — one row per (gpu_key, N, K, mode, side, baseline).

Speedup (of a kernel over the baseline, > 1 means the kernel is faster):
- speedup_measured = baseline median time / kernel median time.
- Noise interval from the p10/p90 spread: speedup_low = baseline p10 / kernel p90, speedup_high = baseline p90 /
  kernel p10 (without p10/p90 the interval collapses to the median).
- speedup_<tier> = predicted time of the baseline's scheme / predicted time of the kernel's scheme (same GPU, M, N,
  K; tiers datasheet, calibrated, floor); speedup_predicted is the floor tier where a calibration exists, else the
  datasheet tier (`predicted_tier` says which).
- speedup_ideal = baseline scheme bytes / kernel scheme bytes: the bytes-only curve (what a perfectly memory-bound
  kernel would gain), e.g. 16 / 4.156 = 3.85 for W4A16 G=128 over BF16 at M = 1.

Crossover (first batch M, in the measured grid, where the kernel is no longer faster, speedup <= 1):
- crossover_measured: first M with speedup_measured <= 1.
- Tie rule: a point whose noise interval straddles 1 (speedup_low <= 1 <= speedup_high) is a tie: it cannot be told
  from "no longer faster", so it may be the crossover but need not be. crossover_low = first M with
  speedup_low <= 1 (the earliest the crossover can be), crossover_high = first M with speedup_high <= 1 (by
  which it surely happened). crossover_low <= crossover_measured <= crossover_high; they are equal when no tie
  precedes the crossover.
- crossover_predicted: first M in the same grid with speedup_predicted <= 1.
- NaN means "not within the measured batches" (every batch up to max_batch was faster); `max_batch` is given.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from models.errors import InputError, unknown
from workbench.analysis.compare import best_per_scheme, latest_points, throttled_mask

SPEEDUP_KEY = ["gpu_key", "N", "K", "mode", "M"]
_TIME_COLS = ("time_datasheet_s", "time_calibrated_s", "time_floor_s", "bytes")


def resolve_side(comparison: pd.DataFrame, name: str, *, ours_only: bool = False) -> pd.DataFrame:
    """Rows for a kernel name, or the best kernel per point for a scheme name (see module docstring)."""
    kernels = set(comparison["kernel"].astype(str))
    if name in kernels:
        return latest_points(comparison[comparison["kernel"] == name])
    from models.schemes import SCHEME_NAMES

    if name in SCHEME_NAMES:
        pool = comparison[comparison["role"] != "peer"] if ours_only else comparison
        return best_per_scheme(pool, [name])
    raise unknown("kernel or scheme", name, sorted(kernels | set(SCHEME_NAMES)))


def _scheme_predictions(comparison: pd.DataFrame) -> pd.DataFrame:
    """Predicted times and bytes per (gpu_key, scheme, N, K, mode, M): they depend on the scheme, not the kernel."""
    cols = ["gpu_key", "scheme", "N", "K", "mode", "M"]
    return comparison.groupby(cols, sort=False)[list(_TIME_COLS)].median().reset_index()


def speedups(
    comparison: pd.DataFrame, baseline: str = "cublas_bf16", *, kernels: Iterable[str] | None = None
) -> pd.DataFrame:
    """Measured and predicted speedup of every kernel (or those named) over `baseline` per point; see module doc.

    `baseline` is a kernel name (default cuBLAS bf16) or a scheme name ("bf16" = our fastest bf16 kernel per point).
    The `side` column holds the kernel name.
    """
    if comparison.empty:
        return _empty_speedups()
    base = resolve_side(comparison, baseline, ours_only=True)
    if base.empty:
        raise InputError(f"baseline {baseline!r} has no measured points; measure it or choose another --baseline")
    rows = latest_points(comparison)
    if kernels is not None:
        wanted = list(kernels)
        missing = sorted(set(wanted) - set(rows["kernel"]))
        if missing:
            raise unknown("kernel", missing[0], sorted(set(rows["kernel"])))
        rows = rows[rows["kernel"].isin(wanted)]
    return _speedup_frame(comparison, rows.assign(side=rows["kernel"]), base, baseline)


def pair_speedups(comparison: pd.DataFrame, a: str, b: str, *, ours_only: bool = False) -> pd.DataFrame:
    """Speedup of side `a` over side `b` per point, each a kernel name or a scheme (its fastest kernel per point).

    Same columns as `speedups`; `side` is `a` and `kernel` the kernel chosen for it at that point.
    """
    if comparison.empty:
        return _empty_speedups()
    rows = resolve_side(comparison, a, ours_only=ours_only)
    base = resolve_side(comparison, b, ours_only=ours_only)
    if rows.empty or base.empty:
        return _empty_speedups()
    return _speedup_frame(comparison, rows.assign(side=a), base, b)


def _speedup_frame(comparison: pd.DataFrame, rows: pd.DataFrame, base: pd.DataFrame, baseline: str) -> pd.DataFrame:
    if "time_kernel_s" not in base:  # a comparison written before the kernel tier
        base = base.assign(time_kernel_s=np.nan)
        rows = rows.assign(time_kernel_s=np.nan)
    base = base.assign(_bthr=throttled_mask(base), baseline_time_kernel_s=base["time_kernel_s"])[
        [*SPEEDUP_KEY, "kernel", "scheme", "time_measured_s", "time_p10_s", "time_p90_s", "_bthr",
         "baseline_time_kernel_s"]
    ].rename(
        columns={
            "kernel": "baseline_kernel",
            "scheme": "baseline_scheme",
            "time_measured_s": "baseline_time_s",
            "time_p10_s": "baseline_p10_s",
            "time_p90_s": "baseline_p90_s",
        }
    )
    merged = rows.merge(base, on=SPEEDUP_KEY, how="inner")
    if merged.empty:
        return _empty_speedups()
    pred = _scheme_predictions(comparison).rename(columns={c: f"base_{c}" for c in _TIME_COLS})
    pred = pred.rename(columns={"scheme": "baseline_scheme"})
    merged = merged.merge(pred, on=["gpu_key", "baseline_scheme", "N", "K", "mode", "M"], how="left")
    t, p10, p90 = (merged[c].to_numpy(dtype="float64") for c in ("time_measured_s", "time_p10_s", "time_p90_s"))
    bt, b10, b90 = (
        merged[c].to_numpy(dtype="float64") for c in ("baseline_time_s", "baseline_p10_s", "baseline_p90_s")
    )
    p10, p90 = np.where(np.isfinite(p10), p10, t), np.where(np.isfinite(p90), p90, t)
    b10, b90 = np.where(np.isfinite(b10), b10, bt), np.where(np.isfinite(b90), b90, bt)
    out = pd.DataFrame(
        {
            "gpu_key": merged["gpu_key"],
            "N": merged["N"],
            "K": merged["K"],
            "mode": merged["mode"],
            "side": merged["side"],
            "kernel": merged["kernel"],
            "scheme": merged["scheme"],
            "role": merged["role"],
            "M": merged["M"],
            "baseline": baseline,
            "baseline_kernel": merged["baseline_kernel"],
            "baseline_scheme": merged["baseline_scheme"],
            "time_s": t,
            "baseline_time_s": bt,
            "speedup_measured": bt / t,
            "speedup_low": b10 / p90,
            "speedup_high": b90 / p10,
        }
    )
    for tier, col in (
        ("datasheet", "time_datasheet_s"),
        ("calibrated", "time_calibrated_s"),
        ("floor", "time_floor_s"),
    ):
        out[f"speedup_{tier}"] = merged[f"base_{col}"].to_numpy(dtype="float64") / merged[col].to_numpy(dtype="float64")
    # the kernel tier is per kernel: the baseline kernel's predicted time over this kernel's
    out["speedup_kernel"] = (merged["baseline_time_kernel_s"].to_numpy(dtype="float64")
                             / merged["time_kernel_s"].to_numpy(dtype="float64"))
    has_floor = np.isfinite(out["speedup_floor"].to_numpy(dtype="float64"))
    out["speedup_predicted"] = np.where(has_floor, out["speedup_floor"], out["speedup_datasheet"])
    out["predicted_tier"] = np.where(has_floor, "floor", "datasheet")
    out["speedup_ideal"] = merged["base_bytes"].to_numpy(dtype="float64") / merged["bytes"].to_numpy(dtype="float64")
    out["throttled"] = throttled_mask(merged).to_numpy() | merged["_bthr"].to_numpy(dtype=bool)
    out = out.sort_values(["gpu_key", "N", "K", "mode", "side", "M"], kind="stable")
    return out.reset_index(drop=True)


def _empty_speedups() -> pd.DataFrame:
    cols = [
        "gpu_key", "N", "K", "mode", "side", "kernel", "scheme", "role", "M", "baseline", "baseline_kernel",
        "baseline_scheme",
        "time_s", "baseline_time_s", "speedup_measured", "speedup_low", "speedup_high", "speedup_datasheet",
        "speedup_calibrated", "speedup_floor", "speedup_kernel", "speedup_predicted", "predicted_tier",
        "speedup_ideal", "throttled",
    ]  # fmt: skip
    return pd.DataFrame({c: [] for c in cols})


def first_at_or_below_one(batches: np.ndarray, values: np.ndarray) -> float:
    """The first batch (in ascending order) whose value is <= 1; NaN when none is (a NaN value never counts)."""
    order = np.argsort(batches, kind="stable")
    b, v = np.asarray(batches)[order], np.asarray(values, dtype="float64")[order]
    hit = np.flatnonzero(v <= 1.0)
    return float(b[hit[0]]) if hit.size else float("nan")


def crossovers(speedup_table: pd.DataFrame) -> pd.DataFrame:
    """Measured (with its tie interval) and predicted crossover batch per (gpu_key, N, K, mode, side, baseline).

    `kernels` / `baseline_kernels` list the kernels that served the side and the baseline across the batches.
    """
    cols = [
        "gpu_key", "N", "K", "mode", "side", "kernels", "baseline", "baseline_kernels", "n_batches", "max_batch",
        "crossover_measured", "crossover_low", "crossover_high", "crossover_predicted", "throttled",
    ]  # fmt: skip
    if speedup_table.empty:
        return pd.DataFrame({c: [] for c in cols})
    rows = []
    keys = ["gpu_key", "N", "K", "mode", "side", "baseline"]
    table = speedup_table[speedup_table["side"] != speedup_table["baseline"]]  # the baseline over itself is 1
    for key, g in table.groupby(keys, sort=True):
        m = g["M"].to_numpy(dtype="int64")
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "kernels": ",".join(sorted(set(g["kernel"]))),
                "baseline_kernels": ",".join(sorted(set(g["baseline_kernel"]))),
                "n_batches": int(len(g)),
                "max_batch": int(m.max()),
                "crossover_measured": first_at_or_below_one(m, g["speedup_measured"].to_numpy()),
                "crossover_low": first_at_or_below_one(m, g["speedup_low"].to_numpy()),
                "crossover_high": first_at_or_below_one(m, g["speedup_high"].to_numpy()),
                "crossover_predicted": first_at_or_below_one(m, g["speedup_predicted"].to_numpy()),
                "throttled": bool(np.asarray(g["throttled"], dtype=bool).any()),
            }
        )
    return pd.DataFrame(rows, columns=cols)
