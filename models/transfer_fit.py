"""Fitting the transfer factors (models/transfer.py) on timings of GPUs never calibrated, and validating them by
leaving one GPU out.

Rows (public timings, `workbench import`) carry gpu, kernel, scheme, group_size, M, N, K, time_s. The fit, given the
calibrated reference GPU (and any other calibrated GPUs) and the kernel parameters fitted on our own measurements
(data/model/kernel-params.json):
1. read_fraction of each calibrated GPU's memory technology: its calibrate read over its datasheet bandwidth (the
   median where several calibrated GPUs share a technology). A calibrated GPU's own rows take its measured terms.
2. From rows of *anchor* kernels (library kernels whose parameters come from our own measurements: cuBLAS,
   cuBLASLt): every other memory technology's read_fraction (rows at M <= ANCHOR_M_MAX, where the time is the bytes)
   and every other architecture's tensor_fraction (rows at every M), jointly by least squares on log time.
3. The modeled-only library kernels (models.library_kernels) get KernelParams fitted on their rows, with the GPU
   terms the factors of step 2 give (models.kernel_fit.fit_table).
`leave_one_gpu_out` refits all three without a GPU's rows (and its calibration) and predicts that GPU: its
technology then takes its class's factor (or every technology's median), and its library kernels the parameters
fitted on the other GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd

from models.errors import InputError
from models.hardware import Calibration, get_gpu
from models.kernel_fit import fit_table, predict_kernels
from models.kernel_model import ParamTable
from models.kernel_terms import GpuTerms, KernelFacts, gpu_terms
from models.roofline import _scheme_for
from models.schemes import traffic
from models.transfer import Factor, TransferFactors, arch_of, transfer_terms

ANCHOR_M_MAX = 16  # anchor rows up to this batch: the time is the weights' bytes (bf16 ridge is > 150 FLOP/B)
FRACTION_BOUNDS = (0.2, 1.0)
TENSOR_BOUNDS = (0.1, 1.5)
ROW_COLUMNS = ("gpu", "kernel", "scheme", "M", "N", "K", "time_s")


def with_bytes(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with a `bytes` column: the scheme's traffic at each row's group size (0 or NaN: the scheme's default)."""
    missing = [c for c in ROW_COLUMNS if c not in rows]
    if missing:
        raise InputError(f"transfer fit: rows lack column(s) {', '.join(missing)}")
    out = rows.reset_index(drop=True).copy()
    out["bytes"] = np.nan
    groups = out["group_size"] if "group_size" in out else pd.Series(np.nan, index=out.index)
    for (scheme, g), sub in out.groupby([out["scheme"].astype(str), groups.fillna(-1)], sort=False):
        s = _scheme_for(scheme, None if g < 0 else g)
        out.loc[sub.index, "bytes"] = traffic(s, sub["M"], sub["N"], sub["K"]).bytes
    return out


Calibrations = Mapping[str, Calibration]


def _measured_terms(calibrations: Calibrations | None) -> dict[str, GpuTerms]:
    """GpuTerms of every calibrated GPU whose calibration has a read curve."""
    out = {k: gpu_terms(k, c) for k, c in sorted((calibrations or {}).items())}
    return {k: t for k, t in out.items() if t.sources.get("memory") == "calibrated"}


def terms_lookup(factors: TransferFactors, ref_cal: Calibration, calibrations: Calibrations | None = None,
                 measured: Mapping[str, GpuTerms] | None = None) -> Any:
    """gpu key -> GpuTerms: measured for the reference and every GPU in `calibrations` (or given as `measured`
    terms), every other GPU's transferred by `factors`."""
    ref = gpu_terms(factors.reference_gpu, ref_cal)
    ref_gpu = get_gpu(factors.reference_gpu)
    own = measured if measured is not None else _measured_terms(calibrations)
    cache: dict[str, GpuTerms] = {**own, factors.reference_gpu: ref}

    def get(key: str) -> GpuTerms:
        if key not in cache:
            cache[key] = transfer_terms(get_gpu(key), ref, ref_gpu, factors)
        return cache[key]

    return get


def predict_rows(rows: pd.DataFrame, factors: TransferFactors, ref_cal: Calibration,
                 facts: Mapping[str, KernelFacts], table: ParamTable,
                 calibrations: Calibrations | None = None,
                 measured: Mapping[str, GpuTerms] | None = None) -> np.ndarray:
    """time_kernel_s of every row (with bytes) on its GPU through the transfer; NaN for kernels without facts."""
    merged = ParamTable({**factors.kernels, **table.kernels}, table.provenance)
    gpus = terms_lookup(factors, ref_cal, calibrations, measured)
    got = predict_kernels(rows.assign(gpu=rows["gpu"].astype(str)), facts, gpus, merged)
    return got["time_kernel_s"].to_numpy(dtype=np.float64)


def _stats(log_err: np.ndarray) -> tuple[float, float]:
    return (float(np.median(log_err)), float(np.percentile(np.abs(log_err), 90))) if log_err.size else (np.nan,
                                                                                                      np.nan)


def _fit_gpu_factors(anchors: pd.DataFrame, base: TransferFactors, ref_cal: Calibration,
                     facts: Mapping[str, KernelFacts], table: ParamTable,
                     calibrations: Calibrations | None) -> TransferFactors:
    """read_fraction per memory technology (rows at M <= ANCHOR_M_MAX) and tensor_fraction per architecture (rows at
    every M) of the GPUs in `anchors`, jointly by least squares on log time; the reference's own stay."""
    from scipy.optimize import least_squares

    gpu_of = anchors["gpu"].astype(str)
    tech_of = gpu_of.map(lambda g: get_gpu(g).memory_tech).to_numpy()
    arch_of_row = gpu_of.map(lambda g: arch_of(get_gpu(g))).to_numpy()
    small = anchors["M"].to_numpy() <= ANCHOR_M_MAX
    techs = sorted(set(tech_of[small]) - set(base.read_fraction))
    archs = sorted(set(arch_of_row[~small]) - set(base.tensor_fraction))
    if not techs and not archs:
        return base
    meas = anchors["time_s"].to_numpy(dtype=np.float64)
    measured = _measured_terms(calibrations)  # once: the least-squares loop changes the factors only

    def factors_at(x: np.ndarray) -> TransferFactors:
        fr = dict(base.read_fraction)
        fr.update({t: Factor(float(v), "fitted") for t, v in zip(techs, x[:len(techs)], strict=True)})
        tf = dict(base.tensor_fraction)
        tf.update({a: Factor(float(v), "fitted") for a, v in zip(archs, x[len(techs):], strict=True)})
        return TransferFactors(base.reference_gpu, fr, tf, {}, base.provenance)

    def residual(x: np.ndarray) -> np.ndarray:
        return np.log(predict_rows(anchors, factors_at(x), ref_cal, facts, table, measured=measured) / meas)

    n = len(techs) + len(archs)
    lo = np.array([FRACTION_BOUNDS[0]] * len(techs) + [TENSOR_BOUNDS[0]] * len(archs))
    hi = np.array([FRACTION_BOUNDS[1]] * len(techs) + [TENSOR_BOUNDS[1]] * len(archs))
    x = least_squares(residual, np.full(n, 0.8), bounds=(lo, hi), method="trf").x
    log_err = residual(x)
    fitted = factors_at(x)
    fr, tf = dict(base.read_fraction), dict(base.tensor_fraction)
    for t in techs:
        at = (tech_of == t) & small
        fr[t] = _described(fitted.read_fraction[t].value, anchors, at, log_err, f"M <= {ANCHOR_M_MAX}")
    for a in archs:
        at = arch_of_row == a
        tf[a] = _described(fitted.tensor_fraction[a].value, anchors, at, log_err, "every M")
    return TransferFactors(base.reference_gpu, fr, tf, {}, base.provenance)


def _described(value: float, anchors: pd.DataFrame, at: np.ndarray, log_err: np.ndarray, where: str) -> Factor:
    gpus = tuple(sorted(set(anchors.loc[at, "gpu"].astype(str))))
    kernels = ", ".join(sorted(set(anchors.loc[at, "kernel"].astype(str))))
    return Factor(value, f"fitted on {kernels} at {where}", gpus, int(at.sum()), *_stats(log_err[at]))


def calibrated_read_fractions(ref_key: str, ref_cal: Calibration,
                              calibrations: Calibrations | None = None) -> dict[str, Factor]:
    """read_fraction per memory technology of the calibrated GPUs (the reference and `calibrations`): calibrate read
    over datasheet bandwidth, the median where several GPUs share a technology."""
    terms = {**_measured_terms(calibrations), ref_key: gpu_terms(ref_key, ref_cal)}
    if terms[ref_key].sources.get("memory") != "calibrated":
        raise InputError(f"transfer fit: the reference GPU {ref_key} needs a calibration with a read curve "
                         "(`workbench calibrate` on it)")
    by_tech: dict[str, list[tuple[str, float]]] = {}
    for key, t in sorted(terms.items()):
        gpu = get_gpu(key)
        by_tech.setdefault(gpu.memory_tech, []).append((key, t.asymptotic_bandwidth() / gpu.bandwidth))
    return {tech: Factor(float(np.median([v for _, v in got])), f"calibrate read on {', '.join(k for k, _ in got)}",
                         tuple(k for k, _ in got), 0) for tech, got in by_tech.items()}


def fit_factors(rows: pd.DataFrame, ref_key: str, ref_cal: Calibration, facts: Mapping[str, KernelFacts],
                table: ParamTable, library: set[str] | frozenset[str] = frozenset(),
                calibrations: Calibrations | None = None) -> TransferFactors:
    """The transfer factors and the `library` kernels' parameters from `rows` (with bytes; see the module doc)."""
    ref_gpu = get_gpu(ref_key)
    calibrations = {k: c for k, c in (calibrations or {}).items() if k != ref_key}
    same = Factor(1.0, f"the reference ({ref_key}) itself", (ref_key,), 0)
    base = TransferFactors(ref_key, calibrated_read_fractions(ref_key, ref_cal, calibrations),
                           {arch_of(ref_gpu): same}, {}, {})
    rows = rows[rows["gpu"].astype(str) != ref_key]
    anchors = rows[rows["kernel"].astype(str).isin(set(table.kernels))]
    anchors = anchors[anchors["kernel"].astype(str).map(lambda k: k in facts)].reset_index(drop=True)
    fitted = _fit_gpu_factors(anchors, base, ref_cal, facts, table, calibrations)
    lib_rows = rows[rows["kernel"].astype(str).isin(library)]
    kernels: dict[str, Any] = {}
    rms: dict[str, float] = {}
    if len(lib_rows):
        lib = fit_table(lib_rows.assign(time_median_s=lib_rows["time_s"]), facts,
                        terms_lookup(fitted, ref_cal, calibrations))
        kernels, rms = lib.kernels, lib.provenance.get("rms_log_error", {})
    prov = {"fitted": datetime.now(UTC).isoformat(timespec="seconds"), "reference_gpu": ref_key,
            "rows": int(len(rows)), "anchor_rows": int(len(anchors)),
            "gpus": sorted(set(rows["gpu"].astype(str))),
            "library_rms_log_error": rms,
            "library_gpus": {k: sorted(set(lib_rows.loc[lib_rows["kernel"] == k, "gpu"].astype(str)))
                             for k in kernels}}
    return TransferFactors(ref_key, fitted.read_fraction, fitted.tensor_fraction, kernels, prov)


def leave_one_gpu_out(rows: pd.DataFrame, ref_key: str, ref_cal: Calibration, facts: Mapping[str, KernelFacts],
                      table: ParamTable, library: set[str] | frozenset[str] = frozenset(),
                      calibrations: Calibrations | None = None) -> np.ndarray:
    """time_kernel_s of every row predicted by factors and library parameters fitted without its GPU's rows and
    without its calibration (its terms transferred)."""
    pred = np.full(len(rows), np.nan)
    gpus = rows["gpu"].astype(str).to_numpy()
    for g in sorted(set(gpus) - {ref_key}):
        held = gpus == g
        others = {k: c for k, c in (calibrations or {}).items() if k != g}
        f = fit_factors(rows[~held], ref_key, ref_cal, facts, table, library, others)
        pred[held] = predict_rows(rows[held].reset_index(drop=True), f, ref_cal, facts, table, others)
    return pred
