"""Predicting with the kernel-aware tier over a DataFrame, estimating its per-kernel parameters, and validating them
honestly (leave one shape out).

`predict_kernels(points, facts, gpus, table)` adds time_kernel_s, the attribution columns, the kernel's own ceilings
and where its figures came from, for every row whose kernel declares facts. `fit_table` estimates KernelParams per
kernel and code path (a library's GEMV at small M is its own, `models.kernel_terms.kernel_paths`) by least squares on
log time (scipy, imported when fitting). `leave_one_shape_out` refits without each (N, K) in turn and predicts that
shape: the out-of-sample prediction of every row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.kernel_model import (
    ATTRIBUTION,
    PARAM_BOUNDS,
    KernelParams,
    ParamTable,
    active_params,
    combine,
    kernel_ceilings,
    raw_terms,
)
from models.kernel_terms import GpuTerms, KernelFacts, kernel_paths

OUTPUT_COLUMNS = ("time_kernel_s", *ATTRIBUTION, "kernel_bandwidth_bytes_per_s", "kernel_peak_flops_per_s",
                  "kernel_terms_source", "kernel_params_source")
FIT_MIN_POINTS = 6
# Weak priors (sigma of log(parameter / neutral)) that keep parameters the data cannot separate near their
# microbenchmark meaning: a kernel streams its bytes at about the read curve's rate, and its conversion work is about
# the microbenchmark's. They matter only where two terms are equally able to explain the times.
PRIOR_LOG_SIGMA = {"mem_scale": 0.5, "alu_dq": 2.0, "fixup_scale": 1.0}
DATA_LOG_SIGMA = 0.05  # the scale of a data residual (log time) against which the priors are weighed


def _sources(gpu: GpuTerms) -> str:
    """Where a row's GPU terms came from: "measured" (the GPU's calibration), "transferred" (models.transfer) or
    "datasheet: <the terms that fell back to the datasheet>"."""
    datasheet = [k for k in ("memory", "alu", "tensor") if gpu.sources.get(k) == "datasheet"]
    if datasheet:
        return "datasheet: " + ", ".join(datasheet)
    return "transferred" if "transferred" in gpu.sources.values() else "measured"


def predict_kernels(points: pd.DataFrame, facts: Mapping[str, KernelFacts], gpus: Callable[[str], GpuTerms],
                    table: ParamTable) -> pd.DataFrame:
    """`points` (gpu, kernel, M, N, K, bytes) with the kernel tier's columns; rows of kernels without facts get NaN
    and say so in kernel_params_source."""
    missing = [c for c in ("gpu", "kernel", "M", "N", "K", "bytes") if c not in points]
    if missing:
        raise InputError(f"kernel tier: points lack column(s) {', '.join(missing)}")
    out = points.copy()
    n = len(out)
    cols: dict[str, np.ndarray] = {c: np.full(n, np.nan) for c in OUTPUT_COLUMNS[:-2]}
    src = np.full(n, "", dtype=object)
    psrc = np.full(n, "no kernel facts", dtype=object)
    family_of = {k: f.family for k, f in facts.items()}
    keys = pd.MultiIndex.from_arrays([out["gpu"].astype(str), out["kernel"].astype(str)])
    codes, uniques = pd.factorize(keys)
    M = out["M"].to_numpy(dtype=np.float64)
    for code, (gpu_key, kernel) in enumerate(uniques):
        if kernel not in facts:
            continue
        gpu = gpus(gpu_key)
        for key, f, lo, hi in kernel_paths(kernel, facts[kernel]):
            rows = (codes == code) & (M >= lo) & (M <= hi)
            if not rows.any():
                continue
            p, how = table.lookup(key, f, family_of)
            sub = out.loc[rows]
            t = raw_terms(f, gpu, sub["M"], sub["N"], sub["K"], sub["bytes"])
            for k, v in combine(t, p).items():
                cols[k][rows] = v
            cols["kernel_bandwidth_bytes_per_s"][rows], cols["kernel_peak_flops_per_s"][rows] = kernel_ceilings(
                f, gpu, p)
            src[rows] = _sources(gpu)
            psrc[rows] = how
    for k, v in cols.items():
        out[k] = v
    out["kernel_terms_source"] = src
    out["kernel_params_source"] = psrc
    return out


def _fit_one(facts: KernelFacts, terms: list[tuple[Any, np.ndarray]],
             priors: bool) -> tuple[KernelParams, float]:
    """Least squares on log(predicted / measured) over the active parameters; returns the params and the RMS."""
    from scipy.optimize import least_squares

    names = active_params(facts)
    lo = np.array([PARAM_BOUNDS[k][0] for k in names])
    hi = np.array([PARAM_BOUNDS[k][1] for k in names])
    scale = np.array([1e-6 if k == "extra_fixed_s" else 1.0 for k in names])
    start = np.array([1e-6 if k == "extra_fixed_s" else 0.7 if k in ("tc_eff", "overlap") else 1.0 for k in names])

    def params(x: np.ndarray) -> KernelParams:
        return KernelParams(**{k: float(v) for k, v in zip(names, x * scale, strict=True)})

    prior = [(i, PRIOR_LOG_SIGMA[k]) for i, k in enumerate(names) if k in PRIOR_LOG_SIGMA and priors]

    def residual(x: np.ndarray) -> np.ndarray:
        p = params(x)
        data = [np.log(combine(t, p)["time_kernel_s"] / meas) / DATA_LOG_SIGMA for t, meas in terms]
        pulls = [np.log(max(x[i] * scale[i], 1e-3) / PARAM_BOUNDS[names[i]][2]) / sigma for i, sigma in prior]
        return np.concatenate([*data, np.array(pulls)])

    res = least_squares(residual, np.clip(start / scale, lo / scale, hi / scale), bounds=(lo / scale, hi / scale),
                        method="trf", x_scale="jac")
    n_data = sum(len(meas) for _, meas in terms)
    return params(res.x), float(np.sqrt(np.mean(res.fun[:n_data] ** 2)) * DATA_LOG_SIGMA)


def fit_table(rows: pd.DataFrame, facts: Mapping[str, KernelFacts], gpus: Callable[[str], GpuTerms],
              provenance: dict[str, Any] | None = None, priors: bool = True) -> ParamTable:
    """KernelParams per kernel from measured rows (gpu, kernel, M, N, K, bytes, time_median_s)."""
    kernels: dict[str, KernelParams] = {}
    rms: dict[str, float] = {}
    for kernel, whole in rows.groupby(rows["kernel"].astype(str), sort=True):
        if kernel not in facts:
            continue
        for key, f, lo, hi in kernel_paths(kernel, facts[kernel]):  # each code path has its own parameters
            sub = whole[whole["M"].between(lo, hi)]
            if len(sub) < FIT_MIN_POINTS:
                continue
            terms = []
            for gpu_key, g in sub.groupby(sub["gpu"].astype(str)):
                t = raw_terms(f, gpus(gpu_key), g["M"], g["N"], g["K"], g["bytes"])
                terms.append((t, g["time_median_s"].to_numpy(dtype=np.float64)))
            kernels[key], rms[key] = _fit_one(f, terms, priors)
    prov = dict(provenance or {})
    prov["points"] = int(len(rows))
    prov["rms_log_error"] = {k: round(v, 4) for k, v in rms.items()}
    return ParamTable(kernels, prov)


def _left_out(rows: pd.DataFrame, folds: pd.Series, facts: Mapping[str, KernelFacts],
              gpus: Callable[[str], GpuTerms], priors: bool) -> pd.Series:
    pred = pd.Series(np.nan, index=rows.index, dtype="float64")
    for fold in folds.drop_duplicates():
        held = folds == fold
        table = fit_table(rows[~held], facts, gpus, priors=priors)
        pred[held] = predict_kernels(rows[held], facts, gpus, table)["time_kernel_s"].to_numpy()
    return pred


def leave_one_shape_out(rows: pd.DataFrame, facts: Mapping[str, KernelFacts],
                        gpus: Callable[[str], GpuTerms], priors: bool = True) -> pd.Series:
    """time_kernel_s of every row predicted by parameters fitted without its (N, K): out of sample."""
    return _left_out(rows, rows["N"].astype(str) + "x" + rows["K"].astype(str), facts, gpus, priors)


def leave_one_gpu_out(rows: pd.DataFrame, facts: Mapping[str, KernelFacts],
                      gpus: Callable[[str], GpuTerms], priors: bool = True) -> pd.Series:
    """time_kernel_s of every row predicted by parameters fitted on the other GPUs' rows only; the GPU keeps its own
    terms (its calibration), so this asks whether kernel parameters fitted elsewhere carry over. NaN everywhere when
    fewer than two GPUs have rows."""
    gpu = rows["gpu"].astype(str)
    if gpu.nunique() < 2:
        return pd.Series(np.nan, index=rows.index, dtype="float64")
    return _left_out(rows, gpu, facts, gpus, priors)


def param_frame(table: ParamTable) -> pd.DataFrame:
    """The table as rows (kernel, parameter columns) for printing."""
    names = [f.name for f in fields(KernelParams)]
    return pd.DataFrame([{"kernel": k, **{n: getattr(p, n) for n in names}} for k, p in table.kernels.items()])
