"""How well the kernel tier speaks for each GPU (`workbench model-check --by-gpu`): per GPU and scheme, the error of
the predicted time and of the predicted speedup (the scheme over bf16 at the same shape and M), in sample and out of
sample.

Out of sample means, per GPU:
- a GPU known only from public timings (`workbench import`): **leave one GPU out** (models.transfer_fit): the transfer
  factors and the library kernels' parameters refitted without its rows, so its memory technology and architecture
  take the factors of the others (its class's median, else every one's);
- the reference GPU, calibrated and measured by this workbench: **leave one shape out** (workbench.analysis.
  model_check): its kernels' parameters are fitted on its own timings and every transfer is anchored on it, so it
  cannot be left out of the transfer; the table says which view a row is;
- a GPU calibrated and measured by this workbench beside the reference: **leave one GPU out, its calibration kept**
  (model_check's "GPU left out"): the kernels' parameters refitted on the other calibrated GPUs' timings, the GPU's
  own measured terms;
- a GPU measured by this workbench but never calibrated (e.g. data/measurements/h100-sxm): its rows take no part in any
  fit (`model-fit` fits the calibrated GPUs only), so they are **left out** as they stand: our kernels predicted with
  the GPU's transferred terms.
Points: public rows as imported, the median over frameworks of one kernel at one (shape, M), each predicted with its
own kernel's facts; our measurements as model-check takes them (the fastest unthrottled kernel per scheme, shape, M).
Public rows are read only when a caller passes them: nothing here mixes them into our own measurements.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from models.hardware import Calibration
from models.kernel_model import ParamTable
from models.library_kernels import ALIASES, LIBRARY
from models.transfer import TransferFactors
from models.transfer_fit import leave_one_gpu_out, predict_rows, with_bytes

BASELINE = "bf16"
POINT_KEY = ("gpu", "scheme", "kernel", "group_size", "N", "K", "M")
SUMMARY_COLUMNS = ("view", "gpu", "scheme", "n", "signed_median", "median_abs", "p90_abs", "speedup_n",
                   "speedup_signed_median", "speedup_median_abs", "speedup_p90_abs")


@dataclass(frozen=True)
class GpuCheck:
    points: pd.DataFrame  # one row per (view, point): gpu, scheme, kernel, N, K, M, time_s, time_pred_s, error
    summary: pd.DataFrame  # SUMMARY_COLUMNS


def model_groups(public: pd.DataFrame) -> pd.Series:
    """The group size the model's byte accounting takes for each public row: 0 (one scale per row) where the import
    says per-channel (group_size 0 or K), else the row's group size; NaN where the row has none."""
    g = pd.to_numeric(public["group_size"], errors="coerce") if "group_size" in public else pd.Series(
        np.nan, index=public.index)
    return g.where(g != public["K"], 0.0).astype("float64")


def public_predictions(public: pd.DataFrame, calibrations: Mapping[str, Calibration] | None,
                       table: ParamTable | None = None) -> pd.DataFrame:
    """Every public row with the roofline tiers and the kernel tier of its own kernel (kernel_predicted names it);
    a row whose kernel the model does not know gets the fastest modeled kernel of its scheme, as `predict` does."""
    from models.roofline import predict
    from workbench.analysis.kernel_tier import best_kernel_tier, kernel_facts, named_kernel_tier

    pts = public[["gpu", "scheme", "M", "N", "K"]].astype({"gpu": object, "scheme": object}).reset_index(drop=True)
    pts["group_size"] = model_groups(public).to_numpy()
    pts["kernel"] = public["kernel"].astype(str).map(lambda k: ALIASES.get(k, k)).to_numpy()
    pred = predict(pts, dict(calibrations) if calibrations else None)
    known = pred["kernel"].isin(set(kernel_facts())).to_numpy()
    out = best_kernel_tier(pred, calibrations, table)
    if known.any():
        named = named_kernel_tier(pred[known], calibrations, table)
        for c in named.columns.intersection(out.columns):
            out.loc[known, c] = named[c].to_numpy()
    return out


def public_points(public: pd.DataFrame) -> pd.DataFrame:
    """Imported public rows as points: kernel aliases resolved, the median over rows of one kernel at one point."""
    df = public.copy()
    df["kernel"] = df["kernel"].astype(str).map(lambda k: ALIASES.get(k, k))
    df["group_size"] = model_groups(df).fillna(-1)  # groupby keeps NaN as -1
    pts = df.groupby(list(POINT_KEY), sort=True)["time_s"].median().reset_index()
    pts["group_size"] = pts["group_size"].where(pts["group_size"] >= 0)
    return with_bytes(pts)


def check_public(public: pd.DataFrame, ref_key: str, ref_cal: Calibration, facts: Mapping[str, Any],
                 table: ParamTable, factors: TransferFactors,
                 calibrations: Mapping[str, Calibration] | None = None) -> pd.DataFrame:
    """Public points with time_pred_s in sample (`factors` as shipped) and leave one GPU out."""
    pts = public_points(public)
    library = set(LIBRARY)
    inside = predict_rows(pts, factors, ref_cal, facts, table, calibrations)
    logo = leave_one_gpu_out(pts, ref_key, ref_cal, facts, table, library, calibrations)
    return pd.concat([pts.assign(view="in sample", time_pred_s=inside),
                      pts.assign(view="leave one GPU out", time_pred_s=logo)], ignore_index=True)


def measured_points(check_points: pd.DataFrame) -> pd.DataFrame:
    """model_check.check()'s points (fastest kernel per scheme, shape, M) as rows of this table: a GPU measured here
    but never calibrated (model_check's "GPU held out") took no part in any fit, so it is left out by construction."""
    col = {"in sample": ("time_kernel_s", "in sample"), "LOSO": ("time_kernel_loso_s", "leave one shape out"),
           "GPU left out": ("time_kernel_logo_s", "leave one GPU out, its calibration kept"),
           "GPU held out": ("time_kernel_s", "leave one GPU out")}
    out = []
    for view, (c, label) in col.items():
        g = check_points[check_points["view"] == view]
        if g.empty or c not in g:
            continue
        out.append(pd.DataFrame({
            "view": label, "gpu": g["gpu_key"].astype(str),
            "scheme": g["scheme"].astype(str), "kernel": g["kernel"].astype(str), "group_size": np.nan,
            "N": g["N"], "K": g["K"], "M": g["M"], "time_s": g["time_measured_s"].astype(float),
            "time_pred_s": g[c].astype(float)}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["view", *POINT_KEY, "time_s"])


def speedup_errors(points: pd.DataFrame, baseline: str = BASELINE) -> pd.DataFrame:
    """Per point of a scheme other than `baseline`: measured and predicted speedup over the baseline at the same
    (view, gpu, N, K, M) (the fastest baseline point there), and the error pred / meas - 1."""
    base = points[points["scheme"] == baseline]
    base = base.sort_values("time_s").groupby(["view", "gpu", "N", "K", "M"], sort=False).first()
    base = base[["time_s", "time_pred_s"]].add_suffix("_base")  # not join's rsuffix: pandas 4 deprecates it
    rest = points[points["scheme"] != baseline].join(base, on=["view", "gpu", "N", "K", "M"], how="inner")
    meas = rest["time_s_base"] / rest["time_s"]
    pred = rest["time_pred_s_base"] / rest["time_pred_s"]
    return rest.assign(speedup_measured=meas, speedup_predicted=pred, speedup_error=pred / meas - 1.0)


def _stats(err: pd.Series) -> tuple[int, float, float, float]:
    e = err.to_numpy(dtype=np.float64)
    e = e[np.isfinite(e)]
    if not e.size:
        return 0, np.nan, np.nan, np.nan
    return int(e.size), float(np.median(e)), float(np.median(np.abs(e))), float(np.percentile(np.abs(e), 90))


def summarize(points: pd.DataFrame) -> pd.DataFrame:
    """SUMMARY_COLUMNS per (view, gpu, scheme) and per (view, gpu, all schemes)."""
    pts = points.assign(error=points["time_pred_s"] / points["time_s"] - 1.0)
    sp = speedup_errors(pts)
    rows = []
    for (view, gpu), g in pts.groupby(["view", "gpu"], sort=True):
        s = sp[(sp["view"] == view) & (sp["gpu"] == gpu)]
        for scheme in ["all", *sorted(set(g["scheme"]))]:
            t = g if scheme == "all" else g[g["scheme"] == scheme]
            u = s if scheme == "all" else s[s["scheme"] == scheme]
            n, sm, ma, p9 = _stats(t["error"])
            un, usm, uma, up9 = _stats(u["speedup_error"])
            rows.append({"view": view, "gpu": gpu, "scheme": scheme, "n": n, "signed_median": sm, "median_abs": ma,
                         "p90_abs": p9, "speedup_n": un, "speedup_signed_median": usm, "speedup_median_abs": uma,
                         "speedup_p90_abs": up9})
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def by_gpu(public: pd.DataFrame | None, measured_check_points: pd.DataFrame | None, ref_key: str,
           ref_cal: Calibration, facts: Mapping[str, Any], table: ParamTable,
           factors: TransferFactors | None, calibrations: Mapping[str, Calibration] | None = None) -> GpuCheck:
    """The by-GPU check of `public` rows (with `factors`; public rows of a GPU in `calibrations` take its measured
    terms) and of our measurements (model_check points)."""
    frames = []
    if public is not None and len(public) and factors is not None:
        frames.append(check_public(public, ref_key, ref_cal, facts, table, factors, calibrations))
    if measured_check_points is not None and len(measured_check_points):
        frames.append(measured_points(measured_check_points))
    points = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["view", *POINT_KEY, "time_s", "time_pred_s"])
    points = points.assign(error=points["time_pred_s"].astype(float) / points["time_s"].astype(float) - 1.0)
    return GpuCheck(points, summarize(points))
