"""How well the model predicts the measurements: error per tier, scheme and batch range, in sample and out of sample.

The kernel tier's parameters are estimated from kernel timings, so its error is quoted three ways:
- in sample: the shipped parameter table on the rows it was fitted to (optimistic);
- leave one shape out (LOSO): for each (N, K), parameters refitted without it, then that shape predicted;
- holdout: measurements the parameters never saw (e.g. shapes recorded after the table was fitted);
- GPU left out: where two or more calibrated GPUs have rows, each GPU predicted with its own calibration and the
  parameters refitted on the other GPUs' rows alone (do kernel parameters carry over to a GPU whose micro-benchmarks
  were run but whose kernels were never timed?);
- GPU held out: the rows of a measured GPU with no calibration. Its kernel-tier terms are transferred from the
  catalogue (models.transfer), the parameters were fitted on the calibrated GPUs only (`model-fit`), and its rows take
  no part in the LOSO refits: every such row is out of sample by construction.
The roofline tiers have no fitted parameters: one figure each.
Points are the fastest unthrottled kernel per (gpu, scheme, N, K, M) (`compare.best_per_scheme` on L2-cold,
unthrottled rows: where the fastest kernel was throttled, the next one stands, and the point is marked
`best_throttled`, as is a speedup built on it: the next kernel is not the scheme's best there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.kernel_fit import leave_one_gpu_out, leave_one_shape_out
from models.roofline import TIERS
from workbench.analysis.compare import best_per_scheme, compare_points, throttled_mask
from workbench.analysis.kernel_tier import fit_rows, gpu_lookup, kernel_facts

M_RANGES: tuple[tuple[str, int, int], ...] = (("M=1", 1, 1), ("M=2-16", 2, 16), ("M=32-64", 32, 64),
                                              ("M=128-256", 128, 256))
VIEWS = ("in sample", "LOSO", "GPU left out", "holdout", "GPU held out")
KERNEL_COLUMN = {"in sample": "time_kernel_s", "LOSO": "time_kernel_loso_s", "GPU left out": "time_kernel_logo_s",
                 "holdout": "time_kernel_s", "GPU held out": "time_kernel_s"}
OUT_OF_SAMPLE = ("LOSO", "GPU left out")  # views with only a kernel-tier column of their own


@dataclass(frozen=True)
class ModelCheck:
    points: pd.DataFrame  # best kernel per point: measured time and every tier's prediction (columns pred_<name>)
    summary: pd.DataFrame  # one row per (view, gpu, tier, group): n, median/p90 |error|, within 10 %, signed mean
    speedups: pd.DataFrame  # w4a16 / bf16 speedup predicted (kernel tier, LOSO) vs measured per shape and M


def _stats(err: np.ndarray) -> dict[str, Any]:
    err = err[np.isfinite(err)]
    a = np.abs(err)
    if not err.size:
        return {"n": 0, "median_abs": np.nan, "p90_abs": np.nan, "within_10pct": np.nan, "mean_signed": np.nan}
    return {"n": int(err.size), "median_abs": float(np.median(a)), "p90_abs": float(np.percentile(a, 90)),
            "within_10pct": float(np.mean(a <= 0.10)), "mean_signed": float(np.mean(err))}


def _dense(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` without the grouped MoE rows (compare_points leaves them out; models/moe_kernel.py checks them)."""
    if "experts" not in rows:
        return rows
    return rows[pd.to_numeric(rows["experts"], errors="coerce").fillna(1).to_numpy() <= 1].reset_index(drop=True)


def _prepared(measured: pd.DataFrame, calibrations: dict[str, Any], params: Any = None) -> pd.DataFrame:
    rows = _dense(fit_rows(measured))
    cmp = compare_points(rows.drop(columns=["gpu"]), calibrations=calibrations, params=params)
    cmp["bytes_read"] = rows["bytes"].astype("float64").to_numpy()
    return cmp


POINT = ["gpu_key", "scheme", "N", "K", "M"]


def _point_index(frame: pd.DataFrame) -> pd.MultiIndex:
    return pd.MultiIndex.from_frame(frame[POINT].astype({"gpu_key": str, "scheme": str, "N": "int64", "K": "int64",
                                                         "M": "int64"}))


def throttled_best(measured: pd.DataFrame) -> pd.DataFrame:
    """The points (POINT columns) whose fastest L2-cold kernel, of those that passed their float64 check, ran
    throttled: the fastest unthrottled one there is not the scheme's best."""
    rows = _dense(fit_rows(measured, keep_throttled=True))
    fastest = rows.sort_values("time_median_s", kind="stable")
    fastest = fastest[~_point_index(fastest).duplicated()]
    return fastest.loc[throttled_mask(fastest), POINT].reset_index(drop=True)


def _mark_throttled_best(points: pd.DataFrame, marked: pd.DataFrame) -> pd.DataFrame:
    return points.assign(best_throttled=_point_index(points).isin(_point_index(marked)))


def calibrated_rows(measured: pd.DataFrame, calibrations: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`measured` split into the rows of calibrated GPUs (what a fit may use) and the rest (GPUs held out)."""
    mine = measured["gpu_key"].astype(str).isin(set(calibrations)).to_numpy()
    return measured[mine].reset_index(drop=True), measured[~mine].reset_index(drop=True)


def check(measured: pd.DataFrame, calibrations: dict[str, Any], holdout: pd.DataFrame | None = None,
          params: Any = None) -> ModelCheck:
    """The model-check tables for `measured` (and `holdout`), predicted with `params` (a ParamTable; None: the
    shipped parameters); LOSO refits per fold on the calibrated GPUs' rows; rows of GPUs with no calibration are
    the view "GPU held out"."""
    fit, held_gpus = calibrated_rows(measured, calibrations)
    frames = []
    if len(fit):
        cmp = _prepared(fit, calibrations, params)
        loso_in = cmp.assign(gpu=cmp["gpu_key"].astype(str), bytes=cmp["bytes_read"],
                             time_median_s=cmp["time_measured_s"])
        gpus = gpu_lookup(calibrations)
        cmp["time_kernel_loso_s"] = leave_one_shape_out(loso_in, kernel_facts(), gpus).to_numpy()
        frames += [("in sample", cmp), ("LOSO", cmp)]
        if loso_in["gpu"].nunique() > 1:
            cmp["time_kernel_logo_s"] = leave_one_gpu_out(loso_in, kernel_facts(), gpus).to_numpy()
            frames.append(("GPU left out", cmp))
    if holdout is not None and len(holdout):
        frames.append(("holdout", _prepared(holdout, calibrations, params)))
    if len(held_gpus):
        frames.append(("GPU held out", _prepared(held_gpus, calibrations, params)))
    rows, pts = [], []
    marked = throttled_best(pd.concat([measured, holdout], ignore_index=True) if holdout is not None else measured)
    for view, frame in frames:
        kernel_col = KERNEL_COLUMN[view]
        whole = _mark_throttled_best(best_per_scheme(frame), marked)
        pts.append(whole.assign(view=view))
        for gpu, best in whole.groupby(whole["gpu_key"].astype(str), sort=True):
            tiers = {t: c for t, c in TIERS.items() if t != "kernel"} if view not in OUT_OF_SAMPLE else {}
            tiers["kernel"] = kernel_col
            for tier, col in tiers.items():
                rows.append({"view": view, "gpu": gpu, "tier": tier, "group": "all", **_stats(_err(best, col))})
                if tier != "kernel":
                    continue
                for scheme, g in best.groupby(best["scheme"].astype(str), sort=True):
                    rows.append({"view": view, "gpu": gpu, "tier": tier, "group": scheme, **_stats(_err(g, col))})
                for label, lo, hi in M_RANGES:
                    g = best[best["M"].between(lo, hi)]
                    rows.append({"view": view, "gpu": gpu, "tier": tier, "group": label, **_stats(_err(g, col))})
    if not pts:
        raise InputError("no measured rows a check can use (L2-cold, unthrottled, float64 check passed)")
    points = pd.concat(pts, ignore_index=True)
    return ModelCheck(points, pd.DataFrame(rows), speedup_table(points))


def _err(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].to_numpy(dtype="float64") / frame["time_measured_s"].to_numpy(dtype="float64") - 1.0


def speedup_table(points: pd.DataFrame, scheme: str = "w4a16", baseline: str = "bf16") -> pd.DataFrame:
    """Per (view, gpu, N, K, M): measured and predicted speedup of `scheme` over `baseline`, best unthrottled kernel
    of each; `best_throttled` where either scheme's fastest kernel there ran throttled."""
    if "best_throttled" not in points:
        points = points.assign(best_throttled=False)
    out = []
    for (view, gpu, N, K), g in points.groupby(["view", points["gpu_key"].astype(str), "N", "K"], sort=True):
        col = KERNEL_COLUMN[view]
        a = g[g["scheme"].astype(str) == scheme].set_index("M")
        b = g[g["scheme"].astype(str) == baseline].set_index("M")
        common = a.index.intersection(b.index)
        for M in sorted(common):
            meas = b.at[M, "time_measured_s"] / a.at[M, "time_measured_s"]
            pred = b.at[M, col] / a.at[M, col]
            out.append({"view": view, "gpu": gpu, "N": int(N), "K": int(K), "M": int(M),
                        "speedup_measured": float(meas), "speedup_predicted": float(pred),
                        "error": float(pred / meas - 1.0),
                        "best_throttled": bool(a.at[M, "best_throttled"] or b.at[M, "best_throttled"])})
    return pd.DataFrame(out, columns=["view", "gpu", "N", "K", "M", "speedup_measured", "speedup_predicted", "error",
                                      "best_throttled"])


def crossovers(speedups: pd.DataFrame) -> pd.DataFrame:
    """Per (view, gpu, N, K): the first batch where the speedup is <= 1, measured and predicted (NaN: never)."""
    out = []
    for (view, gpu, N, K), g in speedups.groupby(["view", "gpu", "N", "K"], sort=True):
        g = g.sort_values("M")
        first = {c: g.loc[g[c] <= 1.0, "M"].min() for c in ("speedup_measured", "speedup_predicted")}
        batches = list(g["M"])
        steps = (abs(batches.index(first["speedup_measured"]) - batches.index(first["speedup_predicted"]))
                 if all(np.isfinite(v) for v in first.values()) else
                 (0 if not any(np.isfinite(v) for v in first.values()) else np.nan))
        out.append({"view": view, "gpu": gpu, "N": int(N), "K": int(K), "crossover_measured": first["speedup_measured"],
                    "crossover_predicted": first["speedup_predicted"], "steps_apart": steps})
    return pd.DataFrame(out, columns=["view", "gpu", "N", "K", "crossover_measured", "crossover_predicted",
                                      "steps_apart"])
